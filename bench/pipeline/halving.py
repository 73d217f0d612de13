"""Successive halving of one cell's tuning grid (the pipeline's `tune_cell` job).

Every grid point trains to the first rung (a share of the full schedule), the best third of them
is continued from its checkpoint to the next rung, and so on until the survivors finish the full
schedule; the choice is then made on the full budget (`analysis tune select`). A trial is one run
of the full schedule paused at each rung (``stop_at``), so a continued trial is exactly the run it
would have been uninterrupted. When the winner sits at the edge of its grid (the smallest or largest
of three or more values), the grid is extended by one value in that direction, once: that point
trains the full schedule too and competes with the winner.

Rankings come from `python -m analysis tune rank` (the one place that knows how trials are judged);
this module only decides what to train next. ``halving.json`` in the cell's tuning folder records
each rung, the survivors and any extension, for the report.

    python -m bench.pipeline.halving PLAN_JSON
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Callable

from ..errors import BenchError
from ..files import atomic_write_text

RECORD = "halving.json"
# one trial: (its launcher's words, its settings: the plan's plus stop_at, its run directory) -> exit status
Runner = Callable[[list[str], dict, Path], int]
Ranker = Callable[[Path, float], dict]


IN_PROCESS = ["python", "-m", "bench", "run"]


def _run(command: list[str], settings: dict, out: Path) -> int:
    """One trial: in this process (``bench.run.start``) when its launcher is a plain `bench run` (no torch
    import and data loading per trial: hundreds of trials pay that once), anything else (torchrun) as a
    child process given the same settings. Trials of an earlier grid found in ``out`` are set aside."""
    if command != IN_PROCESS:
        from ..run.settings_file import dumps

        return subprocess.run([*command, "--settings", dumps(settings), "--replace-stale", "--out", str(out)]).returncode
    from ..run import start

    try:
        return start(settings, out, replace_stale=True)
    except BenchError as err:  # as `bench run` would: one line, status 2, and the other trials go on
        print(f"bench: error: {err}", file=sys.stderr, flush=True)
        return 2
    except Exception as err:  # a trial that crashes is ranked out; the others go on
        print(f"{out}: failed: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return 1


def _rank(cell_dir: Path, at: float) -> dict:
    proc = subprocess.run([sys.executable, "-m", "analysis", "tune", "rank", str(cell_dir), "--at", repr(at)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"ranking the trials of {cell_dir} at {at:g} epochs failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def _with_value(settings: dict, knob: str, value: float) -> dict:
    """A trial's ``settings`` with ``knob`` at ``value``, where the trial holds it (its own key, or inside
    ``algorithm_options`` where bench keeps an algorithm's knob such as γ)."""
    options = settings.get("algorithm_options")
    if knob not in settings and isinstance(options, dict) and knob in options:
        return {**settings, "algorithm_options": {**options, knob: float(value)}}
    return {**settings, knob: float(value)}


def halve(plan: dict, run: Runner = _run, rank: Ranker = _rank) -> dict:
    """Train ``plan``'s trials rung by rung; return (and write) the record of what was trained."""
    cell_dir = Path(plan["dir"])
    rungs = [float(e) for e in plan["rungs"]]
    keep = float(plan.get("keep", 1 / 3))
    trials: dict[str, dict] = {name: dict(trial) for name, trial in plan["trials"].items()}
    alive = sorted(trials)
    record = {"cell": plan["cell"], "rungs": [], "keep": keep, "extended": []}
    failures = []

    def train(names: list[str], stop_at: float | None) -> None:
        for i, name in enumerate(names, 1):
            # not quiet: the job's log gets each trial's progress lines (one per evaluation off a terminal)
            trial = trials[name]
            settings = {**trial["settings"], **({"stop_at": stop_at} if stop_at is not None else {})}
            print(f"{plan['cell']}: trial {i}/{len(names)} {name}"
                  f"{f' to {stop_at:g} epochs' if stop_at is not None else ' on the full schedule'}", flush=True)
            status = run(list(trial["command"]), settings, cell_dir / name)
            if status != 0:  # a failed trial is ranked out, not fatal to the cell
                failures.append({"trial": name, "status": status, "stop_at": stop_at})

    ranking: dict = {}
    for r, epochs in enumerate(rungs):
        last = r == len(rungs) - 1
        print(f"{plan['cell']}: rung {r + 1}/{len(rungs)}: {len(alive)} trials to {epochs:g} epochs", flush=True)
        train(alive, None if last else epochs)
        ranking = rank(cell_dir, epochs)
        ranked_trials = [entry["trials"] for entry in ranking["ranking"] if set(entry["trials"]) <= set(alive)]
        record["rungs"].append({"epochs": epochs, "trials": alive,
                                "ranking": [entry["point"] for entry in ranking["ranking"]]})
        if not ranked_trials:
            break  # every point diverged or failed: `analysis tune select` says so
        if not last:
            points = max(1, math.ceil(len(ranked_trials) * keep))
            alive = sorted(name for group in ranked_trials[:points] for name in group)
    for edge in (ranking.get("edges", []) if plan.get("extend", True) else []):
        winner = ranking["ranking"][0]
        names = []
        for name in winner["trials"]:
            new = name.replace(f"{edge['knob']}=", f"{edge['knob']}~", 1)  # a name no grid point has
            new = f"{new}-ext{edge['extend_to']:.3g}"
            trials[new] = {**trials[name], "settings": _with_value(trials[name]["settings"], edge["knob"],
                                                                   edge["extend_to"])}
            names.append(new)
        print(f"{plan['cell']}: best {edge['knob']} = {edge['value']:g} is at the edge of its grid; "
              f"trying {edge['extend_to']:.3g} on the full schedule", flush=True)
        train(names, None)
        record["extended"].append({**edge, "trials": names})
    if record["extended"]:
        final = rank(cell_dir, rungs[-1])
        record["rungs"].append({"epochs": rungs[-1], "trials": sorted(n for e in record["extended"] for n in e["trials"]),
                                "ranking": [entry["point"] for entry in final["ranking"]], "extension": True})
    record["failed"] = failures
    atomic_write_text(cell_dir / RECORD, json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bench.pipeline.halving PLAN_JSON", file=sys.stderr)
        return 2
    try:
        plan = json.loads(args[0])
        Path(plan["dir"]).mkdir(parents=True, exist_ok=True)
        halve(plan)
    except (ValueError, KeyError, TypeError) as err:
        print(f"bench halving: error: not a halving plan: {err}", file=sys.stderr)
        return 2
    except BenchError as err:
        print(f"bench halving: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
