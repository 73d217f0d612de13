"""What every algorithm is: pure tensor maths on stacked worker state through a communicator, on top of what the
method declares of itself (bench/algorithms/method.py).

An algorithm owns the workers' parameters ``x [w, d]`` and whatever buffers it needs; ``step``
takes the gradients at ``x`` and returns the traffic it caused. It never logs, times or writes.
"""
from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from typing import ClassVar, Sequence

import torch

from ..comm import Communicator, Traffic
from ..compressors import Compressor, make_compressor
from ..errors import BenchError
from .knobs import AUTO
from .local import LocalStep
from .method import ALGORITHMS, Method, parse_options, register  # noqa: F401  (a method's module imports them here)


class Algorithm(Method, ABC):
    """A method: its maths, on top of what it declares (``Method``: name, label, flags, options and the checks
    of a compressor, graph and network). A module defines one with ``@register`` on its class."""

    examples: ClassVar[tuple[dict, ...]] = ({},)  # options the generic tests run every algorithm with
    # Its laws, each held over every algorithm by one test in tests/test_laws.py. exact_forms: (its options, the
    # method it then is with exact messages, that method's options); the method is a registered one or a reference
    # the test writes out (gradient-tracking, nids, exact-diffusion, gossip-then-step, step-then-gossip,
    # sgd-on-the-mean), on static graphs and a changing one (a reference mixing with the round's W_t, gradient
    # tracking with the W_{t-1} its copies were refreshed by, gossip-then-step with the lag it is given).
    # same_run_as: likewise, but the same run message for message whatever is sent.
    exact_forms: ClassVar[tuple[tuple[dict, str, dict], ...]] = ()
    same_run_as: ClassVar[tuple[tuple[dict, str, dict], ...]] = ()
    # the messages a round sends on each of its links (each of the compressor's bits; None: its own count, e.g.
    # AD-PSGD's waves), and in its first round where that differs (copies that start at 0, a set-up exchange)
    messages_per_round: ClassVar[int | None] = 1
    first_round_messages: ClassVar[int | None] = None
    # the buffer that tracks the average direction, mean(v) = mean(d), whatever is sent (gradient tracking)
    tracker: ClassVar[str | None] = None
    # (compressor, options) under which, on heterogeneous data with exact gradients and a constant step, it reaches
    # the optimum of the mean objective, where D-PSGD keeps a bias (gradient tracking, exact diffusion)
    exact_optimum: ClassVar[tuple[tuple[str, dict], ...]] = ()
    # (compressor, options, rounds, fraction) under which gossip alone (no gradient) on a ring of 8 keeps the average
    # and brings the models' spread below that fraction of the start: exact consensus, or where error feedback stalls
    gossip_alone: ClassVar[tuple[tuple[str, dict, int, float], ...]] = ()
    # (the buffer, "step" or "gradient") that holds what compression has not applied yet, in the units of a step η·d
    # or of a direction d: error feedback, which only delays what it drops (mean(x_T) = x_0 − η Σ mean(d_t) + it)
    error_feedback: ClassVar[tuple[str, str] | None] = None
    # (compressor, options, momentum, tolerance) under which, on heterogeneous workers with exact gradients and a
    # decaying step η_t = 0.2/(1 + t/50), it reaches the optimum of the mean objective within that relative error
    # in 3000 steps: what compression drops is only delayed (error feedback), not lost nor weighted unequally
    decaying_optimum: ClassVar[tuple[tuple[str, dict, float, float], ...]] = ()

    def __init__(
        self,
        x0: torch.Tensor,
        comm: Communicator,
        compressor: Compressor | None = None,
        local: LocalStep | None = None,
        options=None,
        generator: torch.Generator | None = None,
        segments: Sequence[int] | None = None,
        shapes: Sequence[tuple[int, ...]] | None = None,
    ):
        self.x = x0.clone()
        self.comm = comm
        self.compressor = compressor or make_compressor("none")
        self.check_compressor(self.compressor)
        self.local = local or LocalStep()
        self.options = options if options is not None else self.Options()
        # a knob left to auto is found now (the runner resolves it first, with its seed and messages); the graph
        # is asked for only then
        auto = any(getattr(self.options, f.name) == AUTO for f in dataclasses.fields(self.options))
        self.options, self.resolved = self.resolve_options(self.options, comm.topology if auto else None,
                                                           self.compressor)
        self.generator = generator
        self.segments = list(segments) if segments is not None else None
        # each segment's tensor shape (a layer's weight matrix, ...), for methods that compress by shape
        # (low rank); None: one flat segment per worker, or no layer structure
        self.shapes = [tuple(s) for s in shapes] if shapes is not None else None
        if self.shapes is not None and (self.segments is None or [math.prod(s) for s in self.shapes] != self.segments):
            raise BenchError("shapes must match segments: one shape per segment, of its size")
        self.setup()

    @classmethod
    def resolve_options(cls, options, topology, compressor, seed: int = 0, quiet: bool = True):
        """``options`` with every knob left to ``auto`` given its value on ``topology`` with ``compressor``
        (``seed`` names a random graph; ``quiet``: say nothing), and what run.json records of how it was found.
        A method without such a knob has no consensus step to record."""
        return options, {"gamma": {"value": None, "source": "unused"}}

    def setup(self) -> None:
        """Allocate algorithm buffers from ``self.x``."""

    @abstractmethod
    def step(self, grad: torch.Tensor | None, lr: float) -> Traffic:
        """One synchronous round. ``grad=None`` means no gradient (pure gossip, e.g. consensus)."""

    def start_round(self) -> None:
        """Called by the runner before it computes the round's gradients: a method may post here what the round
        sends that does not depend on them (``comm.post_gossip``), and finish it in ``step``. ``step`` must also
        work when this was not called (benchmarks and tests call it alone)."""

    def gradient_point(self) -> torch.Tensor:
        """Where the runner takes the next step's gradients ``[w, d]``: the models, or what a method computes
        on instead (AD-PSGD: each worker's snapshot, read when its computation started)."""
        return self.x

    def second_gradient_point(self) -> torch.Tensor | None:
        """Where the runner takes a second gradient ``[w, d]`` on the round's batch before ``step``, handed over by
        ``take_second_gradient`` (DoCoM's STORM correction: its previous model); None: one gradient a round."""
        return None

    def take_second_gradient(self, grad: torch.Tensor) -> None:
        raise NotImplementedError(f"{self.name} asks for no second gradient")

    def initial_batches(self) -> int:
        """How many of the epoch's first batches the first step's gradient averages (DoCoM's large first batch)."""
        return 1

    def compute_units(self) -> float | None:
        """After a step: how long it computed, in units of one gradient's compute time, when the method keeps
        its own clock (AD-PSGD: the wave's advance); None: a synchronous round (the runner's straggler factor)."""
        return None

    def _direction(self, grad: torch.Tensor | None) -> torch.Tensor | None:
        return None if grad is None else self.local.direction(self.x, grad)

    def _descend(self, grad: torch.Tensor | None, lr: float) -> None:
        """``x −= lr · d`` with the local step's direction d, in place; nothing without a gradient."""
        if grad is not None:
            self.local.descend(self.x, grad, lr)

    def _compress(self, v: torch.Tensor, out: torch.Tensor | None = None):
        """The compressor's message of ``v`` (``out``: where its values may go), drawn from this method's generator."""
        return self.compressor.compress(v, self.generator, self.segments, out=out)

    # Checkpointing: every tensor/int attribute named in `buffers` plus the local step.
    buffers: ClassVar[tuple[str, ...]] = ()
    epoch: float = 0.0  # the run's epoch at this round (the runner sets it; a schedule by epoch reads it)

    def state_dict(self) -> dict:
        state = {"x": self.x, "local": self.local.state_dict()}
        state.update({name: getattr(self, name) for name in self.buffers})
        return state

    # the buffers kept per link, not per worker (copies heard, messages on their way): a worker that sits a round
    # out keeps its rows of the others (bench/faults/away.py) but not these, which its links change alone
    link_state: tuple[str, ...] = ()

    def worker_state(self) -> dict:
        """The state with a row per worker (every buffer but ``link_state``)."""
        return {k: v for k, v in self.state_dict().items() if k not in self.link_state}

    def load_state_dict(self, state: dict) -> None:
        self.x = state["x"]
        self.local.load_state_dict(state["local"])
        for name in self.buffers:
            setattr(self, name, state[name])
