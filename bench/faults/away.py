"""Workers that sit a round out (faults.active, faults.absent): the runner keeps their rows of the algorithm's
state before the step and writes them back after it, so that such a worker neither steps nor mixes and
returns later with its state as it was. Its links are lost both ways by the schedule (schedule.py)."""
from __future__ import annotations

import torch


def kept_rows(state, rows: torch.Tensor, workers: int):
    """Copies of ``rows`` of every per-worker tensor (first dimension ``workers``) of an algorithm's state: x,
    its buffers, the momentum; None for what has no rows yet (a momentum before the first step)."""
    if isinstance(state, dict):
        return {k: kept_rows(v, rows, workers) for k, v in state.items()}
    if isinstance(state, torch.Tensor) and state.dim() >= 1 and state.shape[0] == workers:
        return state.index_select(0, rows).clone()
    return None


def restore_rows(state, rows: torch.Tensor, kept, workers: int) -> None:
    """Write ``kept`` (from kept_rows) back into the same rows of the state as it is now; a per-worker tensor
    that did not exist before the step (the momentum) gets zeros there, as it was created from zeros."""
    if isinstance(state, dict):
        for k, v in state.items():
            restore_rows(v, rows, kept.get(k) if isinstance(kept, dict) else None, workers)
    elif isinstance(state, torch.Tensor) and state.dim() >= 1 and state.shape[0] == workers:
        if kept is None:
            state.index_fill_(0, rows, 0)
        else:
            state.index_copy_(0, rows, kept)
