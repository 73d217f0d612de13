"""DeepSqueeze (Tang et al. 2019, "DeepSqueeze: Decentralization Meets Error-Compensated Compression"), in
the form of the authors' implementation (epfml/ChocoSGD, ``dl_code/pcode/optim/deep_squeeze.py``).

Per worker i, with the error ``e_i`` (starts at 0) and the consensus step γ:
1. SGD step on the model: ``x_i ← x_i − η d_i`` (d: the shared local step's direction);
2. error-compensated value: ``v_i = x_i + e_i``; ``c_i = Q(v_i)``; ``e_i ← v_i − c_i``;
3. exchange ``c`` (one compressed message per worker and round);
4. consensus on the compressed values: ``x_i ← x_i + γ (Σ_j w_ij c_j − c_i)``.
The model itself is never replaced by ``v`` or ``c``: only the consensus term moves it past the SGD step.

Without compression (``c = v``, ``e = 0``) and with γ = 1 this is ``x ← W (x − η d)``: D-PSGD in its
step-then-gossip (``code``) order. The average moves as SGD's does for any operator: W is doubly stochastic, so
the consensus term sums to zero over workers and ``mean(x_{t+1}) = mean(x_t) − η mean(d_t)``; the error only
changes how fast the models agree. ``grad=None`` runs steps 2–4 alone (DeepSqueeze's gossip).

γ is Choco's ``gamma`` setting; with ``gamma=auto`` it is the γ tuned for Choco-Gossip on the run's graph and
compressor (the suite has one consensus tuner), not a γ tuned for DeepSqueeze itself.

On a network that loses messages (the run's faults) the gossip of c follows D-PSGD's rule (its fault_rule
"reweight", applied by the communicator): a receiver keeps the weight of a lost c_j on its own c_i, so its
consensus term is ``Σ_j w'_ij c_j − c_i`` over what arrived. Nothing else depends on delivery: the error is
the sender's own (``v − c`` whether c arrived or not) and no copy is shared. With symmetric losses W' stays
doubly stochastic, the consensus term sums to zero and the average moves exactly as SGD's; one-directional
losses move it. A worker away (faults.active, absent) loses its links both ways and the runner restores its
x and e: the others' consensus terms still sum to zero, so the average moves by the present workers' steps
alone (tests/test_deepsqueeze.py, tests/test_keeping_the_average.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..comm import Traffic
from .base import Algorithm, register
from .step_tuning import ConsensusStepOptions, TunesItsStep


@dataclass(frozen=True)
class DeepSqueezeOptions(ConsensusStepOptions):
    """γ: the authors' consensus_stepsize."""


@register
class DeepSqueeze(TunesItsStep, Algorithm):
    name, label = "deepsqueeze", "DeepSqueeze"
    Options = DeepSqueezeOptions
    keeps_average = True
    contraction = True  # the analysis bounds the compression error relative to its input
    consensus_step = True
    auto_revision = 1
    # the gossip of c reweighted (D-PSGD's rule); no copies: the average is kept when losses are symmetric
    fault_rule = "reweight"
    examples = ({"gamma": 0.5}, {"gamma": 1.0})
    exact_forms = (({"gamma": 1.0}, "dpsgd", {"order": "code"}),)
    gossip_alone = (("sign", {"gamma": 0.2}, 300, 0.1),)  # its error feedback stalls near a tenth of the spread
    buffers = ("error",)

    def setup(self) -> None:
        self.error = torch.zeros_like(self.x)  # e_i: what compression dropped from v_i last round
        # reused every round: the compressed values and the consensus direction (W − I) c
        self._c = torch.empty_like(self.x)
        self._u = torch.empty_like(self.x)

    def step(self, grad, lr: float) -> Traffic:
        self._descend(grad, lr)
        v = self.error.add_(self.x)  # v = x + e, in e's buffer
        c = self._compress(v, out=self._c)
        consensus = self.comm.gossip_into(c, self._u.zero_(), self_shift=-1.0)  # Σ_j w_ij c_j − c_i
        self.error.sub_(c.values)  # e = v − c (after the send: the message may refer to v)
        self.x.add_(consensus, alpha=float(self.options.gamma))
        return self.comm.drain()
