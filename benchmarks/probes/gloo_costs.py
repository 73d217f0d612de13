"""What a `--backend dist` step's collectives cost on their own, with no training around them:

    OMP_NUM_THREADS=1 python -m torch.distributed.run --standalone --nproc_per_node 8 \
        benchmarks/probes/gloo_costs.py [D [STEPS]]

Every rank, STEPS times each (300 by default) after 20 untimed: the gossip of a one-peer ring (an isend of D floats to the right
neighbour and an irecv from the left, D = 15,210 by default: the MNIST-1D MLP's size), the all-reduce of one
row of two floats (the runner's per-step loss and signal flag), and both as a step runs them (the all-reduce
started first and waited for after the exchange). Rank 0 prints milliseconds per step of each. On a machine with
fewer cores than ranks, each message is a context switch, so a collective of a few bytes costs about as much as
the exchange of the model (docs/performance.md, "h: the peers")."""
from __future__ import annotations

import sys
import time

import torch
import torch.distributed as dist


def main() -> int:
    d = int(sys.argv[1]) if len(sys.argv) > 1 else 15210
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, inbox, row = torch.randn(d), torch.empty(d), torch.zeros(2)

    def exchange() -> None:
        requests = [dist.isend(model, dst=(rank + 1) % world), dist.irecv(inbox, src=(rank - 1) % world)]
        for request in requests:
            request.wait()

    def allreduce() -> None:
        dist.all_reduce(row)

    def both() -> None:
        work = dist.all_reduce(row, async_op=True)
        exchange()
        work.wait()

    times = {}
    for name, step in (("exchange", exchange), ("allreduce", allreduce), ("both", both)):
        for _ in range(20):
            step()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        dist.barrier()
        times[name] = (time.perf_counter() - start) / steps * 1e3
    if rank == 0:
        print(f"{world} ranks, d = {d}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in times.items()) + " a step")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
