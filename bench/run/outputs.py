"""Writing a run's directory: atomic files, provenance, and checkpoints loaded with weights_only."""
from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(payload, indent=2, default=_jsonable) + "\n").encode())


def _jsonable(value):
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_metrics(path: Path, rows: list[dict[str, Any]]) -> None:
    import pandas as pd

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    os.replace(tmp, path)


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path, device: torch.device) -> dict[str, Any]:
    # weights_only: a checkpoint is tensors, numbers, strings and containers, never pickled code
    return torch.load(path, map_location=device, weights_only=True)


def provenance(device: torch.device) -> dict[str, Any]:
    import numpy
    import pandas

    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    info = {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
            "pandas": pandas.__version__, "git_commit": commit, "host": socket.gethostname(),
            "platform": platform.platform(), "device": str(device), "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info
