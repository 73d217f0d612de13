"""One training run: resolved config, runner loop, run directory (Contract 2).

``start(settings, out)`` is the one way into a run, from `bench run`, the pipeline's tuning and the
benchmarks alike. ``RunConfig`` and ``resolve`` need no torch (the pipeline builds its DAG with them);
``start`` (and ``run``, its form for a resolved config) imports the training code on first use."""
from .config import RunConfig, resolve

__all__ = ["RunConfig", "resolve", "start", "run"]


def __getattr__(name: str):
    if name in ("start", "run"):
        from . import launch

        return getattr(launch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
