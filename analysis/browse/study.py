"""The results browser of one study or of every study of a results folder: each run's curves (accuracy, loss,
consensus distance against epochs, Mbit or modelled time), filtered and coloured by its settings, and the
table of cells with their intervals. Reads only the result files `python -m analysis summarize` writes."""
from __future__ import annotations

import html
import io
import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from matplotlib.colors import to_hex
from plotly.subplots import make_subplots

from analysis import labels
from analysis.browse import page
from analysis.errors import UsageError
from analysis.files import read_regular
from analysis.load import fault_columns
from analysis.summary import cell_summary, read_summary

# (key in an item, control's label, summary.csv column)
DIMENSIONS = [("study", "study", None), ("task", "task", "task"), ("method", "method", None),
              ("compressor", "compressor", "compressor"), ("topology", "topology", "topology"),
              ("n", "n (workers)", "nodes"), ("partition", "partition", "data"), ("network", "network", "network"),
              ("faults", "faults", None)]
X_AXES = {"epoch": "epoch", "Mbit": "Mbit sent per worker", "time_s": "modelled time (s)"}
# panel: (points column, title, scale, log y)
PANELS = [("test_acc", "test accuracy (%)", 100.0, False), ("test_loss", "test loss", 1.0, False),
          ("consensus_distance", "consensus distance", 1.0, True)]
INTERVAL = ("median over seeds [95 % percentile-bootstrap interval of the median]; one seed: its value; "
            "'not reached': the target was not reached within the run")

FIGURE_GLUE = """
function FIGURE_GLUE(item, t) {
  const g = document.getElementById('group-by').value, x = document.getElementById('x-axis').value;
  const group = String(item[g]);
  return {x: item.curves[x], group: group, colour: DATA.colours[g][group]};
}
function FIGURE_AXES() {
  const x = document.getElementById('x-axis'), g = document.getElementById('group-by');
  const title = x.options[x.selectedIndex].text, out = {'legend.title.text': g.options[g.selectedIndex].text};
  for (const axis of ['xaxis', 'xaxis2', 'xaxis3']) out[axis + '.title.text'] = title;
  return out;
}
"""


def find_studies(root: Path) -> list[Path]:
    """``root`` when it is a study (holds summary.csv), else its sub-folders that are."""
    if (root / "summary.csv").is_file():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "summary.csv").is_file())


