"""What every algorithm is: pure tensor maths on stacked worker state through a communicator.

An algorithm owns the workers' parameters ``x [w, d]`` and whatever buffers it needs; ``step``
takes the gradients at ``x`` and returns the traffic it caused. It never logs, times or writes.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import ClassVar, Sequence

import torch

from ..comm import Communicator, Traffic
from ..compressors import Compressor, make_compressor
from ..errors import BenchError
from ..registry import Registry
from .local import LocalStep


@dataclass(frozen=True)
class NoOptions:
    pass


class Algorithm(ABC):
    """What the rest of the suite needs to know of a method is said here, by its class, and written into
    run.json (``describe``): nothing else branches on an algorithm's name."""

    name: ClassVar[str]
    label: ClassVar[str]  # its name in tables and figures
    Options: ClassVar[type] = NoOptions
    compresses: ClassVar[bool] = True  # False: sends exact models, only the `none` compressor makes sense
    contraction: ClassVar[bool] = False  # its analysis needs a δ-contraction (QSGD then takes its rescaled form)
    consensus_step: ClassVar[bool] = False  # has Choco's consensus step γ (tuned on the consensus problem when auto)
    centralized: ClassVar[bool] = False  # every worker applies the same update (all models equal; no graph used)
    # compresses by its own scheme (e.g. PowerSGD's low rank): --compressor stays `none`
    own_compression: ClassVar[bool] = False
    # keeps running sums of (W − I)·(public copies), valid only while W stays the same: refused on a
    # time-varying graph (one-peer-exp), where it would not reach consensus
    fixed_graph: ClassVar[bool] = False
    # the `bench run` settings that are this method's options (handed to Options by the same name)
    settings: ClassVar[tuple[str, ...]] = ()
    examples: ClassVar[tuple[dict, ...]] = ({},)  # options the generic tests run every algorithm with

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
        self.generator = generator
        self.segments = list(segments) if segments is not None else None
        # each segment's tensor shape (a layer's weight matrix, ...), for methods that compress by shape
        # (low rank); None: one flat segment per worker, or no layer structure
        self.shapes = [tuple(s) for s in shapes] if shapes is not None else None
        if self.shapes is not None and (self.segments is None or [math.prod(s) for s in self.shapes] != self.segments):
            raise BenchError("shapes must match segments: one shape per segment, of its size")
        self.setup()

    @classmethod
    def check_compressor(cls, compressor: Compressor) -> None:
        """One line when this algorithm cannot use ``compressor``; the pipeline asks before it submits a run."""
        if cls.own_compression and compressor.name != "none":
            raise BenchError(f"algorithm {cls.name!r} compresses by its own scheme (see its options); "
                             f"use --compressor none (got {compressor.spec!r})")
        if not cls.compresses and compressor.name != "none":
            compressing = ", ".join(n for n in ALGORITHMS.names()
                                    if ALGORITHMS.get(n).compresses and not ALGORITHMS.get(n).own_compression)
            raise BenchError(
                f"algorithm {cls.name!r} sends exact models; use --compressor none "
                f"(got {compressor.spec!r}) or one of {compressing}"
            )

    @classmethod
    def check_topology(cls, name: str, time_varying: bool, options=None) -> None:
        """One line when this algorithm (with its parsed ``options``, when known) cannot run on the graph ``name``
        (a fixed-graph method on a time-varying one)."""
        if cls.fixed_graph and time_varying:
            usable = ", ".join(n for n in ALGORITHMS.names() if not ALGORITHMS.get(n).fixed_graph)
            raise BenchError(f"algorithm {cls.name!r} keeps (W − I)·x̂ up to date round by round, which holds only "
                             f"for a fixed graph; {name!r} changes W every round: use one of {usable}")

    @classmethod
    def check_network(cls, network) -> None:
        """One line when this algorithm cannot run on ``network``: a collective on a broadcast medium (a ring
        all-reduce forwards a different chunk on each hop, which one shared transmission cannot carry)."""
        if cls.centralized and network.broadcast:
            gossiping = ", ".join(n for n in ALGORITHMS.names() if not ALGORITHMS.get(n).centralized)
            raise BenchError(f"network medium=broadcast (in {network.name!r}) carries gossip, not the collectives "
                             f"algorithm {cls.name!r} uses; use medium=links or one of {gossiping}")

    @classmethod
    def describe(cls) -> dict:
        return {"name": cls.name, "label": cls.label, "compresses": cls.compresses, "contraction": cls.contraction,
                "consensus_step": cls.consensus_step, "centralized": cls.centralized,
                "own_compression": cls.own_compression}

    def setup(self) -> None:
        """Allocate algorithm buffers from ``self.x``."""

    @abstractmethod
    def step(self, grad: torch.Tensor | None, lr: float) -> Traffic:
        """One synchronous round. ``grad=None`` means no gradient (pure gossip, e.g. consensus)."""

    def _direction(self, grad: torch.Tensor | None) -> torch.Tensor | None:
        return None if grad is None else self.local.direction(self.x, grad)

    def _compress(self, v: torch.Tensor, out: torch.Tensor | None = None):
        return self.compressor.compress(v, self.generator, self.segments, out=out)

    # Checkpointing: every tensor/int attribute named in `buffers` plus the local step.
    buffers: ClassVar[tuple[str, ...]] = ()

    def state_dict(self) -> dict:
        state = {"x": self.x, "local": self.local.state_dict()}
        state.update({name: getattr(self, name) for name in self.buffers})
        return state

    def load_state_dict(self, state: dict) -> None:
        self.x = state["x"]
        self.local.load_state_dict(state["local"])
        for name in self.buffers:
            setattr(self, name, state[name])


ALGORITHMS: Registry[type[Algorithm]] = Registry("algorithm")


def parse_options(cls: type[Algorithm], raw: dict | None):
    """Build an algorithm's frozen options from a dict, rejecting unknown keys with one line."""
    raw = dict(raw or {})
    known = {f.name: f for f in fields(cls.Options)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise BenchError(f"unknown option {unknown[0]!r} for algorithm {cls.name!r}; allowed: {allowed}")
    return cls.Options(**raw)
