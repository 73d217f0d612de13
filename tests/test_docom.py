"""DoCoM (Yau & Wai 2023, Algorithm 1) with its STORM estimator, against the box written out in float64 on
minibatch least squares (two gradients a step on the same batch, as the authors' ``update_momentum_v``), its β
schedule, and the runner's side: the second gradient on the round's batch at the previous model, both counted in
the compute time, and v⁰ from the first batches. Gradient tracking with exact messages, the optimum D-PSGD misses
and BEER at β = 1: tests/test_laws.py."""
import json

import pytest
import torch

from bench.algorithms import LocalStepConfig
from bench.cli import main
from bench.compressors import make_compressor
from bench.topology import make_topology
from test_algorithms import assert_agrees, build, start

N, D, ROWS, BATCH = 6, 12, 30, 4


class MinibatchLeastSquares:
    """f_i(x) = mean over worker i's rows of ½(a·x − b)²; a batch is one index set per worker."""

    def __init__(self, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.A = torch.randn(N, ROWS, D, generator=g, dtype=torch.float64)
        self.b = torch.randn(N, ROWS, generator=g, dtype=torch.float64)
        self.draws = torch.Generator().manual_seed(seed + 1)

    def batch(self):
        return torch.stack([torch.randperm(ROWS, generator=self.draws)[:BATCH] for _ in range(N)])

    def grad(self, x, idx):
        A = torch.stack([self.A[i, idx[i]] for i in range(N)])  # [N, B, D]
        b = torch.stack([self.b[i, idx[i]] for i in range(N)])
        residual = torch.bmm(A, x.unsqueeze(2)).squeeze(2) - b
        return torch.bmm(residual.unsqueeze(1), A).squeeze(1) / BATCH


def as_the_runner_steps(algo, problem, steps, lr, epoch_of=lambda t: 0.0):
    """The runner's order: the gradient at the model, the second at the method's point on the same batch."""
    for t in range(steps):
        idx = problem.batch()
        algo.epoch = epoch_of(t)
        point = algo.second_gradient_point()
        if point is not None:
            algo.take_second_gradient(problem.grad(point, idx))
        algo.step(problem.grad(algo.x, idx), lr)


def reference(theta0, W, Q, problem, steps, lr, gamma, beta_of):
    """Algorithm 1 in DoCoM's letters: θ⁺ = θ + γ(W − I)θ̂ − ηg, θ̂⁺ = θ̂ + Q(θ⁺ − θ̂),
    v⁺ = β∇f(θ⁺; ξ⁺) + (1 − β)(v + ∇f(θ⁺; ξ⁺) − ∇f(θ; ξ⁺)), g⁺ = g + γ(W − I)ĝ + v⁺ − v, ĝ⁺ = ĝ + Q(g⁺ − ĝ),
    from g⁰ = v⁰ = ∇f(θ⁰; ξ⁰), θ̂⁰ = ĝ⁰ = 0; the batches drawn in the runner's order."""
    L = W - torch.eye(N, dtype=torch.float64)
    theta, theta_hat, g_hat = theta0.clone(), torch.zeros_like(theta0), torch.zeros_like(theta0)
    v = problem.grad(theta, problem.batch())
    g = v.clone()
    for t in range(1, steps):
        new = theta + gamma * (L @ theta_hat) - lr * g
        theta_hat = theta_hat + Q(new - theta_hat)
        idx = problem.batch()
        beta = beta_of(t)
        v_new = beta * problem.grad(new, idx) + (1 - beta) * (v + problem.grad(new, idx) - problem.grad(theta, idx))
        g = g + gamma * (L @ g_hat) + v_new - v
        g_hat = g_hat + Q(g - g_hat)
        theta, v = new, v_new
    return theta + gamma * (L @ theta_hat) - lr * g, v  # the step that took the last gradient also moves θ


@pytest.mark.parametrize("compressor, beta_epochs", [("top:0.25", []), ("sign", [0.3, 0.6]), ("none", [])])
def test_three_hundred_steps_are_algorithm_1_with_the_storm_estimator(compressor, beta_epochs):
    steps, beta, gamma, lr = 300, 0.3, 0.4, 0.02
    topo = make_topology("ring", N)
    theta0 = start(N, d=D, identical=False)
    algo = build("docom", topo, theta0, compressor, {"gamma": gamma, "beta": beta, "beta_epochs": beta_epochs},
                 local_cfg=LocalStepConfig(momentum=0.0, weight_decay=0.0))
    twin = make_compressor(compressor, contraction=True)
    epoch_of = lambda t: t / steps  # noqa: E731 (one epoch of 300 steps)
    as_the_runner_steps(algo, MinibatchLeastSquares(), steps, lr, epoch_of)
    beta_of = lambda t: beta / 10 ** sum(epoch_of(t) >= e for e in beta_epochs)  # noqa: E731
    theta, v = reference(theta0, torch.tensor(topo.W, dtype=torch.float64), lambda z: twin.compress(z).values,
                         MinibatchLeastSquares(), steps, lr, gamma, beta_of)
    # the same sums in another order: round-off grows over 300 steps to ~1e-9 (values of order 1)
    assert_agrees(algo, 1e-8, m=v, x=theta)


def test_the_runner_takes_the_second_gradient_on_the_same_batch_and_times_both(tmp_path, monkeypatch, capsys):
    """A run of DoCoM on lsq: every step after the first computes two gradients, the second on the same batch at
    the model the previous step's gradient was taken at; v⁰ averages first_batches batches at θ⁰; the modelled
    compute time counts each gradient."""
    import sys

    from bench.tasks.synthetic import SyntheticTask

    calls = []
    real = SyntheticTask.gradients

    def spy(self, x, batch):
        if sys._getframe(1).f_code.co_name == "_gradients":  # the training steps' (not the set-up's warm-up)
            calls.append((x.clone(), batch[1], batch[2].clone()))
        return real(self, x, batch)

    monkeypatch.setattr(SyntheticTask, "gradients", spy)
    out = tmp_path / "run"
    argv = ["run", "--task", "lsq", "--algorithm", "docom", "--compressor", "sign", "--nodes", "4", "--epochs", "1",
            "--batch-size", "50", "--seed", "0", "--quiet", "--out", str(out), "--set", "gamma=0.5",
            "--set", "compute_time=0.01", "--set", "algorithm_options.first_batches=3"]
    assert main(argv) == 0, capsys.readouterr().err
    steps = 1000 // 4 // 50  # n_train rows dealt to 4 workers, batches of 50
    assert len(calls) == 3 + 2 * (steps - 1)
    assert [step for _, step, _ in calls[:3]] == [0, 1, 2] and all(torch.equal(calls[0][0], x) for x, _, _ in calls[:3])
    for k in range(1, steps):  # (model, batch k) then (the model of step k − 1, the same batch)
        (x, step, batch), (prev, again, same) = calls[1 + 2 * k], calls[2 + 2 * k]
        taken_at = calls[0][0] if k == 1 else calls[2 * k - 1][0]
        assert step == again == k and torch.equal(batch, same) and torch.equal(prev, taken_at)
        assert not torch.equal(prev, x)
    run = json.loads((out / "run.json").read_text())
    assert run["final"]["time_compute_s"] == pytest.approx(0.01 * len(calls))
