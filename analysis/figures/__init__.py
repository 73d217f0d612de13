"""The paper's figures, one module each, found by their modules: a figure is a module of this package that
declares, as plain literals at its top level,

    QUESTION = "3. How do the graph and n set the gap to all-reduce?"  # the report groups figures by it
    ORDER = 20  # its place among the figures: drawn, listed and offered in this order
    READS_RUNS = False  # optional (default True): drawn from other files, so a note about the runs is no reason

and defines ``draw(run_dir, points, summary, out_stem)`` returning (paths, caption), or the reason it cannot be
drawn from these runs. Its name is its module's. What it needs of a study's cells, when more than training
runs, is requirements.py's function of its name (marked ``@needs``). Nothing else lists the figures: FIGURES
and QUESTIONS below are read from the modules, and adding a figure is adding its module.

The declarations are read from each module's source, not by importing it: the pipeline reads this catalog
whenever it builds a study's DAG (workflow/rules/common.smk), and that loads no plotting library. The other
modules here (requirements, index, command) declare no QUESTION. ``python -m analysis figures``: command.py.
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path

DECLARED = ("QUESTION", "ORDER", "READS_RUNS")  # what a figure module says of itself, as literals


@dataclass(frozen=True)
class Figure:
    name: str  # its module's name, of figures/NAME.png and of `--only NAME`
    question: str  # the report's grouping
    order: int
    reads_runs: bool = True

    def draw(self, run_dir: Path, points, summary, out_stem: Path):
        """(paths, caption) of the figure drawn from these tables, or the reason it cannot be."""
        return importlib.import_module(f"{__name__}.{self.name}").draw(run_dir, points, summary, out_stem)


def declarations(path: Path) -> dict:
    """The DECLARED names a module's top level assigns, with their literal values."""
    values = {}
    for node in ast.parse(Path(path).read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        else:
            continue
        if isinstance(target, ast.Name) and target.id in DECLARED:
            try:
                values[target.id] = ast.literal_eval(node.value)
            except ValueError:  # a name or a call: the catalog is read without running the module
                raise TypeError(f"{path}: {target.id} must be a plain literal") from None
    return values


def discover(folder: Path = Path(__file__).parent) -> list[Figure]:
    """The figure modules of ``folder``, in their ORDER (then by name)."""
    found = []
    for module in pkgutil.iter_modules([str(folder)]):
        if module.ispkg:
            continue
        path = Path(folder) / f"{module.name}.py"
        declared = declarations(path)
        if "QUESTION" not in declared:
            continue  # a helper of the figures, not one
        question, order = declared["QUESTION"], declared.get("ORDER")
        if not isinstance(question, str) or not isinstance(order, int) or isinstance(order, bool):
            raise TypeError(f"{path}: a figure declares QUESTION as a string and ORDER as a whole number "
                            f"(found {question!r}, {order!r})")
        found.append(Figure(module.name, question, order, bool(declared.get("READS_RUNS", True))))
    return sorted(found, key=lambda f: (f.order, f.name))


CATALOG = {figure.name: figure for figure in discover()}
FIGURES = list(CATALOG)  # names, in order (Snakemake's figure rule and the study schema's check take them)
QUESTIONS = {name: figure.question for name, figure in CATALOG.items()}  # `snakemake --report`'s categories
