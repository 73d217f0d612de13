"""How far apart two colours look: CIE L*a*b* (D65) of a matplotlib colour and the CIE76 difference ΔE, the
distance in L*a*b* (about 2 is just noticeable; analysis/labels.py keeps the methods of a figure 25 apart)."""
from __future__ import annotations

import functools
import math

from matplotlib.colors import to_rgb

_SRGB_TO_XYZ = [(0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505)]
_WHITE = (0.95047, 1.0, 1.08883)  # D65


@functools.lru_cache(maxsize=None)
def lab(colour) -> tuple[float, float, float]:
    """CIE L*a*b* (D65 white) of a matplotlib colour."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    xyz = [sum(m * c for m, c in zip(row, linear)) / white for row, white in zip(_SRGB_TO_XYZ, _WHITE)]
    f = [t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def colour_difference(a, b) -> float:
    """CIE76 ΔE of two colours, their distance in L*a*b*: about 2 is just noticeable."""
    return math.dist(lab(a), lab(b))
