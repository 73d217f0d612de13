"""ImageNet (or any ImageFolder tree) read lazily with PIL: ``ROOT/{train,val}/<class>/<image>``."""
from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..cache import cache_path
from ..errors import BenchError
from ..files import read_regular
from .base import DATASETS, note

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
EXTENSIONS = {".jpeg", ".jpg", ".png"}
LAYOUT = "ROOT/train/<class>/*.JPEG|jpg|png and ROOT/val/<class>/... (one folder per class)"


class ImageFolderDataset(Dataset):
    """Items are ``(float32 [3, size, size], int label)``. Training crops are drawn from a generator
    seeded by (seed, epoch, index), so they do not depend on DataLoader workers or read order."""

    def __init__(self, samples: list[tuple[Path, int]], classes: list[str], train: bool, size: int, seed: int):
        self.samples, self.classes, self.train, self.size, self.seed = samples, classes, train, size, seed
        self.epoch = 0
        self.targets = torch.tensor([label for _, label in samples], dtype=torch.int64)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        path, label = self.samples[i]
        try:
            with Image.open(io.BytesIO(read_regular(path))) as image:  # a plain file, never a pipe
                image = image.convert("RGB")
                if self.train:
                    image = self._random_resized_crop(image, np.random.default_rng([self.seed, self.epoch, i]))
                else:
                    image = self._center_crop(image)
        except (OSError, Image.DecompressionBombError) as err:
            if getattr(err, "errno", None) is not None:
                raise  # the system's failure (a vanished file, a failing disk), not the file's content
            raise BenchError(f"{path} is not an image the suite can read ({str(err)[:120]}); "
                             "remove or replace it") from None
        return _normalise(image), label

    def _random_resized_crop(self, image, rng: np.random.Generator):
        from PIL import Image

        width, height = image.size
        area = width * height
        box = None
        for _ in range(10):  # the usual scale (0.08, 1) and aspect ratio (3/4, 4/3), 10 attempts
            target = area * rng.uniform(0.08, 1.0)
            ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
            w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
            if 0 < w <= width and 0 < h <= height:
                left, top = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
                box = (left, top, left + w, top + h)
                break
        if box is None:  # fall back to the largest central square
            side = min(width, height)
            box = ((width - side) // 2, (height - side) // 2, (width + side) // 2, (height + side) // 2)
        image = image.resize((self.size, self.size), Image.BILINEAR, box=box)
        if rng.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        return image

    def _center_crop(self, image):
        from PIL import Image

        short = round(self.size * 256 / 224)  # resize 256 / crop 224, scaled to the chosen size
        width, height = image.size
        scale = short / min(width, height)
        width, height = max(self.size, round(width * scale)), max(self.size, round(height * scale))
        image = image.resize((width, height), Image.BILINEAR)
        left, top = (width - self.size) // 2, (height - self.size) // 2
        return image.crop((left, top, left + self.size, top + self.size))


def _normalise(image) -> torch.Tensor:
    x = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
    return (x - torch.tensor(IMAGENET_MEAN).view(3, 1, 1)) / torch.tensor(IMAGENET_STD).view(3, 1, 1)


@dataclass
class ImageFolderData:
    train: ImageFolderDataset
    test: ImageFolderDataset
    num_classes: int
    classes: list[str]
    name: str


def _class_dirs(split_dir: Path) -> list[str]:
    return sorted(p.name for p in split_dir.iterdir() if p.is_dir())


def _samples(split_dir: Path, classes: list[str]) -> list[tuple[Path, int]]:
    samples = []
    for label, name in enumerate(classes):
        folder = split_dir / name
        if not folder.is_dir():
            continue  # a validation set may lack some classes
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in EXTENSIONS)
        samples.extend((p, label) for p in files)
    return samples


@DATASETS.register("imagenet")
def load_imagenet(root: str | None, seed: int, size: int = 224) -> ImageFolderData:
    if not isinstance(size, int) or size < 8:
        raise BenchError(f"imagenet: size {size!r} must be an integer >= 8")
    base = Path(root).expanduser() if root else cache_path("imagenet")
    train_dir, val_dir = base / "train", base / "val"
    if not train_dir.is_dir() or not val_dir.is_dir():
        raise BenchError(f"imagenet data not found under {base}; expected {LAYOUT}")
    classes = _class_dirs(train_dir)
    extra = sorted(set(_class_dirs(val_dir)) - set(classes))
    if extra:
        raise BenchError(f"imagenet: class folder {extra[0]!r} in {val_dir} has no counterpart in {train_dir}")
    note(f"indexing imagenet images under {base} ({len(classes)} classes)")
    tick = time.perf_counter()
    train, test = _samples(train_dir, classes), _samples(val_dir, classes)
    note(f"indexed {len(train)} training and {len(test)} validation images in {time.perf_counter() - tick:.1f} s")
    if not train or not test:
        empty = train_dir if not train else val_dir
        raise BenchError(f"imagenet: no images (.JPEG/.jpg/.png) in class folders of {empty}; expected {LAYOUT}")
    return ImageFolderData(
        train=ImageFolderDataset(train, classes, True, size, seed),
        test=ImageFolderDataset(test, classes, False, size, seed),
        num_classes=len(classes), classes=classes, name="imagenet",
    )