def read_study(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(summary, points, cells) of a study folder; points empty without points.parquet, cells computed from the
    summary without cells.csv."""
    summary = read_summary(path / "summary.csv")
    points_file, cells_file = path / "points.parquet", path / "cells.csv"
    try:
        points = pd.read_parquet(io.BytesIO(read_regular(points_file))) if points_file.is_file() else pd.DataFrame()
        cells = pd.read_csv(io.BytesIO(read_regular(cells_file))) if cells_file.is_file() else cell_summary(summary)
    except (OSError, ValueError) as err:
        raise UsageError(f"{path}: unreadable points.parquet or cells.csv: {str(err).splitlines()[0]}") from None
    return summary, points, cells


def fault_setting(row) -> str:
    """The unreliable network of a run in a few words ("none": a perfect network)."""
    f = {k: row.get(k) for k in fault_columns({})}
    nan = lambda v: v is None or (isinstance(v, float) and math.isnan(v))  # noqa: E731
    parts = []
    if not nan(f["drop"]) and f["drop"] > 0:
        parts.append(f"drop {f['drop']:g}" + ("" if f["drop_model"] == "bernoulli" else f" {f['drop_model']}"))
    if not nan(f["outages"]) and f["outages"] > 0:
        parts.append(f"{int(f['outages'])} outages")
    if not nan(f["straggler_mean"]) and f["straggler_mean"] > 0:
        parts.append(f"straggler mean {f['straggler_mean']:g}")
    if not nan(f["straggler_factor"]):
        parts.append(f"straggler x{f['straggler_factor']:g}")
    if not nan(f["late"]) and f["late"] > 0:
        parts.append(f"late {f['late']:g}")
    if not nan(f["active"]) and f["active"] < 1:
        parts.append(f"active {f['active']:g}")
    if not nan(f["absences"]) and f["absences"] > 0:
        parts.append(f"{int(f['absences'])} absences")
    if f["pairwise"] is True or f["pairwise"] == "True":
        parts.append("pairwise")
    return ", ".join(parts) or "none"


def _method(row, methods: dict) -> str:
    """The method label points.parquet wrote (display names from the runs' run.json), else the registry's."""
    return methods.get(row["run_id"]) or labels.method_label(row["algorithm"], str(row["compressor"]))


def _curve(points: pd.DataFrame, column: str, scale: float = 1.0, log: bool = False) -> list:
    """The column's values, None where not finite (or not positive, for a log axis: a gap, not a plunge)."""
    if column not in points:
        return [None] * len(points)
    return [float(v) * scale if v is not None and math.isfinite(float(v)) and (float(v) > 0 or not log) else None
            for v in points[column]]


def items_of(study: str, summary: pd.DataFrame, points: pd.DataFrame) -> list[dict]:
    """One item per run: its dimensions, identity, final numbers and curves."""
    methods = (points.groupby("run_id")["method"].first().to_dict()
               if {"run_id", "method"} <= set(points.columns) else {})
    by_run = dict(iter(points.sort_values("step").groupby("run_id"))) if "run_id" in points else {}
    items = []
    for row in summary.to_dict("records"):
        mine = by_run.get(row["run_id"], pd.DataFrame())
        dims = {"study": study, "method": _method(row, methods), "faults": fault_setting(row),
                **{key: str(row[col]) for key, _, col in DIMENSIONS if col}}
        items.append({**dims, "run_id": row["run_id"], "cell": row["cell"], "seed": int(row["seed"]),
                      "status": row["status"], "algorithm": row["algorithm"],
                      "final_test_acc": page.clean(row["final_test_acc"]), "tta_status": page.clean(row["tta_status"]),
                      "curves": {"epoch": _curve(mine, "epoch"), "Mbit": _curve(mine, "bits_per_worker", 1e-6),
                                 "time_s": _curve(mine, "time_s"),
                                 **{c: _curve(mine, c, s, log) for c, _, s, log in PANELS}}})
    return items


def colours(items: list[dict]) -> dict:
    """dimension -> value -> colour: a method keeps the figures' colour (labels.style), other values take a
    qualitative palette in their sorted order."""
    out = {}
    for key, _, _ in DIMENSIONS:
        values = page.sort_values(i[key] for i in items)
        out[key] = {v: page.PALETTE[j % len(page.PALETTE)] for j, v in enumerate(values)}
    for item in items:  # the display name points.parquet holds, so method_label gives the same label
        labels.learn(item["algorithm"], {"label": item["method"].split(" (")[0]})
        labels.method_label(item["algorithm"], item["compressor"])
    out["method"] = {m: to_hex(labels.style(m)["color"]) for m in out["method"]}
    return out


def figure(items: list[dict], colour: dict) -> go.Figure:
    fig = make_subplots(rows=1, cols=len(PANELS), subplot_titles=[t for _, t, _, _ in PANELS],
                        horizontal_spacing=0.06)
    for j, item in enumerate(items):
        for k, (column, title, _, _) in enumerate(PANELS, start=1):
            fig.add_trace(go.Scatter(x=item["curves"]["epoch"], y=item["curves"][column], mode="lines+markers",
                                     meta=j, name=item["method"], legendgroup=item["method"], showlegend=k == 1,
                                     line={"color": colour["method"][item["method"]], "width": 1.5},
                                     marker={"size": 4}, connectgaps=False,
                                     hovertemplate=f"{item['run_id']}<br>seed {item['seed']}, {item['status']}"
                                                   f"<br>%{{x:.4g}}, {title} %{{y:.4g}}<extra></extra>"),
                          row=1, col=k)
    for k, (_, _, _, log) in enumerate(PANELS, start=1):
        fig.update_xaxes(title_text=X_AXES["epoch"], row=1, col=k)
        if log:
            fig.update_yaxes(type="log", exponentformat="power", row=1, col=k)
    fig.update_layout(height=480, template="plotly_white", legend={"title": {"text": "method"}},
                      margin={"l": 50, "r": 20, "t": 40, "b": 50})
    return fig


def _interval(row, name: str, scale: float = 1.0, spec: str = ".3g") -> str:
    def one(v):
        v = float(v)
        return "–" if math.isnan(v) else "not reached" if math.isinf(v) else f"{v * scale + 0.0:{spec}}"
    median, low, high = (row.get(f"{name}_{part}", math.nan) for part in ("median", "ci_low", "ci_high"))
    if one(low) == one(median) == one(high):
        return one(median)
    return f"{one(median)} [{one(low)}, {one(high)}]"


TABLE_COLUMNS = ["study", "method", "topology", "n", "partition", "network", "faults", "seeds",
                 "final accuracy (%)", "gap to all-reduce (points)", "epochs to target", "Mbit to target",
                 "modelled s to target", "reached / censored / diverged"]


def table_rows(study: str, cells: pd.DataFrame, items: list[dict]) -> list[tuple[dict, list[str]]]:
    dims_of = {}
    for item in items:
        dims_of.setdefault(item["cell"], {key: item[key] for key, _, _ in DIMENSIONS})
    rows = []
    for row in cells.to_dict("records"):
        dims = dims_of.get(row["cell"])
        if dims is None:  # a cell without a run in the summary: nothing to filter it by
            continue
        rows.append((dims, [study, dims["method"], dims["topology"], dims["n"], dims["partition"], dims["network"],
                            dims["faults"], row["n_seeds"], _interval(row, "final_acc", 100.0, ".1f"),
                            _interval(row, "final_gap", 100.0, ".1f"), _interval(row, "epochs_to_target"),
                            _interval(row, "bits_to_target", 1e-6), _interval(row, "time_to_target_s"),
                            f"{row.get('n_reached', 0)} / {row.get('n_censored', 0)} / {row.get('n_diverged', 0)}"]))
    return rows


def build(root: Path) -> tuple[str, int]:
    """The page of the study at ``root`` (or of every study below it) and how many runs it holds."""
    studies = find_studies(root)
    if not studies:
        raise UsageError(f"no summary.csv in {root} or its sub-folders (run `python -m analysis summarize DIR` "
                         "first), and no bench track records there either")
    items, rows = [], []
    for path in studies:
        summary, points, cells = read_study(path)
        mine = items_of(path.name, summary, points)
        items += mine
        rows += table_rows(path.name, cells, mine)
    if not items:
        raise UsageError(f"no runs in the summary.csv of {', '.join(map(str, studies))}")
    dimensions = [{"key": k, "label": label, "values": page.sort_values(i[k] for i in items)}
                  for k, label, _ in DIMENSIONS]
    colour = colours(items)
    controls = (page.select("x-axis", "x axis", X_AXES, "epoch")
                + page.select("group-by", "colour by", {k: label for k, label, _ in DIMENSIONS}, "method")
                + page.filters(dimensions))
    title = f"Results browser: {studies[0].name if len(studies) == 1 else ', '.join(p.name for p in studies)}"
    intro = (f"<p>{len(items)} runs of {len(studies)} stud{'y' if len(studies) == 1 else 'ies'}, one line each "
             "(the averaged model's test accuracy and loss; the consensus distance between the workers' models). "
             "Untick a value to hide its runs and cells; a link may carry filters and choices: "
             "<code>#method=A,B&amp;topology=ring&amp;x-axis=Mbit&amp;group-by=n</code>. Click a legend entry to "
             "hide a group.</p>")
    cells_html = (f"<h2>Cells</h2><p class=\"note\">{html.escape(INTERVAL)}.</p>"
                  + page.table(TABLE_COLUMNS, rows))
    data = {"noun": "runs", "dimensions": dimensions, "colours": colour, "items": items}
    return page.render(title, intro, controls, figure(items, colour), data, cells_html, FIGURE_GLUE), len(items)
