"""What a figure is: a draw function marked ``@figure(question, order=...)``, registered under its module's name,
and the look every figure shares. Figure modules import this; it imports none of them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from analysis.selection import usable

if TYPE_CHECKING:
    from analysis.figures.requirements import Grid


def trains(grid: Grid) -> str | None:
    """What a figure needs when it declares nothing more: training runs (a block of cells)."""
    return None if len(usable(grid.cells)) else "needs training runs (a block of cells)"


@dataclass(frozen=True)
class Figure:
    name: str  # its module's name, of figures/NAME.png and of `--only NAME`
    question: str  # the report groups figures by it: "3. How do ...?"
    order: int  # its place among the figures: drawn, listed and offered in this order
    draw_function: Callable  # the module's draw(run_dir, points, summary, out_stem)
    # what it needs of a study's cells, checked when the DAG is built and again on the runs: None or the reason
    needs: Callable[[Grid], str | None] = trains
    reads_runs: bool = True  # False: drawn from other files, so a note about the runs is no reason
    # what its error bars, bands or shading are, in words every caption it writes contains (a reader is told whether
    # a bar is a std, the seeds' range or a 95 % interval); () where it draws none
    intervals: tuple[str, ...] = ()

    def draw(self, run_dir: Path, points, summary, out_stem: Path):
        """(paths, caption) of the figure drawn from these tables, or the reason it cannot be."""
        return self.draw_function(run_dir, points, summary, out_stem)


_REGISTERED: dict[str, Figure] = {}


def figure(question: str, *, order: int, needs: Callable[[Grid], str | None] = trains, reads_runs: bool = True,
           intervals: tuple[str, ...] = ()):
    """Registers the draw function it marks as the figure of its module's name (one figure per module)."""
    def register(draw: Callable) -> Callable:
        module = draw.__module__
        name = module.rpartition(".")[2]
        if not isinstance(question, str) or not isinstance(order, int) or isinstance(order, bool):
            raise TypeError(f"{module}: a figure declares its question as a string and its order as a whole "
                            f"number (found {question!r}, {order!r})")
        if name in _REGISTERED:
            raise TypeError(f"{module}: a second figure named {name!r} (one figure per module)")
        _REGISTERED[name] = Figure(name, question, order, draw, needs, reads_runs, tuple(intervals))
        return draw
    return register


def catalog() -> dict[str, Figure]:
    """Every registered figure by name, in their order (then by name); complete once analysis.figures is
    imported, which imports every module of the package."""
    return {f.name: f for f in sorted(_REGISTERED.values(), key=lambda f: (f.order, f.name))}


def paper_theme() -> None:
    """Seaborn's paper look on a white grid, set before a figure is drawn. Seaborn (and the SciPy it loads)
    is imported here, when drawing, not with the modules: the DAG build imports every figure for its catalog."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)


def palette(name: str, count: int) -> list:
    """``count`` colours of the colour map ``name`` as seaborn spaces them (imported when drawing, as above)."""
    import seaborn as sns

    return sns.color_palette(name, count)


def plain_log_ticks(axis) -> None:
    """Label a log axis that spans less than three decades at 1, 2 and 5 of each decade in plain numbers (2, 5,
    10 s): at powers of ten alone it shows one or two labels (10¹ and 10² beside points at 2-5 s)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    low, high = sorted(axis.get_view_interval())
    if low > 0 and high / low < 1e3:
        subs = (1.0, 2.0, 5.0) if high / low > 10 else (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)  # within a decade: more
        axis.set_major_locator(LogLocator(base=10, subs=subs))
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(NullFormatter())
