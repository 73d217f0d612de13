"""Runs a user's benchmark files in the asv format and writes their figures to a journal, one JSON line an event.

    python bench/track/benchfile.py JOURNAL.jsonl FILE.py [FILE.py ...]

`bench track --benchmarks` starts this file by its path, in the checkout under test with that checkout
first on the import path: the benchmarks import the code of the commit being measured, while this runner
(the instrument) is the tracker's and imports nothing of the suite. It keeps to the standard library.

What is read, as asv reads it:

* module-level functions and methods of module-level classes named ``time_*``: called ``number`` times per
  sample (attribute, default 1), ``repeat`` samples (default 5) after one warm-up call; the figure is
  seconds per call, lower is better, one value per sample;
* ``track_*``: called once per sample (``repeat``, default 1), the number it returns is the figure;
  ``unit`` (default "") and ``higher_is_better`` (default False: asv takes a rise as a regression) may be set
  as attributes, and ``timed = True`` for a number that depends on the machine's speed (a throughput), so
  that `analysis history` leaves it out when the machine was busy and wants it confirmed, as for time_*;
* ``setup()`` and ``teardown()`` of the module or the class around each benchmark (a class is made anew for
  each); a ``setup`` that raises NotImplementedError skips the benchmark, as in asv;
* ``kind`` (attribute): how `analysis history` compares the figure. ``absolute`` (the default of time_*: a
  time of this machine, tolerance 20 %), ``ratio`` (the default of track_*: pooled across machines, 15 %),
  ``accuracy`` (2 points absolute) or ``to_target`` (25 %).

* ``timeout`` (attribute, seconds, default 60 as in asv): a benchmark still running then (setup, calls and
  teardown) is stopped by SIGALRM and is the error line "<name>: timed out after T s". A file's import has 60 s.

Names are ``<file stem>.<function>`` or ``<file stem>.<Class>.<method>``. asv's ``params`` are not supported:
a benchmark that has them is reported as an error rather than run with one of them. A benchmark that raises
is an error line of its own; the others still run.

The journal says {"start": NAME, "timeout": T} before each benchmark (and each file's import, NAME its file
name) and {"end": NAME, "figure" or "error": ...} after it, flushed, so that the parent (userpart.py) can
kill this process when a hang outlives its timeout (C code holds off the alarm) and keep what finished. A
journal that already holds events is carried on: what ended there is not run again. {"done": true} closes
it; exit status 0 then."""
from __future__ import annotations

import importlib.util
import inspect
import json
import math
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path

KINDS = ("absolute", "ratio", "accuracy", "to_target")
DEFAULT_TIMEOUT = 60.0  # seconds, asv's


class TimedOut(BaseException):
    """Raised by the alarm in a benchmark past its timeout: not an Exception, which its own code might catch."""


def _alarm(_signum, _frame):
    raise TimedOut


def timed_out(name: str, timeout: float) -> str:
    return f"{name}: timed out after {timeout:g} s"


def _benchmarks(module):
    """(name, owner class or None, function) of every time_* and track_* of a module, in source order."""
    found = []
    for name, obj in vars(module).items():
        if inspect.isfunction(obj) and obj.__module__ == module.__name__ and name.startswith(("time_", "track_")):
            found.append((name, None, obj))
        elif inspect.isclass(obj) and obj.__module__ == module.__name__:
            for attr, fn in vars(obj).items():
                if inspect.isfunction(fn) and attr.startswith(("time_", "track_")):
                    found.append((f"{name}.{attr}", obj, fn))
    return found


def _setting(fn, owner, name, default):
    return getattr(fn, name, getattr(owner, name, default) if owner is not None else default)


