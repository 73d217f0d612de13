"""One rank of the per-process throughput benchmark: `python -m bench.perf.dist_worker OUT N STEPS REPEATS`
(started by bench perf with the rendezvous variables set). Rank 0 writes the times to OUT."""
import json
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from bench.files import atomic_write_text
from bench.perf.suite import TASK_SETTINGS
from bench.perf.timing import repeat
from bench.run.config import resolve
from bench.run.resolved import resolve_run
from bench.run.setup import build


def main() -> int:
    out, n, steps, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    cfg = resolve({}, {}, {**TASK_SETTINGS, "nodes": n, "backend": "dist"})
    parts = build(resolve_run(cfg), dist.get_rank(), dist.get_world_size())
    from bench.perf.suite import _train_steps

    times = repeat(lambda: (_train_steps(parts, steps), dist.barrier()), repeats, torch.device("cpu"))
    if dist.get_rank() == 0:
        atomic_write_text(Path(out), json.dumps(times))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
