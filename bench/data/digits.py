"""scikit-learn's 8x8 digits (bundled with the package, so always offline), stratified split."""
from __future__ import annotations

import numpy as np
import torch

from ..errors import BenchError
from .base import DATASETS, ClassificationData


@DATASETS.register("digits")
def load_digits(root: str | None, seed: int, test_fraction: float = 0.2) -> ClassificationData:
    from sklearn.datasets import load_digits as sk_load_digits
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_fraction < 1.0:
        raise BenchError(f"digits: test_fraction {test_fraction} must be in (0, 1)")
    bunch = sk_load_digits()
    x = (bunch.data / 16.0).astype(np.float32)  # pixel intensities are 0..16
    y = bunch.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_fraction, random_state=seed, stratify=y)
    return ClassificationData(
        train_x=torch.from_numpy(x_tr), train_y=torch.from_numpy(y_tr),
        test_x=torch.from_numpy(x_te), test_y=torch.from_numpy(y_te),
        num_classes=10, name="digits",
    )
