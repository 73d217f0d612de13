"""`bench bisect GOOD BAD --metric NAME`: the commit that introduced a step in a tracked quantity.

A binary search over the first-parent commits from GOOD to BAD, as `git bisect` does: each probe checks the
commit out in a temporary worktree and runs the part of the quick set that measures NAME there (`bench
track --repo WORKTREE` of this checkout, which appends its record to --history like any other); a commit is
bad when NAME's median is worse than GOOD's by more than the tolerance of its kind (analysis.history). A
commit whose probe fails (does not build, the run crashes, the figure is missing) is skipped, as `git bisect
skip` does. Records already in --history for this machine are reused (--fresh measures again).
It starts `bench track` across commits, so it lives beside it; each probe's records are judged by `python -m
analysis.history.metric` in a process of its own (bench never imports analysis). Not named bisect.py: benchfile.py
runs as a script with this folder first on sys.path, where a bisect.py would hide the standard library's.

NAME is a quantity of `python -m analysis history`: perf.<figure> (e.g. perf.b.round_vs_copy_sign) or
study.<cell>.<field> (e.g. study.choco-sign_ring8.final_test_acc). Exit 0 with the first bad commit named;
2 on bad input, including a BAD that is not worse than GOOD."""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from ..errors import BenchError
from .quickset import STUDY_FIELDS
from .record import ROOT as TRACKER  # the checkout whose bench track probes every commit
from .scratch import run_child, scratch_dir, stopping_cleanly, sweep


class BisectError(BenchError):
    """A bisection that cannot proceed: one line, exit status 2."""


def bisect(commits: list[str], judge: Callable[[str, "float | None"], dict],
           say: Callable[[str], None] = lambda _: None) -> dict:
    """The first bad commit of ``commits`` (GOOD first, BAD last, in order). ``judge(commit, reference)`` measures
    the metric at a commit and judges its median against the reference (GOOD's median; None for GOOD itself):
    {values, median, change, state (good, bad, or skip when it cannot be measured), mode, tolerance}, as
    analysis.history.metric gives it. Returns {"first_bad", "candidates" (more than one when skipped commits hide
    it), "probes", "reference"}."""
    if len(commits) < 2:
        raise BisectError("GOOD and BAD are the same commit")
    probes: dict[str, dict] = {}
    reference = None

    def probe(commit: str) -> dict:
        judged = judge(commit, reference)
        p = probes[commit] = {key: judged[key] for key in ("values", "median", "change", "state")}
        said = f" (median {p['median']:.4g}, {_text(p['change'], judged['mode'])})" if p["state"] != "skip" else \
            " (not measured)"
        say(f"bisect: {commit[:12]}: {p['state']}{said}")
        return judged

    first = probe(commits[0])
    if first["state"] == "skip":
        raise BisectError(f"GOOD {commits[0][:12]} could not be measured")
    reference, mode, tol = first["median"], first["mode"], first["tolerance"]
    state = probe(commits[-1])["state"]
    if state == "skip":
        raise BisectError(f"BAD {commits[-1][:12]} could not be measured")
    if state != "bad":
        last = probes[commits[-1]]
        raise BisectError(f"BAD {commits[-1][:12]} is not worse than GOOD {commits[0][:12]} beyond the tolerance "
                          f"({last['median']:.4g} vs {reference:.4g}, {_text(last['change'], mode)}; "
                          f"tolerance {_text(tol, mode).lstrip('+')}): nothing to bisect")
    lo, hi = 0, len(commits) - 1  # lo is good, hi is bad
    skipped: set[int] = set()
    while True:
        untested = [i for i in range(lo + 1, hi) if i not in skipped]
        if not untested:
            break
        middle = (lo + hi) / 2
        i = min(untested, key=lambda j: (abs(j - middle), j))  # the middle, or the nearest untested commit
        state = probe(commits[i])["state"]
        if state == "skip":
            skipped.add(i)
        elif state == "bad":
            hi = i
        else:
            lo = i
    candidates = [commits[i] for i in range(lo + 1, hi + 1)]  # skipped ones, then the first known bad
    return {"first_bad": commits[hi] if len(candidates) == 1 else None, "candidates": candidates,
            "probes": probes, "reference": reference}


def _text(size: float, mode: str) -> str:
    if math.isnan(size):
        return "n/a"
    return f"{size:+.1%}" if mode == "rel" else f"{size:+.4g}"


# -- git and the probes -----------------------------------------------------------------------------------
def _git(repo: str, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, timeout=120)
    except OSError as err:
        raise BisectError(f"git cannot run: {err}") from None
    if proc.returncode != 0:
        raise BisectError(f"git {' '.join(args[:2])}: {(proc.stderr.strip().splitlines() or ['failed'])[-1][:200]}")
    return proc.stdout.strip()


