"""Average consensus as a task: no gradient, each worker starts from its own random vector.

With ``grad=None`` Choco is Choco-Gossip and D-PSGD is exact gossip; the runner's consensus
distance is then the squared error to the exact initial average (gossip keeps the average).
"""
from __future__ import annotations

from typing import Any, Iterator

import torch

from .base import TASKS, Task, TaskSetup


@TASKS.register("consensus")
class ConsensusTask(Task):
    name = "consensus"
    has_gradient = False
    metric_names = ()
    default_options: dict[str, Any] = {"dim": 2000, "steps_per_epoch": 100}

    def __init__(self, setup: TaskSetup):
        super().__init__(setup)
        self.d = int(self.options["dim"])
        self.segments = [self.d]
        self.train_size = self.test_size = 0
        self.steps_per_epoch = int(self.options["steps_per_epoch"])

    def init_params(self) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.setup.seed)
        full = torch.randn(self.setup.n_workers, self.d, generator=gen)
        return full[self.setup.lo:self.setup.hi].to(self.device)

    def batches(self, epoch: int) -> Iterator[None]:
        for _ in range(self.steps_per_epoch):
            yield None

    def gradients(self, x, batch):
        raise RuntimeError("the consensus task has no gradient")

    def evaluate(self, flat: torch.Tensor, buffers=None) -> dict[str, float]:
        return {}
