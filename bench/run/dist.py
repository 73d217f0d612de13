"""Process groups for ``--backend dist``: join the one torchrun made, or spawn one on this machine.

``bench run --backend dist`` under ``torchrun --nproc-per-node P`` joins torchrun's group;
without torchrun it starts P copies of itself (``procs``, default: one per worker) with the
rendezvous variables set, watches them, and stops them all when one fails.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

CHILD_FLAG = "BENCH_DIST_CHILD"


def under_launcher() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_group(device: torch.device, timeout_s: float) -> tuple[int, int]:
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


def spawn(argv: list[str], procs: int, grace_s: float) -> int:
    """Run ``python -m bench <argv>`` as ``procs`` ranks on this machine; the worst exit status."""
    return launch_ranks([sys.executable, "-m", "bench", *argv], procs, grace_s)


def launch_ranks(command: list[str], procs: int, grace_s: float) -> int:
    """Run ``command`` as ``procs`` ranks with the rendezvous variables set; the worst exit status."""
    port = _free_port()
    children = []
    for rank in range(procs):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(procs), "LOCAL_RANK": str(rank),
               "LOCAL_WORLD_SIZE": str(procs), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               CHILD_FLAG: "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        children.append(subprocess.Popen(command, env=env))
    forwarded = []

    def forward(signum, _frame):
        forwarded.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        failed_at = None
        while any(c.poll() is None for c in children):
            if failed_at is None and any(c.poll() not in (None, 0) for c in children):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > grace_s:
                for child in children:  # a peer died and the others did not notice in time
                    if child.poll() is None:
                        child.kill()
            time.sleep(0.05)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    codes = [c.returncode for c in children]
    if forwarded:
        return 128 + forwarded[0]
    bad = [c for c in codes if c != 0]
    return bad[0] if bad else 0