def commit_range(repo: str, good: str, bad: str) -> list[str]:
    """GOOD, then the first-parent commits after it up to BAD, oldest first. A revision starting with '-' is
    refused, and git gets --end-of-options before every user value: neither can become an option to git."""
    for flag, rev in (("GOOD", good), ("BAD", bad)):
        if not rev.strip() or rev.lstrip().startswith("-"):
            raise BisectError(f"{flag} {rev!r}: a revision may not be empty or start with '-' (give a commit, e.g. "
                              "HEAD~10)")
    try:
        good_sha = _git(repo, "rev-parse", "--verify", "--end-of-options", f"{good}^{{commit}}")
        bad_sha = _git(repo, "rev-parse", "--verify", "--end-of-options", f"{bad}^{{commit}}")
    except BisectError as err:
        raise BisectError(f"{repo}: {err} (GOOD and BAD must be commits of this repository)") from None
    if subprocess.run(["git", "-C", repo, "merge-base", "--is-ancestor", "--end-of-options", good_sha,
                       bad_sha]).returncode != 0:
        raise BisectError(f"GOOD {good} is not an ancestor of BAD {bad}")
    between = _git(repo, "rev-list", "--reverse", "--first-parent", "--ancestry-path", "--end-of-options",
                   f"{good_sha}..{bad_sha}").split()
    return [good_sha, *between]


def parse_metric(name: str) -> dict:
    """What of the quick set measures ``name``: the bench track flags of its part."""
    if name.startswith("perf.") and len(name.split(".")) >= 3:
        group = name.split(".")[1]
        return {"parts": ["--parts", "perf", "--perf-only", group]}
    match = re.fullmatch(r"study\.(.+)\.([a-z_]+)", name)
    if match and match.group(2) in STUDY_FIELDS:
        return {"parts": ["--parts", "study", "--cells", match.group(1)]}
    raise BisectError(f"--metric {name!r} is not perf.<figure> (e.g. perf.b.round_vs_copy_sign) nor "
                      f"study.<cell>.<{'|'.join(STUDY_FIELDS)}>")


def same_definition(repo: str, metric: str, good: str, bad: str) -> None:
    """Refuses a search across a redefinition of ``metric`` (analysis/history/definitions.py holds them): BAD's
    number counts something else than GOOD's, which is no regression."""
    proc = subprocess.run([sys.executable, "-m", "analysis.history.definitions", metric, good, bad, "--repo",
                           str(Path(repo).resolve())], cwd=TRACKER, env=TrackProbe._env(), capture_output=True,
                          text=True)
    if proc.returncode != 0 or proc.stdout.strip():
        why = (proc.stdout.strip() or proc.stderr.strip() or "failed").splitlines()[0][:200]
        raise BisectError(f"{metric} was redefined between GOOD and BAD ({why}): a new definition is no regression; "
                          "bisect from the redefining commit on")


class TrackProbe:
    """measure(commit, reference): the metric at ``commit`` judged against ``reference`` (analysis.history.metric's
    object), from --history when this machine has a clean record of it (unless ``fresh``), else by `bench track`
    of this checkout on a temporary worktree of the commit."""

    def __init__(self, repo: str, history: Path, metric: str, fresh: bool, keep: bool, say, device: str = "cpu",
                 tol: float | None = None):
        self.repo, self.history, self.metric, self.fresh, self.keep, self.say = repo, history, metric, fresh, keep, say
        self.tol = tol
        self.flags = [*parse_metric(metric)["parts"], "--device", device]
        self.machine = self._track("--print-machine", "--device", device).splitlines()[0].strip()

    @staticmethod
    def _env() -> dict:
        # this checkout's bench and analysis first, whatever is installed
        path = [str(TRACKER), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}

    def _track(self, *args: str, cwd: Path = TRACKER) -> str:
        proc = run_child([sys.executable, "-m", "bench", "track", *args], cwd=cwd, env=self._env())
        if proc.returncode not in (0, 1) or ("--print-machine" not in args and "wrote " not in proc.stdout):
            line = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1][:300]
            raise RuntimeError(line if line.startswith("bench") else f"bench track: {line}")
        return proc.stdout

    def _judge(self, path: Path, reference: float | None, commit: str | None = None) -> dict:
        """analysis.history.metric on the records at ``path`` (those of ``commit`` only, when given)."""
        argv = [sys.executable, "-m", "analysis.history.metric", str(path), "--metric", self.metric]
        for flag, value in (("--commit", commit), ("--reference", reference), ("--tol", self.tol)):
            if value is not None:
                argv.append(f"{flag}={value!r}" if isinstance(value, float) else f"{flag}={value}")
        proc = subprocess.run(argv, cwd=TRACKER, env=self._env(), capture_output=True, text=True)
        if proc.returncode != 0:
            raise BisectError((proc.stderr.strip() or "analysis.history.metric failed").splitlines()[-1][:300])
        return json.loads(proc.stdout)

    def __call__(self, commit: str, reference: float | None = None) -> dict:
        folder = self.history / self.machine / commit
        if not self.fresh and folder.is_dir():
            judged = self._judge(folder, reference, commit)
            if judged["values"]:
                self.say(f"bisect: {commit[:12]}: {len(judged['values'])} values from {judged['records']} "
                         "stored records")
                return judged
        return self._measure(commit, reference)

    def _measure(self, commit: str, reference: float | None) -> dict:
        scratch = scratch_dir("choco-bisect-")
        tree = scratch / commit[:12]
        self.say(f"bisect: {commit[:12]}: bench track in a worktree ({' '.join(self.flags)})")
        try:
            _git(self.repo, "worktree", "add", "--detach", "--end-of-options", str(tree), commit)
            try:
                out = self._track("--repo", str(tree), "--out", str(self.history), "--quiet", *self.flags)
            except RuntimeError as err:
                self.say(f"bisect: {commit[:12]}: bench track failed: {err}")
                return {"values": [], "median": math.nan, "change": math.nan, "state": "skip", "mode": None,
                        "tolerance": None}
            path = next(line.split()[1] for line in out.splitlines() if line.startswith("wrote "))
            return self._judge(Path(path), reference)
        finally:
            if not self.keep:
                subprocess.run(["git", "-C", self.repo, "worktree", "remove", "--force", "--end-of-options", str(tree)],
                               capture_output=True)
                shutil.rmtree(scratch, ignore_errors=True)


