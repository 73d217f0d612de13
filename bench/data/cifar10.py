"""CIFAR-10 from a local copy of its python version (``cifar-10-batches-py``), normalised per channel."""
from __future__ import annotations

import codecs
import io
import pickle
from pathlib import Path

import numpy as np
import torch

from ..cache import cache_path
from ..errors import BenchError
from ..files import read_regular
from .base import DATASETS, ClassificationData

try:  # numpy >= 2
    from numpy import _core as _np_core
except ImportError:  # numpy 1.x
    from numpy import core as _np_core

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


# What the python batches are made of besides dicts, lists, numbers and byte strings: numpy arrays, as the real
# files (Python 2, protocol 2: numpy.core names) and numpy 2 (numpy._core names; _frombuffer at protocol 5,
# scalar for numpy-integer labels) write them, and the codec a protocol-2 pickle of Python 3 bytes calls.
# Nothing else is looked up, so a pickle cannot name a function that runs code (os.system, builtins.exec...).
_SAFE_GLOBALS = {
    **{(f"numpy.{core}.multiarray", name): getattr(_np_core.multiarray, name)
       for core in ("core", "_core") for name in ("_reconstruct", "scalar")},
    **{(f"numpy.{core}.numeric", "_frombuffer"): _np_core.numeric._frombuffer for core in ("core", "_core")},
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): codecs.encode,
}


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles data only: every global a pickle names must be one of ``_SAFE_GLOBALS``."""

    def __init__(self, handle, path: Path):
        super().__init__(handle, encoding="bytes")
        self.path = path

    def find_class(self, module: str, name: str):
        try:
            return _SAFE_GLOBALS[(module, name)]
        except KeyError:
            raise BenchError(f"{self.path}: refused to unpickle {module}.{name} (a CIFAR-10 python batch holds only "
                             "dicts, lists, numbers, byte strings and numpy arrays; nothing is run from it)") from None


def _field(batch: dict, key: str):
    return batch[key.encode()] if key.encode() in batch else batch[key]


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with io.BytesIO(read_regular(path)) as handle:  # a plain file, never a pipe put in its place
        try:
            batch = _BatchUnpickler(handle, path).load()
        except BenchError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
                OverflowError) as err:
            raise BenchError(f"{path} is not a CIFAR-10 python batch (unreadable pickle: "
                             f"{str(err).splitlines()[0][:100] if str(err) else type(err).__name__}); "
                             f"expected {LAYOUT}") from None
    try:
        data, labels = np.asarray(_field(batch, "data")), np.asarray(_field(batch, "labels"))
    except (KeyError, TypeError, ValueError):
        data = labels = None
    if not _is_batch(data, labels):
        raise BenchError(f"{path} is not a CIFAR-10 python batch (needs b'data': uint8 rows of 3072 pixels and "
                         f"b'labels': one class 0..9 per row); expected {LAYOUT}")
    return data, labels.astype(np.int64)


def _is_batch(data: np.ndarray | None, labels: np.ndarray | None) -> bool:
    if data is None or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        return False
    if labels.shape != (len(data),) or (labels.size and labels.dtype.kind not in "iu"):
        return False
    return not labels.size or 0 <= labels.min() <= labels.max() < 10


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
