"""Process groups for ``--backend dist``: join the one torchrun made, or spawn one on this machine.

``bench run --backend dist`` under ``torchrun --nproc-per-node P`` joins torchrun's group;
without torchrun it starts P ranks (``procs``, default: one per worker) with the rendezvous variables
set, watches them, and stops them all when one fails. Its ranks read the run's settings from one file
(bench/run/rank.py), so a run started from Python (``bench.run.start``) launches them as `bench run` does.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

CHILD_FLAG = "BENCH_DIST_CHILD"


def under_launcher() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_group(device: "torch.device", timeout_s: float) -> tuple[int, int]:
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
        if device.type == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    return dist.get_rank(), dist.get_world_size()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# once one rank has failed, how long the others get to notice, write what they hold and exit before
# they are killed. They notice a dead peer at once (its sockets close) and a hung one only at
# dist_timeout, when their own collective times out and they exit: the launcher then waits this
# much more, not another dist_timeout, before it kills the hung rank.
GRACE_S = 5.0


def spawn(cfg, out: Path, procs: int, grace_s: float = GRACE_S) -> "Outcome":
    """Train ``cfg`` (a RunConfig) in ``out`` as ``procs`` ranks on this machine, each a fresh interpreter
    (``python -m bench.run.rank``): every setting written to a file the ranks load (and check) before they
    start, removed once they have all stopped."""
    from .settings_file import write_settings

    with tempfile.TemporaryDirectory(prefix="bench-ranks-") as folder:
        settings = write_settings(cfg, Path(folder) / "settings.json")
        return launch_ranks([sys.executable, "-m", "bench.run.rank", str(settings), str(out)], procs, grace_s)


def stop_with_parent(signum: int) -> None:
    """Have the kernel send this process ``signum`` when its parent ends (Linux's PR_SET_PDEATHSIG; elsewhere
    nothing). Ranks lead sessions of their own (``launch_ranks``), so what is sent to the launcher's process
    group (a scheduler killing a job outright) reaches none of them: each rank takes SIGTERM when its launcher
    ends, which it answers as any SIGTERM (a checkpoint, status interrupted) instead of training on unwatched."""
    parent = os.getppid()
    if not prctl(1, int(signum)):  # PR_SET_PDEATHSIG
        return
    if os.getppid() != parent:  # the parent ended before the request was made
        os.kill(os.getpid(), signum)


def prctl(option: int, value) -> bool:
    """Linux's ``prctl(option, value)`` for this process; False where there is none (another system)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        return False
    return True


def _rank_env(rank: int, procs: int, port: int) -> dict[str, str]:
    return {"RANK": str(rank), "WORLD_SIZE": str(procs), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(procs),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), CHILD_FLAG: "1",
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


class Outcome(int):
    """The launch's exit status (the worst of the ranks', 128 + N for a forwarded signal N), with
    ``failure``: which rank failed first and how ("rank 2 was killed by SIGKILL"), or None."""

    failure: str | None = None


def _how(rank: int, code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"rank {rank} was killed by {name}"
    return f"rank {rank} exited with status {code}"


def launch_ranks(command: list[str], procs: int, grace_s: float = GRACE_S) -> Outcome:
    """Run ``command`` as ``procs`` ranks with the rendezvous variables set. Once one rank fails, the
    others get ``grace_s`` seconds to stop by themselves and are then killed (a hung rank never would)."""
    port = _free_port()
    # each rank a session of its own, as torchrun starts its workers. Where the kernel groups a session's processes
    # for scheduling (Linux's autogroup, on by default), ranks left in their launcher's session are one group: with
    # 8 ranks on 2 cores their gloo threads spent twice the system time and the loop ran 1.2-1.4x slower. A
    # terminal's Ctrl-C then reaches the launcher alone, which forwards it to every rank (``_watch``)
    children = [subprocess.Popen(command, env={**os.environ, **_rank_env(rank, procs, port)}, start_new_session=True)
                for rank in range(procs)]
    return _watch(children, grace_s)


def _watch(children: list, grace_s: float) -> Outcome:
    """Wait for the ranks; once one fails, the others get ``grace_s`` seconds and are then killed."""
    forwarded = []

    def forward(signum, _frame):
        forwarded.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    first_failure, killed = None, set()
    try:
        failed_at = None
        while any(c.poll() is None for c in children):
            if first_failure is None:
                for rank, child in enumerate(children):
                    if child.poll() not in (None, 0):
                        first_failure, failed_at = _how(rank, child.returncode), time.monotonic()
                        break
            if failed_at is not None and time.monotonic() - failed_at > grace_s:
                for rank, child in enumerate(children):  # still running: hung, or blind to the failure
                    if child.poll() is None:
                        killed.add(rank)
                        child.kill()
            time.sleep(0.05)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    codes = [c.returncode for c in children]
    if first_failure is None:
        bad = [(rank, code) for rank, code in enumerate(codes) if code != 0]
        first_failure = _how(*bad[0]) if bad else None
    if forwarded:
        outcome = Outcome(128 + forwarded[0])
    elif codes and all(code == 2 for code in codes):  # every rank refused the run as given: rank 0 said why
        return Outcome(2)
    else:
        outcome = Outcome(0 if first_failure is None else 1)
    if first_failure is not None and killed:
        first_failure += f"; rank{'s' if len(killed) > 1 else ''} {', '.join(map(str, sorted(killed)))} " \
                         f"did not stop within {grace_s:g} s and {'were' if len(killed) > 1 else 'was'} killed"
    outcome.failure = first_failure
    return outcome
