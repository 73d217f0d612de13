"""The unit of each kind of quantity, declared once for every table and figure (a study's and the history's), and
which count of bits a table or figure of runs shows (run.json's bits_count)."""
from __future__ import annotations

# -- the unit of each kind of quantity, the same in every table and figure (a study's and the history's) ---------
# kind -> (unit shown, factor from the unit runs and records hold): accuracies are recorded as fractions, bits as
# bits, measured wall-clock times (a step, a round: well under a second) in s, modelled times in s
UNITS = {"accuracy": ("%", 100.0), "bits": ("Mbit", 1e-6), "measured_time": ("ms", 1e3), "modelled_time": ("s", 1.0)}


# -- which count of bits a table or figure shows (run.json's bits_count) ----------------------------------------
BITS_COUNTS = {
    "links": "Mbit a worker put on its links",
    "broadcast": "Mbit a worker transmitted (broadcast medium: one transmission per gossip message)",
    "message": "Mbit per worker, one per message whatever the degree (runs recorded before the per-link count)",
}


BITS_SHORT = {"links": "on links", "broadcast": "transmitted, broadcast medium", "message": "per message"}


def bits_counts(frame) -> list[str]:
    """The ``bits_count`` values of a table of runs or points (``links`` where the column is absent)."""
    if frame is None or "bits_count" not in frame:
        return ["links"]
    return sorted({str(c) for c in frame["bits_count"].dropna()}) or ["links"]


def bits_short(counts=("links",)) -> str:
    """A table header's note of the count: ``on links``, or the mix."""
    found = sorted(set(counts)) or ["links"]
    return " + ".join(BITS_SHORT.get(c, c) for c in found) + (" (MIXED)" if len(found) > 1 else "")


def bits_label(counts=("links",), unit: str = UNITS["bits"][0]) -> str:
    """What the bits axis of runs with these ``bits_count`` values shows; a mix is named as one."""
    found = sorted({str(c) for c in counts if isinstance(c, str)}) or ["links"]
    if len(found) > 1:
        return f"{unit} per worker (MIXED counts: {', '.join(found)}; compare within one count only)"
    text = BITS_COUNTS.get(found[0], f"{unit} per worker ({found[0]})")
    return text.replace("Mbit", unit, 1)
