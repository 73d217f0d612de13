"""Synthetic convex problems with a known optimum: least squares (``lsq``) and logistic regression
(``logreg``), so runs can report sub-optimality f(x) - f* as in the paper's convex experiments."""
from __future__ import annotations

import numpy as np
import torch

from ..errors import BenchError
from ..limits import MAX_SYNTHETIC_ENTRIES
from .base import DATASETS, SyntheticData, check_positive


def _features(rng: np.random.Generator, n_train: int, n_test: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    if (n_train + n_test) * dim > MAX_SYNTHETIC_ENTRIES:
        raise BenchError(f"task_options: (n_train + n_test) x dim = {(n_train + n_test) * dim:.3g} features; "
                         f"at most {MAX_SYNTHETIC_ENTRIES:.3g} (2 GiB of float64)")
    x = rng.standard_normal((n_train + n_test, dim))
    # Rounded to float32 before anything else so the optimum is exact for the tensors we hand out.
    return x.astype(np.float32).astype(np.float64), rng.standard_normal(dim) / np.sqrt(dim)


def _pack(x, y, n_train, w_star, w_opt, optimum_loss, l2, num_classes, name, y_dtype) -> SyntheticData:
    xt, yt = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(y_dtype))
    return SyntheticData(
        train_x=xt[:n_train], train_y=yt[:n_train], test_x=xt[n_train:], test_y=yt[n_train:],
        num_classes=num_classes, name=name, w_star=torch.from_numpy(w_star), w_opt=torch.from_numpy(w_opt),
        optimum_loss=float(optimum_loss), l2=l2,
    )


@DATASETS.register("lsq")
def load_lsq(root: str | None, seed: int, n_train: int = 1000, n_test: int = 250, dim: int = 20,
             noise: float = 0.1) -> SyntheticData:
    """y = x·w* + noise·N(0, 1). Loss convention: f(w) = mean((x·w - y)²) / 2 over the training set."""
    check_positive("lsq", n_train=n_train, n_test=n_test, dim=dim)
    if noise < 0:
        raise BenchError(f"lsq: noise {noise} must be >= 0")
    rng = np.random.default_rng(seed)
    x, w_star = _features(rng, n_train, n_test, dim)
    y = (x @ w_star + noise * rng.standard_normal(len(x))).astype(np.float32).astype(np.float64)
    w_opt, *_ = np.linalg.lstsq(x[:n_train], y[:n_train], rcond=None)
    residual = x[:n_train] @ w_opt - y[:n_train]
    return _pack(x, y, n_train, w_star, w_opt, 0.5 * np.mean(residual**2), 0.0, 0, "lsq", np.float32)


def logistic_loss(w: np.ndarray, x: np.ndarray, y01: np.ndarray, l2: float) -> float:
    """mean log(1 + exp(-s·x·w)) + l2/2·|w|², s = 2y - 1 (equals binary cross-entropy on 0/1 labels)."""
    margins = (2 * y01 - 1) * (x @ w)
    return float(np.mean(np.logaddexp(0.0, -margins)) + 0.5 * l2 * w @ w)


def _newton_logreg(x: np.ndarray, y01: np.ndarray, l2: float) -> np.ndarray:
    # The problem is small and strongly convex (l2 > 0), so damped Newton reaches machine precision.
    w = np.zeros(x.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - y01) / len(x) + l2 * w
        if np.linalg.norm(grad) < 1e-12:
            break
        hess = (x.T * (p * (1 - p))) @ x / len(x) + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        t, base = 1.0, logistic_loss(w, x, y01, l2)
        while logistic_loss(w - t * step, x, y01, l2) > base and t > 1e-8:
            t /= 2
        w = w - t * step
    return w


@DATASETS.register("logreg")
def load_logreg(root: str | None, seed: int, n_train: int = 1000, n_test: int = 250, dim: int = 20,
                scale: float = 3.0, l2: float | None = None) -> SyntheticData:
    """Labels y ~ Bernoulli(sigmoid(scale·x·w*)). Loss: see ``logistic_loss``; l2 defaults to 1/n_train
    (the paper's choice for its logistic-regression experiments)."""
    check_positive("logreg", n_train=n_train, n_test=n_test, dim=dim)
    l2 = 1.0 / n_train if l2 is None else float(l2)
    if l2 <= 0:
        raise BenchError(f"logreg: l2 {l2} must be > 0 (it makes the optimum unique)")
    rng = np.random.default_rng(seed)
    x, w_star = _features(rng, n_train, n_test, dim)
    w_star = w_star * scale  # larger scale -> cleaner labels
    y = (rng.random(len(x)) < 1.0 / (1.0 + np.exp(-(x @ w_star)))).astype(np.float64)
    w_opt = _newton_logreg(x[:n_train], y[:n_train], l2)
    loss = logistic_loss(w_opt, x[:n_train], y[:n_train], l2)
    return _pack(x, y, n_train, w_star, w_opt, loss, l2, 2, "logreg", np.int64)