def _figure(module, owner, fn) -> dict | None:
    """The figure of one benchmark (None when its setup skips it)."""
    timed = fn.__name__.startswith("time_")
    if _setting(fn, owner, "params", None):
        raise ValueError("asv 'params' are not supported by bench track (write one benchmark per setting)")
    kind = _setting(fn, owner, "kind", "absolute" if timed else "ratio")
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    instance = owner() if owner is not None else None
    scope = instance if instance is not None else module
    call = getattr(instance, fn.__name__) if instance is not None else fn
    setup, teardown = getattr(scope, "setup", None), getattr(scope, "teardown", None)
    try:
        if callable(setup):
            setup()
    except NotImplementedError:
        return None
    try:
        if timed:
            number = int(_setting(fn, owner, "number", 1))
            repeat = int(_setting(fn, owner, "repeat", 5))
            if number < 1 or repeat < 1:
                raise ValueError("number and repeat must be >= 1")
            call()  # warm-up: first-call costs (imports, caches) are not the code's speed
            values = []
            for _ in range(repeat):
                start = time.perf_counter()
                for _ in range(number):
                    call()
                values.append((time.perf_counter() - start) / number)
            unit, higher = "s", False
        else:
            repeat = int(_setting(fn, owner, "repeat", 1))
            values = [call() for _ in range(max(1, repeat))]
            bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float))
                   or not math.isfinite(float(v))]
            if bad:
                raise ValueError(f"returned {bad[0]!r:.40}, not a finite number")
            values = [float(v) for v in values]
            unit = str(_setting(fn, owner, "unit", ""))
            higher = bool(_setting(fn, owner, "higher_is_better", False))
    finally:
        if callable(teardown):
            teardown()
    return {"values": values, "median": statistics.median(values), "min": min(values), "max": max(values),
            "unit": unit, "kind": kind, "higher_is_better": higher,
            "timed": timed or bool(_setting(fn, owner, "timed", False))}


def _timeout(fn, owner) -> float:
    value = _setting(fn, owner, "timeout", DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"timeout {value!r:.40} is not a positive number of seconds")
    return float(value)


def _bounded(name: str, timeout: float, say, call):
    """``call()`` under an alarm at ``timeout`` s, the journal told first (the parent's bound if the alarm
    cannot stop it)."""
    say({"start": name, "timeout": timeout})
    before = signal.signal(signal.SIGALRM, _alarm)  # again each time: a benchmark may have set its own
    signal.setitimer(signal.ITIMER_REAL, min(timeout, 1e7))
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"benchfile_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _one(module, owner, fn, full: str, say) -> dict:
    """The end event of one benchmark: its figure, its error line, or nothing (skipped by its setup)."""
    try:
        timeout = _timeout(fn, owner)
        fig = _bounded(full, timeout, say, lambda: _figure(module, owner, fn))
    except TimedOut:
        return {"end": full, "error": timed_out(full, timeout)}
    except Exception as err:  # noqa: BLE001 - a user's benchmark: any error is its line
        where = traceback.extract_tb(err.__traceback__)[-1]
        return {"end": full, "error": f"{full}: {type(err).__name__}: {err} ({Path(where.filename).name}:"
                f"{where.lineno})"[:300]}
    return {"end": full} if fig is None else {"end": full, "figure": fig}


def collect(events: list[dict]) -> dict:
    """{"figures", "errors"} of a journal's events."""
    return {"figures": {e["end"]: e["figure"] for e in events if "end" in e and "figure" in e},
            "errors": [e["error"] for e in events if "end" in e and "error" in e]}


def run(files: list[str], emit=None, ended: dict | None = None) -> dict:
    """Every benchmark of ``files``: {"figures", "errors"}; ``emit`` gets each event as it comes. What ``ended``
    names (a journal's ends) is not run again, nor a file whose import failed there."""
    events, ended = [], ended or {}

    def say(event: dict) -> None:
        events.append(event)
        if emit is not None:
            emit(event)

    for file in files:
        path = Path(file)
        if "error" in ended.get(path.name, {}):
            continue
        try:
            module = _bounded(path.name, DEFAULT_TIMEOUT, say, lambda: _import(path))
        except (Exception, TimedOut) as err:  # noqa: BLE001 - a user's file: any error is its line
            why = "timed out" if isinstance(err, TimedOut) else f"{type(err).__name__}: {err}"
            say({"end": path.name, "error": f"{path.name}: cannot be imported: {why}"[:300]})
            continue
        benchmarks = _benchmarks(module)
        say({"end": path.name, **({} if benchmarks else {"error": f"{path.name}: no time_* or track_* benchmarks"})})
        for name, owner, fn in benchmarks:
            if f"{path.stem}.{name}" not in ended:
                say(_one(module, owner, fn, f"{path.stem}.{name}", say))
    return collect(events)


def read_journal(path: Path) -> list[dict]:
    """The events of a journal; a line cut short by a kill is left out."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: benchfile.py JOURNAL.jsonl FILE.py [FILE.py ...]", file=sys.stderr)
        return 2
    journal = Path(argv[0])
    ended = {e["end"]: e for e in read_journal(journal) if "end" in e}
    cut = journal.exists() and journal.read_bytes()[-1:] not in (b"", b"\n")
    with open(journal, "a") as handle:
        def emit(event: dict) -> None:
            handle.write(json.dumps(event) + "\n")
            handle.flush()

        if cut:
            handle.write("\n")  # after a line a kill cut short
        run(argv[1:], emit, ended)
        emit({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
