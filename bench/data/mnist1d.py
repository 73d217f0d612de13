"""MNIST-1D generated offline by the ``mnist1d`` package, cached as .npz per seed and size."""
from __future__ import annotations

import random
import time
import zipfile
from pathlib import Path

import numpy as np
import torch

from ..cache import cache_path, locked
from ..errors import BenchError
from .base import DATASETS, ClassificationData, check_positive, note, save_npz_atomic


def _generate(seed: int, total: int) -> tuple[np.ndarray, np.ndarray]:
    # Imported here: mnist1d pulls in matplotlib, which ``import bench.data`` should not pay for.
    import mnist1d.data as generator

    args = generator.get_dataset_args()
    args.seed = seed
    args.num_samples = total
    args.train_split = 1.0  # we split ourselves, so sizes are exact (no float rounding of the split index)
    # make_dataset reseeds the global numpy / random generators; keep the caller's streams intact.
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        made = generator.make_dataset(args)
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
    return made["x"].astype(np.float32), made["y"].astype(np.int64)


def _read_cache(path: Path, total: int) -> tuple[np.ndarray, np.ndarray]:
    """The cached arrays (np.load refuses pickled objects); a damaged or foreign file is one line naming it."""
    try:
        with np.load(path) as stored:
            x, y = stored["x"], stored["y"]
    except (ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise BenchError(f"mnist1d cache {path} is damaged ({str(err)[:100] or type(err).__name__}); remove it and "
                         "it is generated again") from None
    if x.ndim != 2 or x.shape[0] != total or y.shape != (total,):
        raise BenchError(f"mnist1d cache {path} holds arrays of shapes {x.shape} and {y.shape}, not the {total} "
                         "samples its name says; remove it and it is generated again")
    return x, y


@DATASETS.register("mnist1d")
def load_mnist1d(root: str | None, seed: int, n_train: int = 4000, n_test: int = 1000) -> ClassificationData:
    """Defaults equal the package's standard split (5000 samples, first 80 % for training)."""
    check_positive("mnist1d", n_train=n_train, n_test=n_test)
    total = n_train + n_test
    if total % 10:
        raise BenchError(f"mnist1d: n_train + n_test = {total} must be a multiple of 10 (equal samples per digit)")
    if seed < 0:
        raise BenchError(f"mnist1d: seed {seed} must be non-negative")
    cache = Path(root).expanduser() if root else cache_path("mnist1d")
    path = cache / f"mnist1d_seed{seed}_train{n_train}_test{n_test}.npz"
    if not path.exists():
        with locked(path):  # parallel jobs on one data set generate it once
            if not path.exists():  # or another job made it while this one waited
                note(f"generating mnist1d (seed {seed}, {n_train} + {n_test} samples) into {path}")
                tick = time.perf_counter()
                x, y = _generate(seed, total)
                save_npz_atomic(path, x=x, y=y)
                note(f"generated mnist1d in {time.perf_counter() - tick:.1f} s (cached for later runs)")
    x, y = _read_cache(path, total)
    x_t, y_t = torch.from_numpy(x), torch.from_numpy(y)
    return ClassificationData(
        train_x=x_t[:n_train], train_y=y_t[:n_train], test_x=x_t[n_train:], test_y=y_t[n_train:],
        num_classes=10, name="mnist1d",
    )
