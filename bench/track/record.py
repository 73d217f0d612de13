"""The identity of a `bench track` record and its safe writing: the commit measured (commit_info, with the
dirty flag for uncommitted changes under CODE_PATHS; _git runs git quietly), the machine's fingerprint
(fingerprint: CPU, cores, architecture, Python, torch, device; never the host name) and its history folder
name (machine_id); records are written by bench.files.write_new (whole, under a name no other record has, never
replacing one, even against a concurrent writer."""
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
# paths whose uncommitted changes make a record "dirty" (the measured code is not the commit's)
CODE_PATHS = ("bench", "analysis", "config", "pyproject.toml", "constraints.txt")


# -- the commit and the machine ---------------------------------------------------------------------------
def _git(repo: Path, *args: str, strip: bool = True) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() if strip else proc.stdout


def commit_info(repo: Path) -> dict[str, Any]:
    """Commit, describe, committer date, subject and dirty flag of the checkout ``repo``."""
    commit = _git(repo, "rev-parse", "--verify", "HEAD^{commit}")
    if not commit:
        raise BenchError(f"--repo {repo}: not a git checkout with a commit (a record belongs to a commit)")
    changed = _git(repo, "status", "--porcelain", "--untracked-files=normal", "--", *CODE_PATHS, strip=False) or ""
    files = [line[3:] for line in changed.splitlines() if len(line) > 3]  # "XY path"
    describe = (_git(repo, "describe", "--always", "--tags", commit) or commit[:7]) + ("-dirty" if files else "")
    return {"commit": commit, "describe": describe,
            "commit_date": _git(repo, "show", "-s", "--format=%cI", commit) or "",
            "author_date": _git(repo, "show", "-s", "--format=%aI", commit) or "",
            "subject": _git(repo, "show", "-s", "--format=%s", commit) or "",
            "parents": (_git(repo, "show", "-s", "--format=%P", commit) or "").split(),
            # commits on the first-parent chain up to this one: orders commits made in the same second
            "generation": int(_git(repo, "rev-list", "--count", "--first-parent", commit) or 0),
            "dirty": bool(files), "dirty_files": files[:20]}


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
