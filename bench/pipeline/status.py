"""A study's progress in one line: its runs done, running and left, read from the run folders, and an ETA.

`bench status` prints it once; `make reproduce` has the pipeline print it every few seconds while the study runs
(Snakefile, BENCH_STATUS), rewritten in place on a terminal and a line per change in a log, where Snakemake's own
output is a scroll of rule blocks. A run is done when its run.json says completed or diverged (with its metrics),
failed when it says failed, running when it says running and its folder or log was written lately, and left
otherwise (paused and interrupted runs too: the pipeline resumes them). How far a running run is comes from the
last line its log has: ``step S/T epoch E ...`` (bench/run/progress.py).

The ETA counts work in epochs, a pass over the data, which is about the same work whatever the number of workers.
While watching, it divides the epochs left by the pace seen since the watch began (set-up, parallel jobs and a
busy machine included); before that, and in `bench status`, by the finished runs' own pace (start to end) over
``slots`` runs at a time. The study's other jobs (tuning, consensus, figures, report) are not counted."""
from __future__ import annotations

import json
import logging
import math
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..run.identity import finished
from ..run.progress import clock

FRESH_S = 30 * 60  # a "running" run.json untouched this long belongs to a pipeline that was stopped
LAST_STEP = re.compile(rb"step (\d+)/(\d+) epoch ([0-9.]+)")
# what Snakemake says once a job: its events (snakemake_interface_logger_plugins' LogEvent) and plain lines
PER_JOB = {"JOB_INFO", "GROUP_INFO", "JOB_FINISHED", "PROGRESS", "RESOURCES_INFO", "RUN_INFO", "SHELLCMD"}
CHATTER = re.compile(r"Select jobs to execute|Execute \d+ jobs|Touching output file")


@dataclass
class Status:
    study: str
    done: int = 0
    running: int = 0
    left: int = 0
    failed: list[str] = field(default_factory=list)
    epochs_done: float = 0.0  # finished runs' epochs and running runs' progress
    epochs_total: float = 0.0
    pace_s: float | None = None  # seconds per epoch of one run, from the finished runs' start and end times
    eta_s: float | None = None

    def line(self) -> str:
        failed = f", {len(self.failed)} failed ({', '.join(self.failed[:2])}{', ...' * (len(self.failed) > 2)})"
        return (f"{self.study}: {self.done}/{self.done + self.running + self.left + len(self.failed)} runs done, "
                f"{self.running} running, {self.left} left{failed * bool(self.failed)}; ETA {clock(self.eta_s)}")


def _read(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):  # not there yet, or caught half-written
        return None
    return record if isinstance(record, dict) else None


def _tail_epoch(log: Path) -> float | None:
    """The epoch of the last evaluation line of a run's log (a cell's log holds its seeds in turn: the last one)."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            found = LAST_STEP.findall(f.read())
    except OSError:
        return None
    return float(found[-1][2]) if found else None


def _seconds(record: dict) -> float | None:
    try:
        start, end = (datetime.fromisoformat(record[key]) for key in ("start_time", "end_time"))
        return (end - start).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def _fresh(paths: list[Path], now: float) -> bool:
    times = [p.stat().st_mtime for p in paths if p.exists()]
    return bool(times) and now - max(times) < FRESH_S


def study_status(study, out: Path, logs: Path, slots: int = 1, now: float | None = None) -> Status:
    """The status of ``study`` (a bench.pipeline.Study) from its results folder ``out`` and its logs folder."""
    now = time.time() if now is None else now
    status, spent, spent_epochs = Status(study.name), 0.0, 0.0
    for run, settings in study.runs.items():
        folder, epochs = out / "runs" / run, float(study.merged(settings).get("epochs", 1))
        record = _read(folder / "run.json")
        epochs = float((record or {}).get("config", {}).get("epochs", epochs))  # the run's own, overrides and all
        status.epochs_total += epochs
        if finished(record, folder):
            status.done += 1
            status.epochs_done += epochs
            if (seconds := _seconds(record)) is not None:
                spent, spent_epochs = spent + seconds, spent_epochs + epochs
        elif record is not None and record.get("status") == "failed":
            status.failed.append(run)
            status.epochs_total -= epochs  # not to come: the pipeline stops its job
        else:
            log = next((p for p in (logs / f"{run}.log", logs / f"{study.run_cell[run]}.log") if p.exists()), None)
            started = record is not None and record.get("status") == "running"
            if started and _fresh([folder / "run.json", *folder.glob("checkpoint*.pt"), *([log] if log else [])], now):
                status.running += 1
            else:
                status.left += 1
            status.epochs_done += min(epochs, (_tail_epoch(log) or 0.0) if log and record else 0.0)
    if spent > 0:  # start and end are to the second: a study of runs shorter than that has no pace here
        status.pace_s = spent / spent_epochs
        status.eta_s = status.pace_s * (status.epochs_total - status.epochs_done) / max(1, slots)
    return status


class Watch:
    """The status every ``every`` seconds on stderr until stopped: on a terminal one line rewritten in place, in a
    log a line each time the counts change. Its ETA is from the pace seen since it began, once there is one."""

    def __init__(self, study, out: Path, logs: Path, slots: int, every: float = 5.0, stream=None):
        self.args, self.every = (study, Path(out), Path(logs), slots), every
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.first: tuple[float, float] | None = None  # (time, epochs done) when the watch began
        self.shown = None
        self.stopped = threading.Event()

    def sample(self, now: float | None = None) -> Status:
        now = time.time() if now is None else now
        status = study_status(*self.args, now=now)
        if self.first is None:
            self.first = (now, status.epochs_done)
        elapsed, gained = now - self.first[0], status.epochs_done - self.first[1]
        if gained > 0 and elapsed > 0:
            status.eta_s = (status.epochs_total - status.epochs_done) * elapsed / gained
        return status

    def show(self, status: Status, last: bool = False) -> None:
        counts = (status.done, status.running, status.left, len(status.failed))
        if self.tty:
            self.stream.write("\r\x1b[K" + status.line() + ("\n" if last else ""))
        elif counts != self.shown:  # a log: the last line only where it says something new
            self.stream.write(status.line() + "\n")
        self.shown = counts
        self.stream.flush()

    def _loop(self) -> None:
        while not self.stopped.wait(self.every):
            self.show(self.sample())

    def start(self) -> Watch:
        self.show(self.sample())
        threading.Thread(target=self._loop, name="bench-status", daemon=True).start()
        return self

    def stop(self) -> None:
        """The last line (the pipeline ended: its own message follows)."""
        if not self.stopped.is_set():
            self.stopped.set()
            self.show(self.sample(), last=True)


class Quieter(logging.Filter):
    """On Snakemake's logger while the watch shows progress: its blocks and lines said once a job (the rule blocks,
    "N of M steps", the scheduler's) are dropped; everything else, errors with their logs among it, goes through."""

    def filter(self, record: logging.LogRecord) -> bool:
        event = getattr(record, "event", None)
        quietness = getattr(record, "quietness", None)  # the banner of the host, Python and command
        return (getattr(event, "name", event) not in PER_JOB and getattr(quietness, "name", quietness) != "HOST"
                and not CHATTER.match(record.getMessage()))


def watch_seconds(text: str | None) -> float | None:
    """BENCH_STATUS's value: the seconds between two looks; None (off) when unset, not a number or not positive."""
    try:
        seconds = float(text or 0)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None
