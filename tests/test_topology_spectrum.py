"""The effective number of neighbours (Vogels, Hendrikx & Jaggi 2022, Sec. 3) and the whole spectrum that
`bench topology` and run.json report (bench/topology/spectrum.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bench.cli import main
from bench.errors import BenchError
from bench.topology import make_topology
from bench.topology.spectrum import (DECAYS, effective_neighbors, effective_neighbors_periodic, spectrum_summary,
                                     walk_variances)

GAMMAS = [1e-6, 0.1, 0.5, 0.9, 0.99, 0.999]


def brute_force_neighbors(rounds, gamma, periods=4000):
    """1/((1 − γ) v) with v the mean variance of x ← W_t(√γ x + ξ), its covariance iterated from 0 for many
    periods and averaged over the last one: independent of the closed form and the Lyapunov solution."""
    n = rounds[0].shape[0]
    sigma, last = np.zeros((n, n)), []
    for p in range(periods):
        for W in rounds:
            sigma = W @ (gamma * sigma + np.eye(n)) @ W.T
            if p == periods - 1:
                last.append(np.trace(sigma) / n)
    return 1.0 / ((1.0 - gamma) * np.mean(last))


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n", [2, 5, 16])
def test_fully_connected_gives_n_and_isolated_gives_one_at_every_decay(n, gamma):
    complete = make_topology("complete", n)  # uniform weights 1/n: W = 11ᵀ/n
    assert np.abs(complete.W - 1.0 / n).max() < 1e-15
    assert effective_neighbors(complete.eigenvalues, gamma) == pytest.approx(n, rel=1e-9)
    assert effective_neighbors_periodic([complete.W], gamma) == pytest.approx(n, rel=1e-9)
    assert effective_neighbors(np.ones(n), gamma) == pytest.approx(1.0, rel=1e-12)
    assert effective_neighbors_periodic([np.eye(n)], gamma) == pytest.approx(1.0, rel=1e-9)


def test_a_hand_computed_pair():
    """n = 2, W = [[3/4, 1/4], [1/4, 3/4]]: eigenvalues 1 and 1/2. At γ = 1/2 the mean variance is
    ½(1/(1 − ½) + (1/4)/(1 − 1/8)) = ½(2 + 2/7) = 8/7, so n_W = 1/(½ · 8/7) = 7/4."""
    W = np.array([[0.75, 0.25], [0.25, 0.75]])
    assert effective_neighbors([1.0, 0.5], 0.5) == pytest.approx(7 / 4, rel=1e-14)
    assert effective_neighbors_periodic([W], 0.5) == pytest.approx(7 / 4, rel=1e-12)
    assert brute_force_neighbors([W], 0.5, periods=200) == pytest.approx(7 / 4, rel=1e-12)


def test_a_hand_computed_period_isolated_then_averaged():
    """n = 2, W_0 = I then W_1 = J, γ = 1/2. The mean has variance 1/(n(1 − γ)) = 1; the deviation from it is
    reset to 0 by J and is the fresh noise's (I − J), trace 1, right after I. So the variance after round 0 is
    (1/2)(2 + 1) = 3/2 (n_W = 4/3), after round 1 it is 1 (n_W = 2), and averaged over the period 5/4 (n_W = 8/5)."""
    rounds = [np.eye(2), np.full((2, 2), 0.5)]
    assert walk_variances(rounds, 0.5) == pytest.approx([1.5, 1.0], rel=1e-12)
    assert effective_neighbors_periodic(rounds, 0.5, phase=0) == pytest.approx(4 / 3, rel=1e-12)
    assert effective_neighbors_periodic(rounds, 0.5, phase=1) == pytest.approx(2.0, rel=1e-12)
    assert effective_neighbors_periodic(rounds, 0.5) == pytest.approx(8 / 5, rel=1e-12)
    assert brute_force_neighbors(rounds, 0.5, periods=200) == pytest.approx(8 / 5, rel=1e-12)


@pytest.mark.parametrize("gamma", GAMMAS)
def test_ring_below_torus_below_complete_at_equal_n(gamma):
    values = [effective_neighbors(make_topology(spec, 16).eigenvalues, gamma)
              for spec in ("ring", "torus", "complete")]
    assert 1.0 < values[0] < values[1] < values[2] == pytest.approx(16, rel=1e-9), values


@pytest.mark.parametrize("spec, n", [("ring", 8), ("ring", 25), ("torus", 16), ("star", 6), ("exponential", 12),
                                     ("random-regular:3", 10), ("social", 32)])
def test_grows_with_the_decay_from_the_frobenius_limit_to_n(spec, n):
    """Each term (1 − γ)λ²/(1 − γλ²) falls as γ grows (its derivative is λ²(λ² − 1)/(1 − γλ²)² <= 0), so n_W rises:
    from n/‖W‖_F² as γ → 0 to n as γ → 1 on a connected graph, and it stays within [1, n]."""
    topology = make_topology(spec, n)
    grid = np.linspace(0.0, 1.0, 201)[1:-1]
    values = np.array([effective_neighbors(topology.eigenvalues, g) for g in grid])
    assert (np.diff(values) > 0).all() and values.min() >= 1.0 and values.max() <= n
    assert effective_neighbors(topology.eigenvalues, 1e-12) == pytest.approx(n / np.sum(topology.W ** 2), rel=1e-9)
    assert effective_neighbors(topology.eigenvalues, 1 - 1e-9) == pytest.approx(n, rel=1e-6)


@pytest.mark.parametrize("spec, n", [("ring", 9), ("torus", 12), ("star", 5), ("one-peer-exp", 8), ("base:2", 7),
                                     ("base:1", 6)])
def test_the_periodic_walk_matches_its_iterated_covariance_and_a_static_w_its_eigenvalues(spec, n):
    """A static W is a period of one, or of repeats of it, and the closed form of its eigenvalues."""
    topology = make_topology(spec, n)
    rounds = [topology.W_at(t) for t in range(topology.period)]
    for gamma in (0.5, 0.9, 0.99):
        periodic = effective_neighbors_periodic(rounds, gamma)
        if gamma < 0.99:  # 400 periods of 0.99 leave 2 % of the start
            assert periodic == pytest.approx(brute_force_neighbors(rounds, gamma, periods=400), rel=1e-9)
        if not topology.time_varying:
            closed = effective_neighbors(topology.eigenvalues, gamma)
            assert periodic == pytest.approx(closed, rel=1e-10)
            assert effective_neighbors_periodic(rounds * 3, gamma) == pytest.approx(closed, rel=1e-10)


@pytest.mark.parametrize("gamma", [0, 1, 1.5, -0.1, True, "0.5", float("nan")])
def test_a_decay_outside_the_open_unit_interval_is_refused(gamma):
    with pytest.raises(BenchError, match=r"in \(0, 1\)"):
        effective_neighbors([1.0, 0.5], gamma)


def test_the_summary_of_a_static_graph_is_its_eigenvalues():
    ring = make_topology("ring", 8)  # its eigenvalues against the ring's closed form: test_topology.py
    summary = spectrum_summary(ring)
    expected = ring.eigenvalues
    assert np.array_equal(summary["spectrum"], expected) and "eigenvalues of W" in summary["spectrum_of"]
    assert list(summary["n_eff"]) == [f"gamma={g}" for g in DECAYS]
    assert summary["n_eff"]["gamma=0.9"] == pytest.approx(effective_neighbors(expected, 0.9), rel=1e-12)


def test_the_summary_of_a_time_varying_graph_is_its_period_product():
    topology = make_topology("one-peer-exp", 16)
    summary = spectrum_summary(topology)
    assert summary["spectrum"][0] == pytest.approx(1.0) and max(summary["spectrum"][1:]) < 1e-12
    assert "product over one period" in summary["spectrum_of"] and "rounds" in summary["n_eff_of"]
    assert topology.spectral_gap == pytest.approx(1.0 - summary["spectrum"][1], abs=1e-12)
    # one round alone averages only pairs: the period's walk reduces the noise more than a round of it
    one_round = effective_neighbors_periodic([topology.W_at(0)], 0.9)
    assert one_round < summary["n_eff"]["gamma=0.9"] < 16


@pytest.mark.parametrize("spec, n", [("torus", 64), ("one-peer-exp", 16), ("margulis", 64), ("expander", 61)])
def test_bench_topology_prints_the_spectrum_and_n_eff(capsys, spec, n):
    assert main(["topology", "--topology", spec, "--nodes", str(n), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n"] == n and 0 < info["spectral_gap"] <= 1 and info["time_varying"] is (spec == "one-peer-exp")
    assert len(info["spectrum"]) == n and info["spectrum"] == sorted(info["spectrum"], reverse=True)
    assert set(info["n_eff"]) == {"gamma=0.5", "gamma=0.9", "gamma=0.99"}
    assert info["spectral_gap"] == pytest.approx(1 - max(abs(info["spectrum"][1]), abs(info["spectrum"][-1])))
    assert main(["topology", "--topology", spec, "--nodes", str(n)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert lines["n"].split() == ["n", str(n)]
    # n = 64 stays readable: the largest and smallest few, not 64 numbers
    assert "more; --json lists all" in lines["spectrum"] and len(lines["spectrum"].split()) < 25
    assert "gamma=0.5:" in lines["n_eff"] and "gamma=0.99:" in lines["n_eff"]
