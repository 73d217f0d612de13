"""What tests/test_dist.py compares with the simulator, all in ONE launch of gloo ranks (started by the test with
RANK/WORLD_SIZE set), so the process start-up is paid once: `python dist_cases.py OUT RUNS_JSON`. Every rank runs
each `bench run --backend dist` configuration of RUNS_JSON (name: settings) into OUT/name, then writes OUT/rankR.pt:
what the one-peer graph's methods did step by step on the DistributedCommunicator (``one_peer_steps``, which the
test runs on the simulator)."""
import json
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from bench.algorithms import ALGORITHMS, make_algorithm
from bench.algorithms.gossip import initial_vectors
from bench.comm.distributed import DistributedCommunicator, block_of
from bench.compressors import make_compressor
from bench.run import start
from bench.topology import make_topology

# the methods with per-link copies have links inside a process (both ends, two copies) and across processes
ONE_PEER_METHODS = (("dpsgd", "none"), ("choco", "sign"), ("dcd", "top:0.1"), ("ecd", "sign"), ("beer", "sign"))
N, ROUNDS = 8, 7


def one_peer_steps(name: str, compressor: str, comm_of, rows: slice = slice(None)) -> dict:
    """``ROUNDS`` steps of ``name`` on one-peer-exp (n = 8), float32, from fixed models and gradients (their
    ``rows``: a process's workers) on the communicator ``comm_of(topology, compressor)``; its models, rounds and,
    round by round, the processes it heard from (a simulated communicator hears no process)."""
    operator = make_compressor(compressor, contraction=ALGORITHMS.get(name).contraction)
    comm = comm_of(make_topology("one-peer-exp", N), operator)
    options = {"gamma": 0.3} if name in ("choco", "beer") else None
    algo = make_algorithm(name, initial_vectors(N, 12, seed=3, dtype=torch.float32)[rows], comm, compressor=operator,
                          options=options)
    heard = []
    for t in range(ROUNDS):
        heard.append(sorted(comm.plan.recv_from) if hasattr(comm, "plan") else [])
        algo.step(initial_vectors(N, 12, seed=100 + t, dtype=torch.float32)[rows], 0.05)
    return {"x": algo.x, "round": comm.round, "heard": heard}


def main() -> int:
    out, runs = sys.argv[1], json.loads(sys.argv[2])
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    status = 0
    for name, settings in runs.items():
        status |= start({**settings, "backend": "dist", "quiet": True}, f"{out}/{name}")
        dist.barrier()
    lo, hi = block_of(N, world, rank)
    one_peer = {name: one_peer_steps(name, compressor, lambda topology, operator: DistributedCommunicator(
        topology, operator, None), slice(lo, hi)) for name, compressor in ONE_PEER_METHODS}
    torch.save({"one_peer": one_peer}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
