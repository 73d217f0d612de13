"""Unreliable networks: what the ``faults`` setting of a run describes (spec.py: parsing and its one-line
errors, no torch), the seeded schedule of which directed link delivers in which round (schedule.py: the
same for every process that asks, whatever rounds it asks for), and what a receiver does with the links
that delivered (reweight.py: D-PSGD's rule, the weight of a lost message kept on the receiver's own model),
how long a round computes with slow workers (straggler.py) and how a worker sits a round out (away.py)."""
from .reweight import delivered_weights, reweighted
from .schedule import FaultSchedule
from .spec import DROP_MODELS, FaultSpec, parse_faults

__all__ = ["DROP_MODELS", "FaultSchedule", "FaultSpec", "delivered_weights", "parse_faults", "reweighted"]
