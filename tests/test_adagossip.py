"""AdaGossip (Aketi, Hashemi & Roy 2024), Choco's option ``adagossip``, as the authors' code runs it
(aparna-aketi/AdaG_SGD): 300 steps against their capped step written out in float64, gossip alone reaching
consensus with the cap and stalling without, γ = auto as the
authors' base step 1 and a study's own grid for it, distributed = simulated, and the analysis showing it apart.
Why it is excused from keeping the average (its steps differ between workers, so the average moves):
tests/test_keeping_the_average.py."""
import json

import pytest
import torch

from bench.algorithms import ALGORITHMS
from bench.algorithms.choco import ADAGOSSIP_GAMMA
from bench.topology import make_topology
from test_algorithms import build, start, written_out


def adagossip_reference(x0, W, grad, steps, lr, gamma, beta=0.999, eps=1e-8, cap=True):
    """Choco-SGD with exact messages (x̂ = x after each exchange) and AdaGossip's step as the authors' code takes
    it (``_query_gossip_queue``): v ← βv + (1 − β)u², step = clamp(γ / (√(v / (1 − βᵗ)) + ε), max = 1), x += step ⊙ u."""
    x, v = x0.clone(), torch.zeros_like(x0)
    for t in range(1, steps + 1):
        if grad is not None:
            x = x - lr * grad(x)
        u = (W - torch.eye(len(W), dtype=x.dtype)) @ x
        v = beta * v + (1 - beta) * u * u
        step = gamma / ((v / (1 - beta ** t)).sqrt() + eps)
        x = x + (step.clamp(max=1.0) if cap else step) * u
    return x


@pytest.mark.parametrize("cap, beta", [(True, 0.999), (True, 0.9), (False, 0.9)])
def test_adagossip_is_the_authors_capped_step_over_three_hundred_steps(cap, beta):
    steps, lr, gamma = 300, 0.05, 1.0
    options = {"gamma": gamma, "adagossip": True, "ada_beta": beta, "ada_cap": cap}
    algo, problem, x0, W, _ = written_out("choco", "none", options)
    for _ in range(steps):
        algo.step(problem.grad(algo.x), lr)
    expected = adagossip_reference(x0, W, problem.grad, steps, lr, gamma, beta, cap=cap)
    torch.testing.assert_close(algo.x, expected, rtol=0, atol=1e-10)


def test_adagossip_gossip_reaches_consensus_with_the_cap_and_stalls_without():
    """Gossip alone, ring of 8, sign, γ = 1 (the authors' default, what auto gives): the capped step reaches
    consensus; the uncapped one (the suite's form before) takes steps of γ/ε on coordinates that agree and stalls."""
    assert ADAGOSSIP_GAMMA == 1.0
    x0 = torch.randn(8, 200, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    spread = {}
    for cap in (True, False):
        algo = build("choco", make_topology("ring", 8), x0, "sign", {"adagossip": True, "ada_cap": cap})
        for _ in range(1500):
            algo.step(None, 0.0)
        spread[cap] = float(((algo.x - algo.x.mean(0)) ** 2).sum() / 8)
    assert spread[True] < 1e-20 and spread[False] > 1.0, spread


def test_auto_gamma_is_the_authors_base_step_and_a_grid_searches_it():
    algo = build("choco", make_topology("ring", 4), start(4), "sign", {"adagossip": True})
    assert algo.options.gamma == ADAGOSSIP_GAMMA == 1.0
    assert algo.resolved["gamma"] == {"value": 1.0, "source": "AdaGossip's base step (the authors' default)"}
    assert ALGORITHMS.get("choco").tunable("sign", {"adagossip": True}) == ("gamma",)


def test_a_study_gives_adagossip_a_grid_of_its_own():
    """tune.methods names the variant: its cells search that γ grid, plain Choco's the shared one."""
    from bench.pipeline.study import Study

    study = Study({"study": "ada", "task": "lsq", "tune": {"grid": {"lr": [0.01, 0.1], "gamma": [0.1, 0.5]},
                                                          "methods": {"choco+adagossip": {"gamma": [0.3, 1.0]}}},
                   "blocks": {"b": {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4],
                                    "algorithm_options": [{"adagossip": True}, {}]}}})
    grids = {json.dumps(settings.get("algorithm_options"), sort_keys=True): study.grid_for(settings)["gamma"]
             for settings in study.cells.values()}
    assert grids == {json.dumps({"adagossip": True}): [0.3, 1.0], json.dumps({}): [0.1, 0.5]}, grids


@pytest.mark.slow
def test_distributed_is_simulated(tmp_path):
    """Two processes of two workers each train what one process simulates, AdaGossip's moment included."""
    import pandas as pd

    from bench.run import start as start_run

    settings = {"task": "lsq", "topology": "ring", "nodes": 4, "epochs": 2, "seed": 5, "lr": 0.05,
                "eval_every": 0.5, "batch_size": 8, "algorithm": "choco", "compressor": "top:0.25", "quiet": True,
                "algorithm_options": {"adagossip": True, "gamma": 0.02}}
    assert start_run(settings, tmp_path / "sim") == 0
    assert start_run({**settings, "backend": "dist", "procs": 2}, tmp_path / "dist") == 0
    timing = ["wall_s", "time_compute_s", "time_comm_s", "time_s"]
    sim, dist = (pd.read_parquet(tmp_path / k / "metrics.parquet").drop(columns=timing) for k in ("sim", "dist"))
    pd.testing.assert_frame_equal(sim, dist, rtol=1e-4, atol=1e-6)
    info = json.loads((tmp_path / "dist" / "run.json").read_text())
    assert info["status"] == "completed" and info["config"]["algorithm_options"]["adagossip"] is True


def test_the_analysis_shows_it_apart_from_plain_choco(tmp_path):
    """run.json names the variant (choco+adagossip, variant_of choco): its runs are a method of their own in the
    tables, not seeds of plain Choco's cell."""
    from analysis.load import load_runs
    from bench.run import start as start_run

    settings = {"task": "lsq", "topology": "ring", "nodes": 4, "epochs": 1, "seed": 0, "lr": 0.05,
                "batch_size": 8, "algorithm": "choco", "compressor": "sign", "quiet": True, "gamma": 0.3}
    assert start_run(settings, tmp_path / "plain") == 0
    assert start_run({**settings, "algorithm_options": {"adagossip": True, "gamma": 0.02}}, tmp_path / "ada") == 0
    described = json.loads((tmp_path / "ada" / "run.json").read_text())["algorithm"]
    assert (described["name"], described["label"], described["variant_of"]) == (
        "choco+adagossip", "Choco-SGD + AdaGossip", "choco")
    assert described["options"]["adagossip"] is True and described["headline"] is False
    assert json.loads((tmp_path / "plain" / "run.json").read_text())["algorithm"]["name"] == "choco"
    points = load_runs(tmp_path).tidy()
    assert set(zip(points["algorithm"], points["method"])) == {("choco", "Choco-SGD (sign)"), (
        "choco+adagossip", "Choco-SGD + AdaGossip (sign)")}
    assert points.groupby("algorithm")["cell"].nunique().to_dict() == {"choco": 1, "choco+adagossip": 1}
    assert points["cell"].nunique() == 2
