"""The small global sums of `--backend dist` (bench/comm/distributed.py ``_star_sum``) on real gloo ranks, started
by tests/test_dist.py with RANK/WORLD_SIZE set: `python dist_star.py OUT`. Each rank writes what it got."""
import sys
from datetime import timedelta
from types import SimpleNamespace

import torch
import torch.distributed as dist

from bench.comm.distributed import DistributedCommunicator


def main() -> int:
    out = sys.argv[1]
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    # parts whose float32 sum depends on the order they are added in (tests/test_dist.py)
    part = torch.tensor([[1.0, 1e8, -1e8, 1.0, 0.0][rank % 5], float(rank), 0.5 ** rank], dtype=torch.float32)
    total = part.clone()
    DistributedCommunicator._star_sum(SimpleNamespace(rank=rank, world=world), total)
    # the same process group goes on working: a ring exchange and an all-reduce after it
    other = torch.full((2,), float(rank))
    dist.all_reduce(other)
    torch.save({"part": part, "total": total, "after": other}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
