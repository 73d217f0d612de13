"""The identity of a `bench track` record and its safe writing: the commit measured (commit_info, with the
dirty flag for a working tree that is not the commit: tree_changes), the state of the tracker's own checkout
(tracker_state: its code computes the numbers too), the machine's fingerprint (fingerprint: CPU, cores,
architecture, Python, torch, device; never the host name) and its history folder name (machine_id). _git runs
git quietly; records are written by bench.files.write_new (whole, under a name no other record has, never
replacing one, even against a concurrent writer)."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from ..errors import BenchError

ROOT = Path(__file__).resolve().parents[2]  # the tracker's checkout: the instrument
KIND, VERSION = "choco-track", 1
# paths whose untracked files make a record "dirty" (any change to a tracked file does, anywhere)
CODE_PATHS = ("bench", "analysis", "config", "pyproject.toml", "constraints.txt")
IMPORTABLE = (".py", ".pth", ".so")  # untracked code, anywhere: a sitecustomize.py at the root runs first


# -- the commit and the machine ---------------------------------------------------------------------------
def _git(repo: Path, *args: str, strip: bool = True) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() if strip else proc.stdout


def tree_changes(repo: Path) -> list[str]:
    """Why the working tree of ``repo`` is not its commit: every tracked file changed (staged or not,
    anywhere: the numbers may come from any of them), untracked files under CODE_PATHS or that Python could
    import (a sitecustomize.py at the root runs first), and files git was told to stop checking
    (assume-unchanged, skip-worktree). Empty when clean."""
    status = _git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", strip=False)
    if status is None:
        return [f"(git status failed in {repo})"]
    changed, fields = [], iter(status.split("\0"))
    for entry in fields:
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if "R" in code or "C" in code:
            next(fields, None)  # a rename or copy names its source next
        if code != "??" or path.endswith(IMPORTABLE) or any(path == p or path.startswith(p + "/") for p in CODE_PATHS):
            changed.append(path)
    flagged = _git(repo, "ls-files", "-v", strip=False) or ""
    changed += [line[2:] + " (not checked by git)" for line in flagged.splitlines()
                if len(line) > 2 and (line[0].islower() or line[0] == "S")]
    return changed


def commit_info(repo: Path) -> dict[str, Any]:
    """Commit, describe, committer date, subject and dirty flag of the checkout ``repo``."""
    commit = _git(repo, "rev-parse", "--verify", "--end-of-options", "HEAD^{commit}")
    if not commit:
        raise BenchError(f"--repo {repo}: not a git checkout with a commit (a record belongs to a commit)")
    files = tree_changes(repo)
    describe = (_git(repo, "describe", "--always", "--tags", commit) or commit[:7]) + ("-dirty" if files else "")
    return {"commit": commit, "describe": describe,
            "commit_date": _git(repo, "show", "-s", "--format=%cI", commit) or "",
            "author_date": _git(repo, "show", "-s", "--format=%aI", commit) or "",
            "subject": _git(repo, "show", "-s", "--format=%s", commit) or "",
            "parents": (_git(repo, "show", "-s", "--format=%P", commit) or "").split(),
            # commits on the first-parent chain up to this one: orders commits made in the same second
            "generation": int(_git(repo, "rev-list", "--count", "--first-parent", commit) or 0),
            "dirty": bool(files), "dirty_files": files[:20]}


def tracker_state(repo: Path) -> dict[str, Any]:
    """The checkout running bench track (ROOT): its commit and whether its tree is that commit. Its config,
    study expansion and `analysis summarize` compute the study's numbers, so a modified tracker makes the
    record dirty even when ``repo`` (the code under test) is clean."""
    same = Path(repo).resolve() == ROOT
    commit = _git(ROOT, "rev-parse", "--verify", "--end-of-options", "HEAD^{commit}")
    files = tree_changes(ROOT) if commit else [f"({ROOT} is not a git checkout)"]
    return {"commit": commit, "same_checkout": same, "dirty": bool(files), "dirty_files": files[:20]}


def with_tracker(commit: dict[str, Any], tracker: dict[str, Any]) -> dict[str, Any]:
    """The commit's identity with the tracker's changes counted: dirty when either tree is."""
    if tracker["same_checkout"] or not tracker["dirty"]:
        return commit
    files = (commit["dirty_files"] + [f"tracker: {f}" for f in tracker["dirty_files"]])[:20]
    describe = commit["describe"] if commit["dirty"] else commit["describe"] + "-dirty"
    return {**commit, "describe": describe, "dirty": True, "dirty_files": files}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "cpu model") and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _torch_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def fingerprint(device: str = "cpu") -> dict[str, Any]:
    """What timings depend on, and nothing that names the host: two alike machines share a history."""
    info = {"cpu": _cpu_model(), "cores": os.cpu_count(), "arch": platform.machine(), "system": platform.system(),
            "python": ".".join(platform.python_version_tuple()[:2]), "torch": _torch_version(), "device": "cpu"}
    if device != "cpu":
        import torch

        dev = torch.device(device)
        if dev.type == "cuda" and torch.cuda.is_available():
            info["device"] = f"cuda: {torch.cuda.get_device_name(dev)}"
        else:
            info["device"] = dev.type
    return info


def machine_id(info: dict[str, Any]) -> str:
    """The history folder of a fingerprint: readable, and unique by a hash of all of it."""
    digest = hashlib.sha1(json.dumps(info, sort_keys=True).encode()).hexdigest()[:8]
    kind = "cpu" if info["device"] == "cpu" else re.sub(r"[^a-z0-9]+", "-", info["device"].lower()).strip("-")[:24]
    return f"{kind}-{info['cores']}c-{digest}"
