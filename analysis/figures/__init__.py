"""The paper's figures, one module each. A figure is a module of this package whose draw function is marked

    @figure("3. How do the graph and n set the gap to all-reduce?", order=20, needs=needs)
    def draw(run_dir, points, summary, out_stem): ...

(base.py): the question groups the figures in the report, the order places it among them, and ``needs``
(optional, a function of the module) says what it needs of a study's cells (requirements.py). ``draw``
returns (paths, caption) or the reason it cannot be drawn from these runs. Its name is its module's.

Importing this package imports every module of it, and a figure module registers itself as it is imported:
adding a figure is adding its module, and nothing else lists the figures. The other modules (base,
requirements, index, command, faults_panels) register none. ``python -m analysis figures``: command.py.
"""
from __future__ import annotations

import importlib
import pkgutil

from analysis.figures.base import Figure, catalog, figure

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")  # a figure module registers itself (@figure)

CATALOG: dict[str, Figure] = catalog()
FIGURES = list(CATALOG)  # names, in order (Snakemake's figure rule and the study schema's check take them)
QUESTIONS = {name: f.question for name, f in CATALOG.items()}  # `snakemake --report`'s categories

__all__ = ["CATALOG", "FIGURES", "Figure", "QUESTIONS", "figure"]
