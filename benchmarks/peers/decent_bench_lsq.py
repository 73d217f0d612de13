"""Run decent-bench's DGD on a least-squares problem exported by our suite.

Peer script: it runs under decent-bench's own interpreter (`make peers` puts one in .peers/decent-bench/) and
imports only decent_bench, numpy and the standard library -- never `bench` or torch.

    python decent_bench_lsq.py PROBLEM.npz OUT.json [--repeats R]

PROBLEM.npz holds A [n, m, d], b [n, m], x0 [n, d], W [n, n], lr, steps and l2 (see our suite's exporter).
Worker i minimises f_i(x) = 0.5 * mean_j (A_i[j] x - b_i[j])^2 + 0.5 * l2 * ||x||^2 and the run is DGD,
x_i <- sum_j W_ij x_j - lr * grad f_i(x_i) (full gradients), for `steps` iterations from x0.

OUT.json: {"peer", "order", "x" (final iterates [n][d] of the last repeat), "loop_s" (per repeat: the
`steps` iterations only), "setup_s" (mean time to build costs, agents and network), "iterations"}.

Mapping onto decent-bench 0.3.0 (numpy backend):
  * f_i = LinearRegressionCost(dataset_i, batch_size="all"): f(x) = ||A x - b||^2 / (2m), gradient
    (A^T A x - A^T b) / m -- the same scaling as ours, so the data and lr are passed unchanged.  With
    batch_size="all" the default indices="batch" always uses the full local dataset (no sampling).
    l2 > 0 adds l2 * L2RegularizerCost (0.5 ||x||^2), giving an EmpiricalRegularizedCost.
  * The topology is P2PNetwork(graph of the nonzero off-diagonal W entries, agents) and its mixing matrix is
    overwritten with W through the `weights` setter (the default would be Metropolis-Hastings weights).
  * DGD(step_size=lr, x0={agent: x0[i]}).run(network, steps) does initialize + `steps` iterations; it is called
    without a progress callback, which is exactly what `decent_bench.benchmark.benchmark` runs per trial minus
    its progress bar, checkpoints and metrics.  DGD.step broadcasts every x_j^t first, then sets
    x_i = W_ii x_i + sum_j W_ij x_j - lr * grad f_i(x_i^t): the "paper" order.
"""

import argparse
import json
import logging
import time
from importlib.metadata import version

import networkx as nx
import numpy as np
from decent_array import interoperability as iop
from decent_array.types import Devices, Frameworks

from decent_bench.agents import Agent
from decent_bench.algorithms.p2p import DGD
from decent_bench.benchmark import configure
from decent_bench.costs import L2RegularizerCost, LinearRegressionCost
from decent_bench.networks import P2PNetwork


def build(A, b, W, l2, snapshot_period):
    """Build one fresh P2PNetwork (costs, agents, topology, weights); agents are returned in worker order."""
    n, m, d = A.shape
    agents = []
    for i in range(n):
        # decent-bench Dataset: list of (features [d], target [1]) Array pairs.
        data = [(iop.from_numpy(A[i, j]), iop.from_numpy(b[i, j : j + 1])) for j in range(m)]
        cost = LinearRegressionCost(data, batch_size="all")
        # Fill the cost's cached A, b and A^T A now (it does so lazily on the first gradient call), so the timed
        # loop does not include this set-up work.  Done before the Agent wraps the cost, so it is not counted.
        cost.gradient(iop.from_numpy(np.zeros(d)), indices="all")
        if l2 != 0.0:
            cost = cost + L2RegularizerCost((d,)) * l2
        # Only x0 and the final x go to the agent's history (the final iterate is always snapshotted).
        agents.append(Agent(cost, state_snapshot_period=snapshot_period))
    graph = nx.Graph()
    graph.add_nodes_from(range(n))  # node order = worker order = agent index
    graph.add_edges_from((i, j) for i in range(n) for j in range(i + 1, n) if W[i, j] != 0.0)
    network = P2PNetwork(graph, agents)
    assert [a.index for a in network.agents()] == list(range(n))
    network.weights = iop.from_numpy(W)  # use our W, not decent-bench's Metropolis-Hastings weights
    return network, agents


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem")
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    p = np.load(args.problem)
    A, b, x0, W = (np.asarray(p[k], dtype=np.float64) for k in ("A", "b", "x0", "W"))
    lr, steps, l2 = float(p["lr"]), int(p["steps"]), float(p["l2"])

    # Numpy backend on CPU; WARNING log level keeps decent-bench's (rich) logger quiet.  Algorithm.run itself
    # prints nothing: the progress bar belongs to decent_bench.benchmark.benchmark, which is not used here.
    configure(framework=Frameworks.NUMPY, device=Devices.CPU, log_level=logging.WARNING)

    loop_s, setup_s = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        network, agents = build(A, b, W, l2, snapshot_period=steps)
        alg = DGD(step_size=lr, x0={a: iop.from_numpy(x0[i]) for i, a in enumerate(agents)})
        t1 = time.perf_counter()
        alg.run(network, steps)  # initialize (copies x0 into the agents) + `steps` DGD iterations
        t2 = time.perf_counter()
        setup_s.append(t1 - t0)
        loop_s.append(t2 - t1)

    x = np.stack([iop.to_numpy(a.x) for a in agents])
    out = {
        "peer": f"decent-bench {version('decent-bench')}",
        "order": "paper",
        "x": x.tolist(),
        "loop_s": loop_s,
        "setup_s": float(np.mean(setup_s)),
        "iterations": steps,
    }
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
