"""One training run: resolved config, runner loop, run directory (Contract 2).

``RunConfig`` and ``resolve`` need no torch (the pipeline builds its DAG with them); ``run`` imports the
training code on first use."""
from .config import RunConfig, resolve

__all__ = ["RunConfig", "resolve", "run"]


def __getattr__(name: str):
    if name == "run":
        from .launch import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
