"""`bench track`: the fixed quick set of one commit, appended to the history of this machine.

The quick set is `bench perf --quick` and the small study of config/track.yaml (a slice of `smoke`, 3 seeds,
modelled compute time). Each invocation writes one record, never replacing one:

    results/history/<machine>/<commit>/<UTC time>.json

so that running a commit again adds repeats. ``<machine>`` is a fingerprint of what the timings depend on
(CPU model, cores, architecture, Python and torch versions, device), not the host name: two identical
machines share a history, an upgraded torch starts a new one.

The code under test is that of ``--repo`` (default: this checkout; a worktree of another commit for a
history or a bisection): every `bench perf` and `bench run` starts there, with it first on PYTHONPATH. The
instrument is this checkout's: its config/track.yaml, its study expansion and its `python -m analysis
summarize` reading the runs, so that older commits are measured by the same rules. Study runs get one
thread (OMP_NUM_THREADS=1: results then do not depend on the core count or on load) and a private cache
(the code under test tunes γ and generates the data itself). docs/tracking.md has the record format.

The user part (--benchmarks) runs the user's own asv-style benchmark files in the checkout under test
(userpart.py, benchfile.py). The package: record.py holds the commit, the machine's fingerprint and the never-overwriting writer;
quickset.py runs bench perf --quick and the study and writes the record (track_one); commits.py measures
each commit of --commits in a worktree of its own; scratch.py makes the temporary folders and removes them
whatever happens (SIGTERM included, and a SIGKILL's at the next start); this file has the flags and the
command (cmd_track).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..errors import BenchError
from .commits import check_commits, commit_list, measured, track_commits
from .quickset import STUDY_FIELDS, load_study, run_perf, run_study, select_cells, settle, track_one
from ..files import write_new
from .scratch import stopping_cleanly, sweep
from .userpart import benchmark_files
from .record import (CODE_PATHS, KIND, ROOT, VERSION, _git, commit_info, fingerprint, machine_id, tracker_state,
                     tree_changes, with_tracker)

DEFAULT_CONFIG = ROOT / "config" / "track.yaml"
DEFAULT_OUT = "results/history"
DEFAULT_TARGET_ACC = 0.5  # absolute test accuracy of the study's targets (config/track.yaml says why)
PARTS = ("perf", "study", "user")
DEFAULT_PARTS = ("perf", "study")  # and user, when --benchmarks names files
__all__ = ["CODE_PATHS", "DEFAULT_CONFIG", "DEFAULT_PARTS", "benchmark_files", "DEFAULT_OUT", "DEFAULT_TARGET_ACC", "KIND", "PARTS", "ROOT",
           "STUDY_FIELDS", "VERSION", "add_arguments", "check_commits", "cmd_track", "commit_info", "commit_list",
           "fingerprint", "load_study", "machine_id", "measured", "run_perf", "run_study", "select_cells", "settle",
           "track_commits", "track_one", "tracker_state", "tree_changes", "with_tracker", "write_new", "_git"]


def add_arguments(p, output_dir, positive_float, device) -> None:
    """The flags of `bench track` (bench/cli/track.py builds the parser; its own type checks are passed in)."""
    p.add_argument("--repo", default=None, metavar="DIR",
                   help="checkout whose code is measured: a worktree of another commit (default: this checkout)")
    p.add_argument("--out", type=output_dir, default=DEFAULT_OUT, metavar="DIR",
                   help=f"history root; the record goes to DIR/<machine>/<commit>/<time>.json (default: {DEFAULT_OUT})")
    p.add_argument("--parts", default=None, metavar="LIST",
                   help="comma list of perf, study, user (default: perf,study, and user with --benchmarks)")
    p.add_argument("--benchmarks", action="append", default=[], metavar="PATH",
                   help="your own benchmark files (asv's time_* and track_* functions; a .py file or a folder of "
                   "them, repeatable), run in the checkout under test: the user part (docs/tracking.md)")
    p.add_argument("--cells", default=None, metavar="GLOBS",
                   help="comma list of the study's cells to run, shell patterns, e.g. 'choco-*' (default: all)")
    p.add_argument("--perf-only", default=None, metavar="GROUPS",
                   help="bench perf --only GROUPS (default: bench perf's own set)")
    p.add_argument("--config", default=str(DEFAULT_CONFIG), metavar="FILE",
                   help="the tracking study (default: config/track.yaml of this checkout)")
    p.add_argument("--target-acc", type=positive_float, default=DEFAULT_TARGET_ACC, metavar="ACC",
                   help="absolute test accuracy the study's *_to_target figures are read at "
                   f"(default {DEFAULT_TARGET_ACC})")
    p.add_argument("--device", type=device, default="cpu",
                   help="bench perf --device (the study runs on the CPU; default cpu)")
    p.add_argument("--keep", type=output_dir, default=None, metavar="DIR",
                   help="keep the runs, perf JSON and logs in DIR (default: a temporary folder, removed)")
    p.add_argument("--commits", default=None, metavar="RANGE",
                   help="measure each commit of RANGE (A..B, first-parent, oldest first; or a comma list) in a "
                   "temporary worktree of --repo, one record each: a history of the suite")
    p.add_argument("--skip-measured", action="store_true",
                   help="with --commits: skip commits that already have a clean record without errors here")
    p.add_argument("--settle", type=positive_float, default=0, metavar="SECONDS",
                   help="before bench perf, wait at most SECONDS for the 1-minute load average to fall to one per "
                   "core (after a test suite or build; default 0: no wait)")
    p.add_argument("--print-machine", action="store_true",
                   help="print this machine's history folder name and its fingerprint, and exit")
    p.add_argument("--quiet", action="store_true", help="no progress lines (the closing line stays)")



# -- the command ------------------------------------------------------------------------------------------
def _checked(args) -> list[str]:
    if args.parts is None:
        parts = [*DEFAULT_PARTS, *(["user"] if args.benchmarks else [])]
    else:
        parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise BenchError(f"--parts {args.parts!r}: {', '.join(unknown) or 'empty'}; allowed: {', '.join(PARTS)}")
    if "user" in parts and not args.benchmarks:
        raise BenchError("the user part needs --benchmarks FILE.py (your own asv-style benchmarks)")
    if args.benchmarks and "user" not in parts:
        raise BenchError("--benchmarks needs the user part (--parts ...,user)")
    args.benchmark_files = benchmark_files(args.benchmarks) if args.benchmarks else []
    if args.perf_only and "perf" not in parts:
        raise BenchError("--perf-only needs the perf part (--parts perf,...)")
    if args.cells and "study" not in parts:
        raise BenchError("--cells needs the study part (--parts study,...)")
    if not 0 < args.target_acc <= 1:
        raise BenchError(f"--target-acc {args.target_acc:g} must be in (0, 1] (a test accuracy)")
    if args.commits is not None:
        check_commits(args.commits)  # before git sees it: a value like --output=FILE is an option to git
    elif args.skip_measured:
        raise BenchError("--skip-measured goes with --commits")
    return parts


def cmd_track(args) -> int:
    with stopping_cleanly():  # SIGTERM, SIGINT: the temporary folders and the children go too
        return _track(args)


def progress(quiet: bool):
    """say(line): a progress line on stderr with the time since the start, one per step (a part begins, a run
    ends), never redrawn: a CI log gets one line per run. stdout keeps the closing `wrote ...` line alone."""
    start = time.monotonic()

    def say(line: str) -> None:
        print(f"{line} [{time.monotonic() - start:.0f} s]", file=sys.stderr, flush=True)
    return (lambda *_: None) if quiet else say


def _track(args) -> int:
    say = progress(args.quiet)
    info = fingerprint(args.device)
    machine = machine_id(info)
    if args.print_machine:
        print(machine)
        print(json.dumps(info, sort_keys=True))
        return 0
    parts = _checked(args)
    sweep()  # the temporary folders of commands that were killed outright
    repo = Path(args.repo or ROOT).resolve()
    if set(parts) != {"user"} and not (repo / "bench" / "__init__.py").is_file():  # any project for the user part
        raise BenchError(f"--repo {args.repo or repo}: no bench package there (give a checkout of this suite, or "
                         "--parts user to run only your --benchmarks in any project)")
    study = digest = cells = None
    if "study" in parts:
        study, digest = load_study(args.config)
        cells = select_cells(study, args.cells)
    plan = dict(parts=parts, study=study, digest=digest, cells=cells, machine=machine, info=info, say=say)
    if args.commits is None:
        return track_one(repo, args, commit_info(repo), **plan)
    return track_commits(repo, args, plan)
