"""Tiny data sets in the real on-disk formats, written by tests (CIFAR-10 python batches,
WikiText-2 token files, an ImageNet-style image folder)."""
import pickle

import numpy as np


def write_cifar(folder, per_batch=10):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        data[0, :] = 0
        data[0, 1024 + 5 * 32 + 7] = 255  # green channel, row 5, column 7 of the first image
        labels = list(rng.integers(0, 10, size=per_batch))
        with open(folder / name, "wb") as handle:
            pickle.dump({b"data": data, b"labels": [int(v) for v in labels]}, handle)


def write_imagefolder(root):
    from PIL import Image

    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for cls, ext in (("n02", ".png"), ("n01", ".JPEG")):
            folder = root / split / cls
            folder.mkdir(parents=True)
            for k in range(3):
                pixels = rng.integers(0, 256, size=(40 + 7 * k, 50, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"img{k}{ext}", format="PNG" if ext == ".png" else "JPEG")
        (root / split / "n01" / "notes.txt").write_text("not an image")




def write_wikitext(folder, lines=200, seed=0):
    """Three token files of random sentences over a 50-word vocabulary."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(50)]
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", lines), ("valid", lines // 4), ("test", lines // 4)):
        text = "\n".join(" ".join(rng.choice(words, size=12)) for _ in range(count)) + "\n"
        (folder / f"wiki.{split}.tokens").write_text(text, encoding="utf-8")