# -- the command (bench/cli/bisect.py builds the parser) -------------------------------------------------
def add_arguments(p) -> None:
    p.add_argument("good", metavar="GOOD", help="a commit where the metric was as it should be")
    p.add_argument("bad", metavar="BAD", help="a later commit where it had regressed")
    p.add_argument("--metric", required=True, help="a quantity of analysis history, e.g. perf.b.round_vs_copy_sign")
    p.add_argument("--repo", default=".", help="the git repository (default: the working folder)")
    p.add_argument("--history", default="results/history", help="history root the probes append to (default: "
                   "results/history)")
    p.add_argument("--tol", type=float, default=None, help="tolerance in place of the kind's (0.15 = 15%% for "
                   "relative kinds; accuracy points for accuracy)")
    p.add_argument("--device", default="cpu", help="bench track --device of every probe (default cpu)")
    p.add_argument("--fresh", action="store_true", help="measure every probe, even with records in --history")
    p.add_argument("--keep-worktrees", action="store_true", help="leave the probes' worktrees in place")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def cmd_bisect(args) -> int:
    with stopping_cleanly():  # SIGTERM, SIGINT: the probe's worktree and bench track go too
        return _bisect(args)


def _bisect(args) -> int:
    if not Path(args.repo).is_dir():
        raise BisectError(f"--repo {args.repo}: not a directory")
    if args.tol is not None and not (math.isfinite(args.tol) and args.tol > 0):
        raise BisectError(f"--tol {args.tol}: must be finite and > 0")
    parse_metric(args.metric)
    commits = commit_range(args.repo, args.good, args.bad)
    same_definition(args.repo, args.metric, commits[0], commits[-1])
    sweep()  # the temporary folders of commands that were killed outright
    say = (lambda _: None) if args.json else (lambda line: print(line, flush=True))
    try:
        probe = TrackProbe(args.repo, Path(args.history).resolve(), args.metric, args.fresh, args.keep_worktrees,
                           say, args.device, args.tol)
    except RuntimeError as err:  # bench track itself failed (not a probe: those are skipped)
        raise BisectError(str(err)) from None
    say(f"bisect: {args.metric} over {len(commits)} commits ({commits[0][:12]}..{commits[-1][:12]}), "
        f"about {math.ceil(math.log2(max(2, len(commits) - 1)))} probes after GOOD and BAD, on {probe.machine}")
    # the metric's kind decides the tolerance and the direction: known once GOOD is measured
    first = probe(commits[0])
    if first["state"] == "skip":
        raise BisectError(f"GOOD {commits[0][:12]}: {args.metric} could not be measured there (is the name right? "
                          "python -m analysis history lists the quantities in history.csv)")
    mode, tol = first["mode"], first["tolerance"]
    result = bisect(commits, lambda c, reference: first if c == commits[0] else probe(c, reference), say)
    subjects = {c: _git(args.repo, "show", "-s", "--format=%h %s", "--end-of-options", c) for c in result["candidates"]}
    if args.json:
        print(json.dumps({"metric": args.metric, "mode": mode, "tolerance": tol, **result,
                          "subjects": subjects}, default=float))
        return 0
    if result["first_bad"]:
        bad = result["probes"][result["first_bad"]]
        print(f"first bad commit: {result['first_bad']} {subjects[result['first_bad']]}\n"
              f"  {args.metric}: median {bad['median']:.4g} vs {result['reference']:.4g} at GOOD "
              f"({_text(bad['change'], mode)}; tolerance {_text(tol, mode).lstrip('+')})")
    else:
        print("the first bad commit is one of (skipped commits could not be measured):")
        for c in result["candidates"]:
            print(f"  {c} {subjects[c]} ({result['probes'].get(c, {}).get('state', 'untested')})")
    return 0
