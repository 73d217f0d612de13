"""decent-dp's side of the D-PSGD MLP comparison: the suite's problem trained with decent-dp, one gloo process a worker.

    torchrun --standalone --nproc_per_node N decent_dp_mlp.py PROBLEM.pt OUT.json

(--standalone: a free rendezvous port rather than 29500; decent-dp needs only an initialised process group, and
reads LOCAL_WORLD_SIZE, which torchrun sets.)

Runs under the peer's interpreter (torch and decent-dp, nothing from `bench`). PROBLEM.pt (torch.save; plain
tensors and numbers): layers, x0 [n, P], inputs [n, T, B, d], targets [n, T, B], W [K, n, n], lr, steps. Rank r
starts from x0[r], takes batch (inputs[r, t], targets[r, t]) at step t and plain SGD on the mean cross-entropy.
Rank 0 writes OUT.json: {peer, order, x [n][P] (the final parameters), loop_s, start_s, steps}.

How decent-dp runs D-PSGD (decent_dp/ddp.py, 0.2.3). DecentralizedDataParallel(model, optim_fn, topology=NAME)
steps the optimizer itself, in a hook at the end of each backward; the user's loop is forward and backward
only. After the backward of step t >= 1 it replaces x^t by the gossip of x^t (an all-reduce in the worker's
group, launched when x^t was made and overlapped with step t's forward and backward), then takes the step
with the gradient at x^t: x^{t+1} = W x^t - lr grad f(x^t), the paper order, with no delay. Two departures,
which this script undoes so that it computes x^{t+1} = W[t % K] x^t - lr grad f_i(x^t; batch t) exactly:
  - step 0 never gossips (the first backward only traces the parameter order; its step is taken, without
    gossip, in the forward of step 1): the script gossips x^0 by hand after that backward (`gossip` below);
  - its round counter skips a round: step 1 gossips with topology edge 1, step t >= 2 with edge t + 1
    (`FromW.get_edge` maps the counter back to t).
decent-dp's own topologies cannot take a matrix; a round is a partition of the workers into groups, each
averaged as x_i <- w x_i + (1 - w)/(m - 1) sum_{j in group, j != i} x_j. FromW reads such groups from W[k] and
refuses any other W. decent-dp's "one-peer-exp" pairs i with i XOR 2^k in round k (weights 1/2), not the
directed i <- i + 2^k of Ying et al. 2021, which no partition expresses. Without numpy (not a dependency of
torch or decent-dp), decent-dp's one call to torch's broadcast_object_list fails; the script then swaps in its own.
"""
import time

T0 = time.time()  # the script's start, before the other imports (start_s counts from here)

import importlib.util
import json
import os
import pickle
import sys
from importlib.metadata import version

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # CPU and gloo: the wrapper would move the model to a visible GPU

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from decent_dp.ddp import DecentralizedDataParallel
from decent_dp.topo import Edge, Topology, TopologyReg


def groups_of(W: torch.Tensor) -> list:
    """Per round k, [(ranks, w), ...]: the groups decent-dp all-reduces in, and each group's self-weight w."""
    n, rounds = W.shape[1], []
    for k, Wk in enumerate(W.double()):
        support = [tuple(torch.nonzero(row).flatten().tolist()) for row in Wk]
        groups = sorted(set(support))
        redone = torch.zeros_like(Wk)  # the matrix decent-dp would apply with these groups
        for g in groups:
            w = Wk[g[0], g[0]].item()
            for i in g:
                redone[i, list(g)] = (1 - w) / max(len(g) - 1, 1)
                redone[i, i] = w
        if (sorted(sum(groups, ())) != list(range(n)) or min(map(len, groups)) < 2
                or not torch.allclose(redone, Wk, rtol=0, atol=1e-12)):
            sys.exit(f"decent-dp cannot gossip W[{k}]: a round must split the workers into groups of 2 or more, "
                     f"each averaged as w x_i + (1-w)/(m-1) sum of the others (decent-dp's own one-peer-exp "
                     f"pairs i with i XOR 2^k, weights 1/2)")
        rounds.append([(list(g), Wk[g[0], g[0]].item()) for g in groups])
    return rounds


