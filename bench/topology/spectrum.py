"""The whole spectrum of a topology and its effective number of neighbours.

Vogels, Hendrikx and Jaggi (NeurIPS 2022, "Beyond spectral gap: the role of the topology in decentralized
learning", Sec. 3, and their code, random_walks.py) follow the random walk x ← W(√γ x + ξ), ξ i.i.d. N(0, I):
a worker's value is a γ-decayed sum of the noise its neighbours averaged in. Alone (W = I) its stationary
variance is 1/(1 − γ); the effective number of neighbours is how many times smaller it is on W:

    n_W(γ) = (1/(1 − γ)) / ((1/n) Σ_i Var x_i)  and, for a symmetric W with eigenvalues λ_i,
    (1/n) Σ_i Var x_i = (1/n) Σ_i λ_i² / (1 − γ λ_i²),

since the stationary covariance is Σ = W(γΣ + I)Wᵀ. So n_I = 1 and n_J = n for every γ; each term falls with γ,
so n_W(γ) grows with γ, from n / ‖W‖_F² as γ → 0 to n as γ → 1 on a connected graph.

For a periodic W_0 … W_{τ−1} (time-varying topologies) the walk applies W_{t mod τ}; its covariance is periodic,
found from one period's map Σ ↦ γ^τ Π Σ Πᵀ + Q (a discrete Lyapunov equation, solved on the deviations
from the mean), and the variance is averaged over
the τ rounds of the period (the authors' code reads it at one chosen round; ``phase`` does the same).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import BenchError
from .time_varying import TimeVaryingTopology

if TYPE_CHECKING:  # scipy is imported where a sparse matrix is built: a static-topology run never loads it
    from scipy.sparse import csr_matrix

# the decays `bench topology` and run.json report: short memory (0.5) to the long memory of small steps (0.99)
DECAYS = (0.5, 0.9, 0.99)


def _check_gamma(gamma: float) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.floating)) or not 0.0 < gamma < 1.0:
        raise BenchError(f"decay γ of the effective number of neighbours must be a number in (0, 1); got {gamma!r}")
    return float(gamma)


def effective_neighbors(eigenvalues: Sequence[float] | np.ndarray, gamma: float) -> float:
    """n_W(γ) of a symmetric W from its eigenvalues (Vogels et al. 2022, Sec. 3)."""
    gamma = _check_gamma(gamma)
    # a stochastic W has |λ| <= 1; eigvalsh may return 1 + 1e-16, which near γ = 1 would count as a large error
    squares = np.minimum(np.square(np.asarray(eigenvalues, dtype=np.float64)), 1.0)
    mean_variance = float(np.mean(squares / (1.0 - gamma * squares)))
    return 1.0 / ((1.0 - gamma) * mean_variance)


def walk_variances(matrices: Sequence, gamma: float) -> np.ndarray:
    """The stationary mean variance (1/n) tr Σ_t of the periodic walk right after each round t of the period.

    Every W_t is doubly stochastic, so the walk splits into the workers' mean, a scalar walk of variance
    1/(n(1 − γ)), and the deviations D_t from it, uncorrelated with the mean, so
    (1/n) tr Σ_t = (1/n)(1/(1 − γ) + tr D_t).
    D over one period is D ↦ γ^τ Π̃ D Π̃ᵀ + Q with Π̃ = Π − J, solved by doubling (Smith's iteration), which
    ends at once where a period averages exactly (Π̃ = 0)."""
    from scipy.sparse import csr_matrix

    gamma = _check_gamma(gamma)
    rounds = [csr_matrix(W, dtype=np.float64) for W in matrices]
    n = rounds[0].shape[0]
    centre = np.eye(n) - 1.0 / n  # I − J: the noise that moves the deviations

    def step(W, D):  # W(γD + (I − J))Wᵀ for a symmetric argument
        return np.asarray(W @ (W @ (gamma * D + centre)).T)

    noise, product = np.zeros((n, n)), np.eye(n)
    for W in rounds:
        noise, product = step(W, noise), np.asarray(W @ product)
    a = np.sqrt(gamma ** len(rounds)) * (product - 1.0 / n)
    deviations = noise
    for _ in range(64):  # Σ_{m < 2^j} a^m Q a^mᵀ; the rest is below ‖a^{2^j}‖² of it
        if np.linalg.norm(a) < 1e-8:
            break
        deviations = deviations + a @ deviations @ a.T
        a = a @ a
    out = []
    for W in rounds:
        deviations = step(W, deviations)
        out.append((1.0 / (1.0 - gamma) + float(np.trace(deviations))) / n)
    return np.asarray(out)


def effective_neighbors_periodic(matrices: Sequence, gamma: float, phase: int | None = None) -> float:
    """n_W(γ) of the walk through W_0 … W_{τ−1}, its variance averaged over the period's rounds (or read after
    round ``phase``); one symmetric matrix gives ``effective_neighbors`` of its eigenvalues."""
    variances = walk_variances(matrices, gamma)
    variance = float(variances.mean()) if phase is None else float(variances[phase % len(variances)])
    return 1.0 / ((1.0 - gamma) * variance)


def spectrum_summary(topology) -> dict:
    """The keys `bench topology` and run.json add to ``describe()``: the spectrum and n_W(γ) at DECAYS.

    Static: the eigenvalues of W, largest first. Time-varying: the singular values of the product over one period
    (1 − the second is the reported spectral gap; the product need not be symmetric), and n_W(γ) of the periodic
    walk through the actual rounds W_0 … W_{τ−1}."""
    if isinstance(topology, TimeVaryingTopology):  # W_at(t) is the only W it has, even with a period of 1
        rounds = [topology.W_at(t) for t in range(topology.period)]
        spectrum = np.linalg.svd(topology.product(), compute_uv=False)
        n_eff = {f"gamma={g}": effective_neighbors_periodic(rounds, g) for g in DECAYS}
        return {"spectrum": [float(s) for s in spectrum],
                "spectrum_of": "singular values of the product over one period, largest first",
                "n_eff": n_eff,
                "n_eff_of": "the random walk through the period's rounds W_0 … W_{τ−1}, variance averaged over "
                            "the rounds (Vogels et al. 2022)"}
    eigenvalues = topology.eigenvalues
    return {"spectrum": [float(x) for x in eigenvalues],
            "spectrum_of": "eigenvalues of W, largest first",
            "n_eff": {f"gamma={g}": effective_neighbors(eigenvalues, g) for g in DECAYS},
            "n_eff_of": "W, from its eigenvalues (Vogels et al. 2022)"}
