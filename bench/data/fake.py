"""Synthetic data sets written in the real on-disk formats (CIFAR-10 python batches, WikiText-2 token
files, ImageNet-style image folders), read back by the suite's own loaders: the tests use them, and
`bench plan` times real training steps on them where the real data is not at hand."""
from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np


def write_cifar(folder, per_batch: int = 10, test_size: int | None = None, seed: int = 0) -> Path:
    """Five training batches of ``per_batch`` random images and a test batch of ``test_size`` (default
    ``per_batch``). The first image of every batch is black but for one green pixel (row 5, column 7),
    which tests read back to check the channel and pixel order."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        count = test_size if name == "test_batch" and test_size is not None else per_batch
        data = rng.integers(0, 256, size=(count, 3072), dtype=np.uint8)
        data[0, :] = 0
        data[0, 1024 + 5 * 32 + 7] = 255  # green channel, row 5, column 7 of the first image
        labels = list(rng.integers(0, 10, size=count))
        with open(folder / name, "wb") as handle:
            pickle.dump({b"data": data, b"labels": [int(v) for v in labels]}, handle)
    return folder


def write_imagefolder(root) -> Path:
    """Two classes (one of PNG files, one of JPEG files) of three images of different sizes per split,
    and a stray text file the loader must skip."""
    from PIL import Image

    root = Path(root)
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for cls, ext in (("n02", ".png"), ("n01", ".JPEG")):
            folder = root / split / cls
            folder.mkdir(parents=True)
            for k in range(3):
                pixels = rng.integers(0, 256, size=(40 + 7 * k, 50, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"img{k}{ext}", format="PNG" if ext == ".png" else "JPEG")
        (root / split / "n01" / "notes.txt").write_text("not an image")
    return root


def write_imagenet(root, train: int, val: int, classes: int = 10, size: tuple[int, int] = (375, 500),
                   distinct: int = 16, seed: int = 0) -> Path:
    """An ImageNet-style tree of ``train`` and ``val`` JPEG files of ``size`` (height, width; ImageNet's
    typical 375 x 500 by default) spread over ``classes`` folders. Only ``distinct`` images are encoded;
    the other files are hard links to them (decoding cost is per file read, not per distinct image)."""
    from PIL import Image

    root = Path(root)
    classes = max(1, min(classes, train))  # every validation class has training images too
    rng = np.random.default_rng(seed)
    store = root / ".distinct"
    store.mkdir(parents=True)
    sources = []
    for k in range(distinct):
        path = store / f"img{k}.JPEG"
        Image.fromarray(rng.integers(0, 256, size=(*size, 3), dtype=np.uint8)).save(path, format="JPEG")
        sources.append(path)
    for split, count in (("train", train), ("val", val)):
        for i in range(count):
            folder = root / split / f"n{i % classes:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            os.link(sources[i % distinct], folder / f"img{i}.JPEG")
    return root


def write_wikitext(folder, lines: int = 200, seed: int = 0, vocab: int = 50, words_per_line: int = 12,
                   eval_lines: int | None = None, cover_vocab: bool = False) -> Path:
    """Three token files (train, valid, test) of random sentences over a ``vocab``-word vocabulary:
    ``lines`` training lines and ``eval_lines`` (default lines // 4) in each evaluation split. With
    ``cover_vocab`` the training text first lists every word once, so the vocabulary the loader builds
    from it has ``vocab`` words plus ``<eos>`` and ``<unk>``."""
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(vocab)])
    folder.mkdir(parents=True, exist_ok=True)
    eval_lines = lines // 4 if eval_lines is None else eval_lines
    for split, count in (("train", lines), ("valid", eval_lines), ("test", eval_lines)):
        body = [" ".join(rng.choice(words, size=words_per_line)) for _ in range(count)]
        if split == "train" and cover_vocab:
            body = [" ".join(words[i:i + words_per_line]) for i in range(0, vocab, words_per_line)] + body
        (folder / f"wiki.{split}.tokens").write_text("\n".join(body) + "\n", encoding="utf-8")
    return folder
