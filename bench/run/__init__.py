"""One training run: resolved config, runner loop, run directory (Contract 2)."""
from .config import RunConfig, resolve
from .launch import run

__all__ = ["RunConfig", "resolve", "run"]
