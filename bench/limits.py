"""Bounds on numbers and names a person gives, shared by the command line and the run settings
(a light module: `bench topology` must not import torch to check its arguments)."""
from __future__ import annotations

import re

# W is a dense n×n float64 matrix whose whole spectrum is computed: at 4096 nodes that is 128 MiB
# and about 20 s on one core; ten times more nodes would need 13 GiB and hours.
MAX_NODES = 4096
# bench consensus / tune-gamma keep a few float64 [n, dim] states (x, x-hat, s, the start): at the
# bound below that is 2 GiB each. Rounds are a loop of Python steps: 10^6 of them is hours.
MAX_DIM = 2**24
MAX_CONSENSUS_ENTRIES = 2**28  # nodes x dim
MAX_ROUNDS = 10**6
# the synthetic problems (lsq, logreg) draw (n_train + n_test) x dim float64 features: 2 GiB at the bound
MAX_SYNTHETIC_ENTRIES = 2**28
# numpy takes seeds below 2^32 and the suite derives seeds by adding small offsets (seed + 1, ...)
MAX_SEED = 2**31 - 1
# the torch device strings the suite runs on
DEVICES = "cpu, cuda, cuda:N"
_DEVICE = re.compile(r"cpu|cuda(:\d+)?")


def is_device(text: str) -> bool:
    return isinstance(text, str) and _DEVICE.fullmatch(text) is not None
