"""Runs a user's benchmark files in the asv format and prints their figures as one JSON object.

    python bench/track/benchfile.py OUT.json FILE.py [FILE.py ...]

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

Names are ``<file stem>.<function>`` or ``<file stem>.<Class>.<method>``. asv's ``params`` are not supported:
a benchmark that has them is reported as an error rather than run with one of them. A benchmark that raises
is an error line of its own; the others still run. Exit status 0 when the JSON was written."""
from __future__ import annotations

import importlib.util
import inspect
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

KINDS = ("absolute", "ratio", "accuracy", "to_target")


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


def run(files: list[str]) -> dict:
    figures, errors = {}, []
    for file in files:
        path = Path(file)
        spec = importlib.util.spec_from_file_location(f"benchfile_{path.stem}", path)
        try:
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001 - a user's file: any error is its line
            errors.append(f"{path.name}: cannot be imported: {type(err).__name__}: {err}"[:300])
            continue
        benchmarks = _benchmarks(module)
        if not benchmarks:
            errors.append(f"{path.name}: no time_* or track_* benchmarks")
        for name, owner, fn in benchmarks:
            full = f"{path.stem}.{name}"
            try:
                fig = _figure(module, owner, fn)
            except Exception as err:  # noqa: BLE001
                where = traceback.extract_tb(err.__traceback__)[-1]
                errors.append(f"{full}: {type(err).__name__}: {err} ({Path(where.filename).name}:{where.lineno})"[:300])
                continue
            if fig is not None:
                figures[full] = fig
    return {"figures": figures, "errors": errors}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: benchfile.py OUT.json FILE.py [FILE.py ...]", file=sys.stderr)
        return 2
    result = run(argv[1:])
    Path(argv[0]).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
