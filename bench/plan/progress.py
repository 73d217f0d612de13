"""What `bench plan` says while it times: a line per part of a shape (its set-up, each step, the evaluation) on
stderr, and after a shape's first step an estimate of what is left, extrapolated from that step, so that a
slow path (a vectorised ResNet step on a CPU takes a minute) is never a silent wait."""
from __future__ import annotations

import math
from typing import Callable


def duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.2g} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """``progress.shape(k, label)`` before shape k, then ``progress(event, seconds, detail)`` as measure's
    ``report``. The estimate assumes the evaluation and each shape still to come cost about what this shape's
    set-up and steps do: a rough figure, said to be one."""

    def __init__(self, say: Callable[[str], None], shapes: int, warmup: int, steps: int):
        self.say, self.shapes, self.steps = say, shapes, warmup + steps
        self.k, self.done, self.setup_s = 0, 0, 0.0

    def start(self, vectorize) -> None:
        imposed = ("" if vectorize is None else f"; --vectorize {str(vectorize).lower()} imposes the "
                   f"{'vectorised' if vectorize else 'per-worker loop'} path on every shape")
        self.say(f"bench plan: {self.shapes} shape(s) to time, each: a set-up (the run built, its gradient path "
                 f"settled, an untimed step), {self.steps} step(s) and one evaluation; an estimate follows the first "
                 f"step{imposed}")

    def shape(self, k: int, label: str) -> None:
        self.k, self.done = k, 0
        self.say(f"bench plan: timing shape {k}/{self.shapes}: {label}")

    def __call__(self, event: str, seconds: float, detail: str = "") -> None:
        where = f"bench plan: shape {self.k}/{self.shapes}:"
        if event in ("path", "set-up"):  # the run built and its path settled; the runner's untimed step
            self.setup_s = seconds if event == "path" else self.setup_s + seconds
            self.say(f"{where} " + (f"built, gradient path settled in {duration(seconds)}; {detail}" if event == "path"
                                    else f"untimed step {duration(seconds)}"))
            return
        if event == "evaluation":
            self.say(f"{where} evaluation {duration(seconds)}")
            return
        self.done += 1
        self.say(f"{where} {event} {self.done}/{self.steps}: {duration(seconds)}")
        if self.done == 1:
            shape_left = self.steps * seconds  # the other steps and the evaluation, about a step each
            rest = (self.shapes - self.k) * (self.setup_s + (self.steps + 1) * seconds)
            others = f", about {duration(shape_left + rest)} for the plan if the other shapes cost alike" * bool(rest)
            self.say(f"{where} about {duration(shape_left)} left for this shape{others}")