@TopologyReg.register("from-W")
class FromW(Topology):
    """The rounds of PROBLEM.pt's W as a decent-dp topology (the registry builds it from local_world_size only,
    so the rounds come in through the class attribute)."""
    rounds: list = []

    def _get_topo_edges(self):
        return [[Edge(ranks=list(g), weight=w) for g, w in r] for r in self.rounds]

    def get_edge(self, step: int) -> Edge:
        # decent-dp asks for edge 1 for step 1's gossip (and edge 2 for that gossip's weight, as it launched it
        # with edge 1), then edge t + 1 for step t >= 2; step 0 is ours (`gossip`). Round t is W[t % K].
        return super().get_edge(step - 1 if step >= 3 else min(step, 1))


def broadcast_object_list(objects: list, src: int = 0, group=None, device=None) -> None:
    """torch's broadcast_object_list without numpy, which torch 2.13 needs on the receiving ranks and neither
    torch nor decent-dp installs; decent-dp calls it once, at step 1, to check that all ranks hold the same model."""
    data = pickle.dumps(objects) if dist.get_rank(group) == src else b""
    size = torch.tensor([len(data)])
    dist.broadcast(size, src, group=group)
    buf = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(int(size), dtype=torch.uint8)
    dist.broadcast(buf, src, group=group)
    objects[:] = pickle.loads(bytes(buf.tolist()))


if importlib.util.find_spec("numpy") is None:
    dist.broadcast_object_list = broadcast_object_list  # decent_dp.ddp calls it as dist.broadcast_object_list


@torch.no_grad()
def gossip(params: list, edge: Edge) -> None:
    """Step 0's gossip, which decent-dp skips, the way its later rounds do it (bucket *= w - c; += all-reduce(c x))."""
    c = (1 - edge.weight) / (len(edge.ranks) - 1)
    flat = torch.cat([p.reshape(-1) for p in params]).mul_(c)
    dist.all_reduce(flat, group=edge.group)
    for p, part in zip(params, flat.split([p.numel() for p in params])):
        p.mul_(edge.weight - c).add_(part.view_as(p))


def main(problem_path: str, out_path: str) -> None:
    problem = torch.load(problem_path, weights_only=True, mmap=True)
    FromW.rounds = groups_of(problem["W"])  # every rank checks W before any process group exists
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    assert n == problem["x0"].shape[0], f"launched {n} ranks for {problem['x0'].shape[0]} workers"
    steps, lr, layers = int(problem["steps"]), float(problem["lr"]), [int(v) for v in problem["layers"]]
    inputs, targets = problem["inputs"][rank, :steps].clone(), problem["targets"][rank, :steps].clone()

    modules = []
    for a, b in zip(layers, layers[1:]):
        modules += [nn.Linear(a, b), nn.ReLU()]
    net = nn.Sequential(*modules[:-1])
    # plain SGD on each bucket of parameters (optim_fn receives [(name, tensor)]); no scheduler, no clipping
    model = DecentralizedDataParallel(net, optim_fn=lambda named: torch.optim.SGD([p for _, p in named], lr=lr),
                                      topology="from-W")
    params = list(net.parameters())  # net.0.weight, net.0.bias, net.2.weight, ...
    with torch.no_grad():  # after the wrapper, which broadcasts rank 0's parameters; it copies them in at step 1
        x0 = problem["x0"][rank]
        for p, part in zip(params, x0.split([p.numel() for p in params])):
            p.copy_(part.view_as(p))

    # decent-dp builds its optimizers at step 1, inside the loop, and torch's first optimizer imports torch._dynamo
    # (4-5 s with 8 processes on 2 cores): that import is start-up, so it is paid here
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    dist.barrier()
    start_s = time.time() - T0
    tic = time.perf_counter()
    for t in range(steps):
        F.cross_entropy(model(inputs[t]), targets[t]).backward()  # decent-dp gossips and steps in backward hooks
        if t == 0:
            gossip(params, model._topo.get_edge(0))
    dist.barrier()
    loop_s = time.perf_counter() - tic

    for op in model._comm_ops:  # the gossip of x^T, launched by the last backward, is not used
        if op is not None:
            op.wait()
    x = torch.cat([p.detach().reshape(-1) for p in params])
    xs = [torch.empty_like(x) for _ in range(n)] if rank == 0 else None
    dist.gather(x, xs, dst=0)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"peer": f"decent-dp {version('decent-dp')}", "order": "paper",
                       "x": [v.tolist() for v in xs], "loop_s": loop_s, "start_s": start_s, "steps": steps}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
