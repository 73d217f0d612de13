"""CIFAR-10 from a local copy of its python version (``cifar-10-batches-py``), normalised per channel."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch

from ..cache import cache_path
from ..errors import BenchError
from .base import DATASETS, ClassificationData

# Per-channel statistics of the 50 000 training images (pixel values scaled to [0, 1]).
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
LAYOUT = "ROOT/cifar-10-batches-py/{data_batch_1..data_batch_5,test_batch} (CIFAR-10 python version)"


def find_batches_dir(root: Path) -> Path:
    """ROOT may be the folder holding ``cifar-10-batches-py`` or that folder itself."""
    for candidate in (root / "cifar-10-batches-py", root):
        if all((candidate / f).is_file() for f in (*TRAIN_FILES, TEST_FILE)):
            return candidate
    for candidate in (root / "cifar-10-batches-py", root):
        missing = [f for f in (*TRAIN_FILES, TEST_FILE) if not (candidate / f).is_file()]
        if len(missing) < len(TRAIN_FILES) + 1:  # a partial copy: name what is missing there
            raise BenchError(
                f"cifar10 data in {candidate} is incomplete: missing {', '.join(missing)}; expected {LAYOUT}"
            )
    raise BenchError(f"cifar10 data not found under {root}; expected {LAYOUT}")


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as handle:
        batch = pickle.load(handle, encoding="bytes")
    try:
        data, labels = batch[b"data"], batch[b"labels"]
    except (KeyError, TypeError):
        raise BenchError(
            f"{path} is not a CIFAR-10 python batch (needs b'data' and b'labels'); expected {LAYOUT}"
        ) from None
    return np.asarray(data, dtype=np.uint8), np.asarray(labels, dtype=np.int64)


def _pixels(data: np.ndarray) -> torch.Tensor:
    # Rows hold 1024 red, then 1024 green, then 1024 blue values, each a row-major 32x32 image.
    return torch.from_numpy(data.reshape(-1, 3, 32, 32).copy())


@DATASETS.register("cifar10")
def load_cifar10(root: str | None, seed: int) -> ClassificationData:
    folder = find_batches_dir(Path(root).expanduser() if root else cache_path("cifar10"))
    parts = [_read_batch(folder / f) for f in TRAIN_FILES]
    test_data, test_labels = _read_batch(folder / TEST_FILE)
    return ClassificationData(
        # kept as uint8 (150 MB for the 50,000 training images, small enough to live on the GPU);
        # batches are normalised after they are gathered
        train_x=_pixels(np.concatenate([p[0] for p in parts])),
        train_y=torch.from_numpy(np.concatenate([p[1] for p in parts])),
        test_x=_pixels(test_data), test_y=torch.from_numpy(test_labels),
        num_classes=10, name="cifar10", pixel_stats=(CIFAR10_MEAN, CIFAR10_STD),
    )
