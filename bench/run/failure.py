"""What a run does with an error no check foresaw (a bug, a library's refusal): run.json says ``failed`` with
the reason and the traceback instead of ``running``, and stderr gets one line; status 1. Bad input found late
(BenchError) and sizes beyond the machine are recorded the same way, then left to the command line's own line
and status 2."""
from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import BenchError, out_of_memory
from .outputs import now, read_json, write_json, write_metrics

if TYPE_CHECKING:
    from .runner import Loop

PACKAGE = Path(__file__).resolve().parents[1]  # bench/: where a person looks first for the raising line


def reason(err: BaseException) -> str:
    """``Type: first line of the message (at file:line)``, the innermost frame of this package if any."""
    if isinstance(err, BenchError):
        return str(err)
    lines = str(err).strip().splitlines()
    text = f"{type(err).__name__}: {lines[0][:300]}" if lines else type(err).__name__
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if Path(f.filename).resolve().is_relative_to(PACKAGE)]
    where = (ours or frames)[-1:] if frames else []
    for frame in where:
        path = Path(frame.filename).resolve()
        shown = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE.parent) else path.name
        text += f" (at {shown}:{frame.lineno})"
    return text


def passes_on(err: BaseException) -> bool:
    """Errors the command line turns into its own line and status 2: bad input, sizes beyond the machine."""
    return isinstance(err, BenchError) or out_of_memory(err)


def details(err: BaseException, prefix: str = "") -> dict[str, Any]:
    """The fields a failed run.json adds: ``error`` (one line) and, for an unforeseen error, its traceback."""
    out: dict[str, Any] = {"error": prefix + reason(err), "end_time": now()}
    if not passes_on(err):
        out["traceback"] = "".join(traceback.format_exception(err))[-20000:]
    return out


def save_failed(out: Path, rows: list[dict] | None, records: list[Callable[[], dict]]) -> None:
    """The metrics so far (when there are ``rows``), then the first of ``records`` that can be built and written
    as run.json; whatever fails here is let go: the error being reported is the one that matters."""
    if rows:
        try:
            write_metrics(out / "metrics.parquet", rows)
        except Exception:  # noqa: BLE001  (the rows of the last good write stay)
            pass
    for record in records:
        try:
            write_json(out / "run.json", record())
            return
        except Exception:  # noqa: BLE001  (try the plainer record)
            continue


def not_started(out: Path, err: Exception, writer: bool) -> int:
    """An error while the run's parts were built or its state restored. Bad input leaves every file as it was
    (the command line's line, status 2). Otherwise a run.json that says running (of an earlier attempt, or just
    written) is marked failed, and one line, status 1."""
    if passes_on(err):
        raise err
    if writer:
        record = read_json(out / "run.json")
        if isinstance(record, dict) and record.get("status") == "running":
            save_failed(out, None, [lambda: {**record, "status": "failed", **details(err)}])
    print(f"bench: error: {out}: the run could not start: {reason(err)}", file=sys.stderr)
    return 1


def _rank(loop: Loop) -> str:
    return f"rank {loop.p.rank}: " if loop.cfg.backend == "dist" else ""


def write_failed(loop: Loop, err: OSError) -> int:
    """A write failed (a full disk): mark the run failed with the reason where that can still be written; one
    line, status 1. The last checkpoint stays, so the same command resumes once there is room again."""
    loop.progress.close()
    rank = _rank(loop)
    if loop.writer:
        try:
            write_metrics(loop.out / "metrics.parquet", loop.counters.rows)
        except OSError:
            pass  # the rows of the last good write stay
        try:
            write_json(loop.out / "run.json", loop._final_record("failed", {"error": f"{rank}{err}"}))
        except OSError:
            pass  # run.json keeps saying 'running'
    print(f"bench: error: {rank}{loop.out}: stopped at step {loop.counters.global_step}: {err}", file=sys.stderr)
    return 1


def crashed(loop: Loop, err: Exception) -> int:
    """Any other error in the loop: failed with the reason, the metrics so far kept (the checkpoint too, so the
    same command resumes); then the command line's line, or one line here and status 1."""
    loop.progress.close()
    rank = _rank(loop)
    if loop.writer:
        extra = details(err, rank)
        save_failed(loop.out, loop.counters.rows, [lambda: loop._final_record("failed", extra),
                                                   lambda: {**loop.record, "status": "failed", **extra}])
    if passes_on(err):
        raise err
    print(f"bench: error: {rank}{loop.out}: stopped at step {loop.counters.global_step}: {reason(err)}",
          file=sys.stderr)
    return 1
