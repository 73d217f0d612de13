"""Linear model x ↦ ⟨w, x⟩ + b for least squares (``lsq``) and logistic regression (``logreg``, a logit)."""
from __future__ import annotations

import torch
from torch import nn

from .util import positive_int


class LinearModel(nn.Module):
    def __init__(self, in_features: int, bias: bool = True):
        super().__init__()
        positive_int("in_features", in_features)
        self.fc = nn.Linear(in_features, 1, bias=bool(bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # One scalar per example ([B], not [B, 1]) matches mse_loss and binary_cross_entropy_with_logits
        # targets of shape [B] without silent broadcasting to [B, B].
        return self.fc(x).squeeze(-1)
