"""Writing a run's directory: atomic files, provenance, and checkpoints loaded with weights_only."""
from __future__ import annotations

import fcntl
import json
import os
import platform
import socket
import subprocess
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from ..errors import BenchError
from ..files import atomic_write, atomic_write_bytes, open_lock, read_regular
from .driver import ENV as DRIVER_ENV


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
        return json.loads(read_regular(path))
    except (OSError, ValueError):
        return None


def write_metrics(path: Path, rows: list[dict[str, Any]]) -> None:
    """The rows as one parquet table, a column per key in order of first appearance (a row without a key
    has null there), written with pyarrow directly: what pandas would write with ``index=False``, less
    its schema note, and without importing pandas (0.3 s of every run)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(dict.fromkeys(key for row in rows for key in row))
    columns = [_column([row.get(name) for row in rows]) for name in names]
    table = pa.Table.from_arrays(columns, names=names)
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def _column(values: list[Any]):
    """A column of Python values typed as ``pandas.DataFrame(rows)`` types it: integers alone int64; numbers
    with a float or a gap float64 (NaN in the gap). Numeric columns (every metric) are built from their
    buffers, since ``pyarrow.array`` imports pandas to check its argument; anything else goes through it."""
    import numpy as np
    import pyarrow as pa

    present = [v for v in values if v is not None]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    if not present or not numeric:
        return pa.array(values)
    if len(present) == len(values) and all(isinstance(v, int) for v in values):
        data, kind = np.array(values, dtype=np.int64), pa.int64()
    else:
        data, kind = np.array([np.nan if v is None else v for v in values], dtype=np.float64), pa.float64()
    return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(data)])


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    def write(tmp: Path) -> None:
        # unbuffered: a full disk then raises OSError (ENOSPC) here; torch.save given a name, or a
        # buffered file, reports it as a RuntimeError about zip positions
        with open(tmp, "wb", buffering=0) as handle:
            torch.save(payload, handle)

    atomic_write(path, write)


LOCK = ".bench.lock"  # inside a run directory: held (flock) by the one process that writes it


# A pipeline job waits this long for a busy run directory: the holder may be the same run started by a driver
# that was killed, which sees that within a second and stops after its checkpoint (bench/run/driver.py)
BUSY_WAIT_S = 60.0


def _flock(fd: int, wait_s: float) -> None:
    """An exclusive flock on ``fd``, tried for up to ``wait_s`` seconds; BlockingIOError when still held."""
    give_up = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= give_up:
                raise
            time.sleep(0.2)


@contextmanager
def run_directory_lock(out: Path):
    """Hold ``out`` for one writer; a second one gets a BenchError. An OS lock: the kernel releases it
    when its holder exits or is killed, whatever the file left behind says. A link where the lock should
    be is refused before anything is written (open_lock)."""
    out = Path(out)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        while True:
            fd = open_lock(out / LOCK)
            try:
                _flock(fd, wait_s=BUSY_WAIT_S if os.environ.get(DRIVER_ENV) else 0.0)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise BenchError(f"{out} is being written by another bench run (pid {holder}); wait for it to "
                                 "end or use another --out") from None
            try:
                if os.lstat(out / LOCK).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)  # its last holder removed the file between our open and our lock: take the new one
    except OSError as err:
        raise BenchError(f"cannot use --out {out}: {err.strerror or err}") from None
    try:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid only helps a person; a full disk must not stop the run here
        yield
    finally:
        try:
            if os.lstat(out / LOCK).st_ino == os.fstat(fd).st_ino:
                os.unlink(out / LOCK)
        except OSError:
            pass
        os.close(fd)
        if created:
            try:
                out.rmdir()  # only when the run wrote nothing (bad input found late)
            except OSError:
                pass


# what save_checkpoint is given by the runner, and the type of each part
_CHECKPOINT_PARTS = {"fingerprint": str, "algo": dict, "task": dict, "generator": torch.Tensor, "counters": dict}


def load_checkpoint(path: Path, device: torch.device) -> dict[str, Any]:
    """The state a run saved; a file that is not such a state (empty, truncated, foreign) is one line
    naming it, since without it the same command starts the run again from its first step."""
    try:
        # weights_only: a checkpoint is tensors, numbers, strings and containers, never pickled code
        state = torch.load(path, map_location=device, weights_only=True)
    except (OSError, torch.cuda.OutOfMemoryError):
        raise  # unreadable (permissions) or too big for the device: the file itself may be fine
    except Exception as err:  # EOFError, RuntimeError, UnpicklingError...: the bytes are not a checkpoint
        text = str(err).strip()
        why = text.split(". ")[0].splitlines()[0][:120] if text else type(err).__name__
    else:
        if not isinstance(state, dict):
            why = f"holds a {type(state).__name__}, not a checkpoint"
        else:
            wrong = [k for k, kind in _CHECKPOINT_PARTS.items() if not isinstance(state.get(k), kind)]
            if not wrong:
                return state
            why = f"no valid {', '.join(wrong)}"
    if Path(path).stat().st_size == 0:
        why = "empty file"
    raise BenchError(f"checkpoint {path} is damaged ({why}); remove it and the same command restarts the run "
                     "from its first step")


def _installed_version(package: str) -> str | None:
    """A package's version from its metadata, without importing it (pandas costs a run 0.3 s to import)."""
    from importlib import metadata
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def provenance(device: torch.device) -> dict[str, Any]:
    import numpy

    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    info = {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
            "pandas": _installed_version("pandas"), "git_commit": commit, "host": socket.gethostname(),
            "platform": platform.platform(), "device": str(device), "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info
