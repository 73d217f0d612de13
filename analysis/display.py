"""How numbers and pictures leave the analysis: accuracies in %, and figures saved whole (PNG and PDF).
Shared by the figures and the tables; it imports neither."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.files import write_atomically


def as_percent(values) -> pd.Series:
    """Accuracies in %: runs record fractions in [0, 1]; a column already in % is left alone."""
    s = pd.to_numeric(pd.Series(values), errors="coerce").astype(float)
    return s * 100.0 if s.notna().any() and s.max() <= 1.0 + 1e-9 else s


def save_figure(fig, out_stem: Path) -> list[Path]:
    """``fig`` as OUT_STEM.png and OUT_STEM.pdf, then closed; the written paths."""
    import matplotlib.pyplot as plt  # here: the tables that import this module draw nothing

    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [out_stem.with_suffix(".png"), out_stem.with_suffix(".pdf")]
    for path in paths:
        # complete or absent: a pipeline job killed mid-save leaves no half-written figure
        write_atomically(path, lambda tmp, fmt=path.suffix[1:]: fig.savefig(tmp, dpi=150, format=fmt,
                                                                            bbox_inches="tight"))
    plt.close(fig)
    return paths
