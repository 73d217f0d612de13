"""AdaGossip (Aketi, Hashemi & Roy 2024), Choco's option ``adagossip``: rounds by hand in float64 (the moment,
its bias correction, the step per coordinate), its special case β = 0 (a step of γ·sign(u)), Choco-Gossip with it
reaching consensus under top-k, why it is excused from keeping the average (it moves it), γ = auto as its base step
with nothing tuned and γ out of a study's grid, distributed = simulated. Bad options: tests/test_bad_input.py."""
import json

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig
from bench.algorithms.choco import ADAGOSSIP_GAMMA
from bench.topology import make_topology
from test_algorithms import Quadratic, build, start

D = 40  # test_algorithms.start's dimension


def _reference(x0: torch.Tensor, W: torch.Tensor, problem, steps: int, lr: float, gamma: float, beta: float,
               eps: float) -> torch.Tensor:
    """Choco-SGD (paper order, exact messages: x̂ = x after the exchange) with AdaGossip's step, written out."""
    x, v = x0.clone(), torch.zeros_like(x0)
    for t in range(1, steps + 1):
        x = x - lr * problem.grad(x)
        u = (W - torch.eye(len(W), dtype=x.dtype)) @ x  # Σ_j w_ij x̂_j − x̂_i with x̂ = x
        v = beta * v + (1 - beta) * u * u
        x = x + gamma * u / ((v / (1 - beta ** t)).sqrt() + eps)
    return x


@pytest.mark.parametrize("beta", [0.0, 0.9, 0.999])
def test_rounds_by_hand_with_exact_messages(beta):
    n, steps, lr, gamma = 6, 12, 0.05, 0.02
    topo = make_topology("ring", n)
    problem, x0 = Quadratic(n, D), start(n)
    algo = build("choco", topo, x0, "none", {"gamma": gamma, "adagossip": True, "ada_beta": beta},
                 local_cfg=LocalStepConfig(momentum=0.0, weight_decay=0.0))
    for _ in range(steps):
        algo.step(problem.grad(algo.x), lr)
    W = torch.as_tensor(topo.W, dtype=torch.float64)
    expected = _reference(x0, W, problem, steps, lr, gamma, beta, 1e-8)
    torch.testing.assert_close(algo.x, expected, rtol=1e-12, atol=1e-12)
    assert algo.ada_steps == steps


def test_beta_zero_is_a_step_of_gamma_times_the_sign_of_the_consensus_direction():
    """β = 0: v = u ⊙ u each round, so γ_i ⊙ u_i = γ u/(|u| + ε) = γ·sign(u) wherever |u| ≫ ε (and 0 where u = 0)."""
    n, gamma = 5, 0.03
    topo = make_topology("ring", n)
    algo = build("choco", topo, start(n, identical=False), "top:0.2", {"gamma": gamma, "adagossip": True,
                                                                        "ada_beta": 0.0})
    for _ in range(3):
        before = algo.x.clone()
        algo.step(None, 0.0)
        moved = algo.x - before
        big = algo.u.abs() > 1e-3  # u/(|u| + ε) is sign(u) to 1e-5 there
        torch.testing.assert_close(moved[big], gamma * algo.u[big].sign(), rtol=1e-4, atol=0)
        assert torch.all(moved[algo.u == 0] == 0)
        assert big.any()


def test_choco_gossip_with_adagossip_nears_consensus_down_to_a_floor_set_by_gamma():
    """Gossip alone (no gradient) on a ring of 8 with top-10 %: the spread of the models falls a hundredfold within
    1,000 rounds at γ = ADAGOSSIP_GAMMA, without a γ tuned for the graph or the compressor. Its step is about γ per
    coordinate where u is steady (γ·u/√v), so it stops near a floor that scales with γ, where Choco-Gossip's fixed
    γ goes on to round-off: after 3,000 rounds γ = 0.003 is ten times closer than γ = 0.03."""
    n = 8
    topo = make_topology("ring", n)
    x0 = start(n, identical=False)

    def spread(x):
        return float((x - x.mean(0)).norm()) / float((x0 - x0.mean(0)).norm())

    def spread_after(gamma, rounds):
        algo = build("choco", topo, x0, "top:0.1", {"gamma": gamma, "adagossip": True})
        for _ in range(rounds):
            algo.step(None, 0.0)
        return spread(algo.x)

    assert spread_after(ADAGOSSIP_GAMMA, 1000) < 0.01
    small, large = spread_after(0.003, 3000), spread_after(0.03, 3000)
    assert small < large / 10, (small, large)


def test_its_steps_differ_between_workers_so_the_average_moves():
    """Why Choco declares the average not kept under AdaGossip (keeps_average_with): the same rounds with one γ
    keep mean(x) to round-off; with a step per worker and coordinate it moves."""
    n = 6
    topo = make_topology("ring", n)
    cls = ALGORITHMS.get("choco")
    for adagossip, kept in ((False, True), (True, False)):
        options = {"gamma": 0.05, "adagossip": adagossip}
        assert cls.keeps_average_with(cls.Options(**options)) is kept
        algo = build("choco", topo, start(n, identical=False), "top:0.2", options)
        mean0 = algo.x.mean(0).clone()
        for _ in range(20):
            algo.step(None, 0.0)
        moved = float((algo.x.mean(0) - mean0).abs().max())
        assert (moved < 1e-13) if kept else (moved > 1e-6), (adagossip, moved)


def test_auto_gamma_is_its_base_step_and_a_study_cell_with_it_tunes_the_lr_but_not_gamma():
    from bench.pipeline.study import Study

    algo = build("choco", make_topology("ring", 4), start(4), "sign", {"adagossip": True})
    assert algo.options.gamma == ADAGOSSIP_GAMMA
    assert algo.resolved["gamma"] == {"value": ADAGOSSIP_GAMMA,
                                      "source": "AdaGossip's base step (adapted per coordinate, not tuned)"}
    study = Study({"study": "ada", "task": "lsq", "tune": {"grid": {"lr": [0.01, 0.1], "gamma": [0.1, 0.5]}},
                   "blocks": {"b": {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4],
                                    "algorithm_options": [{"adagossip": True}, {}]}}})
    keys = {json.dumps(settings.get("algorithm_options"), sort_keys=True): study.tuned_keys(settings)
            for settings in study.cells.values()}
    assert keys == {json.dumps({"adagossip": True}): ["lr"], json.dumps({}): ["gamma", "lr"]}, keys


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
