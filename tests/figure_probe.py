"""Helpers of the figure tests: a figure module's figures kept instead of saved, and a line's look beside the
look analysis.labels gives a method."""
from matplotlib.colors import to_rgba

from analysis import labels


def kept_figures(monkeypatch, module) -> list:
    """The figures ``module`` draws from now on, kept in this list instead of written."""
    kept = []
    monkeypatch.setattr(module, "save_figure", lambda fig, out_stem: kept.append(fig) or [])
    return kept


def line_look(line) -> tuple:
    return to_rgba(line.get_color()), line.get_marker(), line.get_linestyle()


def method_look(method: str) -> tuple:
    look = labels.style(method)
    return to_rgba(look["color"]), look["marker"], look["linestyle"]
