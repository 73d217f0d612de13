"""Small C kernels for passes that torch's eager operations take one at a time on a CPU (torch.compile did not
fuse them profitably there: docs/performance.md, bench/perf/compile_probe.py), built on first use with the
machine's C compiler and kept in a cache, loaded with ctypes (no torch headers, no build step at install).

A kernel is optional: ``load`` answers None where there is no compiler, the build fails or the platform has no
shared libraries, and its caller keeps the eager operations, which give the same bits (each caller checks that
before it relies on a kernel). ``why_not(name)`` says why a kernel is not there.

The library goes to ``$CHOCO_BENCH_KERNELS`` or ``$XDG_CACHE_HOME/choco-bench/kernels`` (``~/.cache/...``), named
by a digest of its source, the compiler, the flags and this CPU's model and feature flags (``-march=native``
code runs only where it was built, so a home directory shared by several machines keeps one per machine).
The build writes a temporary file and renames it into place, so processes building at once do not see half a
library. ``CHOCO_BENCH_KERNELS=off`` turns every kernel off.

A kernel is built with OpenMP (``-fopenmp``) first and, where the compiler cannot, without it (its parallel
regions then run on one thread). Such a library needs ``libgomp.so.1``; torch's CPU wheel for Linux has loaded
a library of that name already, so the kernel's threads are torch's own pool. ``with_openmp(name)`` says which
build was loaded. Like torch's own operations, a kernel's parallel region does not survive ``os.fork`` after the
parent used the pool (GNU OpenMP keeps no threads across a fork: torch's ``sum`` waits forever in such a child
too, tried on the pinned torch; tests/test_choco_kernel.py keeps the probe). Below torch's grain neither enters the
pool. The suite starts processes with exec, or forks ranks from a server that has only imported modules."""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from ..files import atomic_write

HERE = Path(__file__).resolve().parent
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC")
OPENMP = ("-fopenmp",)
_loaded: dict[str, ctypes.CDLL | None] = {}
_why: dict[str, str] = {}
_openmp: dict[str, bool] = {}
_lock = threading.Lock()


def cache_dir() -> Path:
    chosen = os.environ.get("CHOCO_BENCH_KERNELS")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "choco-bench" / "kernels"


def _cpu_signature() -> str:
    """This CPU's model and feature flags (Linux), else the platform's name: what -march=native compiled for."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.platform()
    wanted = ("model name", "flags", "Features", "CPU part")
    return "\n".join(sorted({line for line in lines if line.split(":")[0].strip() in wanted}))


def _compiler() -> str | None:
    chosen = os.environ.get("CC")
    if chosen:
        return shutil.which(chosen) or (chosen if os.path.isfile(chosen) else None)
    return next((found for found in map(shutil.which, ("cc", "gcc", "clang")) if found), None)


def _compiler_version(cc: str) -> str:
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def library_path(name: str, cc: str, flags: tuple[str, ...] = FLAGS + OPENMP) -> Path:
    source = (HERE / f"{name}.c").read_bytes()
    digest = hashlib.sha256(b"\0".join([source, cc.encode(), _compiler_version(cc).encode(), " ".join(flags).encode(),
                                         _cpu_signature().encode()])).hexdigest()[:20]
    return cache_dir() / f"{name}-{digest}.so"


def _build(name: str) -> ctypes.CDLL | None:
    if os.environ.get("CHOCO_BENCH_KERNELS", "").lower() == "off":
        _why[name] = "kernels are turned off (CHOCO_BENCH_KERNELS=off)"
        return None
    if os.name != "posix":
        _why[name] = f"no shared-library build on {os.name}"
        return None
    cc = _compiler()
    if cc is None:
        _why[name] = "no C compiler (cc, gcc, clang or $CC) on PATH"
        return None
    for flags in (FLAGS + OPENMP, FLAGS):  # without OpenMP where the compiler or the loader has none
        path = library_path(name, cc, flags)
        if not path.exists():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError:  # a read-only home: this user's folder in the temporary directory
                path = Path(tempfile.gettempdir()) / f"choco-bench-kernels-{os.getuid()}" / path.name
            if not path.exists() and not _compile(name, cc, path, flags):
                continue
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as err:
            _why[name] = f"could not load {path}: {err}"
            continue
        _why.pop(name, None)  # what an OpenMP build that failed before the plain one loaded said
        _openmp[name] = OPENMP[0] in flags
        return lib
    return None


def _compile(name: str, cc: str, path: Path, flags: tuple[str, ...]) -> bool:
    """Build ``name`` into ``path`` through bench.files.atomic_write (a temporary file renamed into place: a
    concurrent build of the same library writes the same bytes, and no process loads half a file)."""

    def build(tmp: Path) -> None:
        done = subprocess.run([cc, *flags, "-o", str(tmp), str(HERE / f"{name}.c"), "-lm"], capture_output=True,
                              text=True, timeout=120)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no message"]
            raise _BuildFailed(f"{cc} failed on {name}.c: {last[0]}")

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, build)
        return True
    except _BuildFailed as err:
        _why[name] = str(err)
    except (OSError, subprocess.SubprocessError) as err:
        _why[name] = f"could not build {path}: {err}"
    return False


class _BuildFailed(Exception):
    pass


def load(name: str) -> ctypes.CDLL | None:
    """The kernel library ``name`` (bench/kernels/<name>.c), built on first use; None where it cannot be."""
    with _lock:
        if name not in _loaded:
            _loaded[name] = _build(name)
        return _loaded[name]


def with_openmp(name: str) -> bool:
    """Whether the loaded ``name`` was built with OpenMP (False where it was not loaded)."""
    return _openmp.get(name, False)


def why_not(name: str) -> str | None:
    """Why ``load(name)`` answered None (None while it has not, or when it loaded)."""
    return _why.get(name)
