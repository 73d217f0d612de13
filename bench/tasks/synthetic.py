"""The synthetic convex problems with a known optimum f*, least squares (``lsq``) and logistic regression
(``logreg``): a linear model trained as the supervised tasks are, whose evaluations also record f(x̄) − f*."""
from __future__ import annotations

from typing import Any

import torch
from torch.func import functional_call

from .base import register
from .supervised import SupervisedTask, half_mean_square

class SyntheticTask(SupervisedTask):
    """Convex problems with a known optimum: metrics add ``train_subopt`` = f(x̄) − f*."""

    options = {"eval_batch": 1000, "n_train": 1000, "n_test": 250, "dim": 20}
    metrics = ("test_loss", "test_acc", "train_subopt")
    model_name = "linear"
    dataset_options = ("n_train", "n_test", "dim")
    vectorized_for_one = True  # two batched products (gradients below), cheaper than one autograd pass

    def model_kwargs(self) -> dict[str, Any]:
        return {"in_features": int(self.data.train_x.shape[1]), "bias": False}

    def largest_tensor(self) -> int | None:
        # a step's batch [workers, B, features]; an evaluation's data (the training set, the test set)
        features = int(self.data.train_x[0].numel())
        return max(self.setup.local_workers * self.setup.batch_size, self.train_size, self.test_size) * features

    def penalty(self, row: torch.Tensor) -> torch.Tensor | None:
        """0.5·l2·‖w‖² of a row ``[d]``, or of each row of ``[n, d]``; None without an L2 term."""
        l2 = getattr(self.data, "l2", 0.0)
        return 0.5 * l2 * row.pow(2).sum(-1) if l2 else None

    def gradients(self, x: torch.Tensor, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The vectorised path of a linear model is its gradient in closed form, for all n workers at once: with
        outputs o_i = X_i·w_i over worker i's batch of B rows, both losses have ∂loss_i/∂o_i = (p_i − y_i)/B,
        p = o for least squares (0.5·mean of squares) and p = sigmoid(o) for the logistic loss, so the gradient
        is X_iᵀ(p_i − y_i)/B (+ l2·w_i with the L2 term): two batched products and no autograd, whose per-call
        machinery costs several times this arithmetic on a small problem (docs/performance.md, "Per-step
        cost"). tests/test_tasks.py checks it against autograd and the per-worker loop. The loop is unchanged."""
        if self.gradient_path is None:
            self.prepare(x)
        if self.gradient_path != "vmap":
            return super().gradients(x, batch)
        inputs, targets = self.fetch(batch)
        with torch.no_grad():
            w = x.detach()  # [n, d]: w of each worker (no bias)
            out = torch.bmm(inputs, w.unsqueeze(2)).squeeze(2)  # [n, B]
            if self.loss_kind == "mse":  # the loss's o − y is the residual: taken once for both
                residual = out - targets.to(out.dtype)
                losses = half_mean_square(residual, per_row=True)
            else:
                losses = self.loss(out, targets, per_row=True)
                residual = torch.sigmoid(out).sub_(targets.to(out.dtype))
            residual.div_(out.shape[1])
            grads = torch.bmm(residual.unsqueeze(1), inputs).squeeze(1)  # [n, d]
            pen = self.penalty(w)
            if pen is not None:
                losses = losses + pen
                grads.add_(w, alpha=self.data.l2)
        return grads, losses

    @torch.no_grad()
    def objective(self, flat: torch.Tensor) -> float:
        """f(``flat``) in float64, as f* is: the loss on the whole training set plus the L2 penalty, from
        float64 casts of the parameters and of the data (which hold f*'s float64 values exactly)."""
        w, total = flat.detach().to(torch.float64), 0.0
        for xb, yb in self._chunks(self.train_x, self.train_y):
            out = functional_call(self.model, self.flat.views(w), (xb.to(torch.float64),))
            total = total + self.loss(out, yb.to(torch.float64) if yb.is_floating_point() else yb) * len(yb)
        pen = self.penalty(w)
        return float(total / self.train_size + (0.0 if pen is None else pen))

    def evaluate(self, flat: torch.Tensor, buffers: torch.Tensor | None = None) -> dict[str, float]:
        out = super().evaluate(flat, buffers)
        if self.has_validation:  # f* is the optimum of the full training set, not of what is left of it
            return out
        # both sides in float64: a float32 f(x̄) is off by ~1e-7 relative, below zero near the optimum
        out["train_subopt"] = self.objective(flat) - self.data.optimum_loss
        return out


for _name, _loss in (("lsq", "mse"), ("logreg", "bce")):
    register(type(_name, (SyntheticTask,), {"name": _name, "dataset": _name, "loss_kind": _loss}))

