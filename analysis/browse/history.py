"""The browser of a history (results/history: `bench track` records): every tracked quantity over the commits,
filtered by part, kind and unit, relative to its first commit or as measured; a click on a point (or the
commit select) lists every quantity at that commit beside the commit measured before it. Quantities are taken
by their keys, whatever they are; where a quantity was redefined (analysis/history/definitions.py: each
definition a series of its own, as `analysis history` compares them), the first commit of a new definition is
marked, not read as a change of the code measured."""
from __future__ import annotations

import html
import json
import math
import re
import statistics
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from analysis.browse import page
from analysis.errors import UsageError
from analysis.history.cli import default_out
from analysis.history.definitions import with_definitions
from analysis.history.figures import shown_unit
from analysis.history.order import order_points
from analysis.history.records import load_records, observations, record_row
from analysis.history.settings import split_by_settings

DIMENSIONS = [("part", "part"), ("kind", "kind"), ("unit", "unit")]
Y_AXES = {"relative": "relative to its first commit", "value": "as measured (its own unit)"}
COMMIT = re.compile(r"[0-9a-f]{40}")

FIGURE_GLUE = """
function FIGURE_GLUE(item, t) {
  const y = document.getElementById('y-axis').value;
  return {x: t.x, y: item.curves[y], group: item.quantity, colour: DATA.colours[item.quantity]};
}
function FIGURE_AXES() {
  const y = document.getElementById('y-axis');
  return {'yaxis.title.text': y.options[y.selectedIndex].text};
}
"""
# a click on a point chooses its commit in the drill-down (points carry their commit as customdata)
CLICK_GLUE = """
PLOT.on('plotly_click', e => { const s = document.getElementById('commit');
  if (e.points.length && e.points[0].customdata != null) { s.value = e.points[0].customdata; update(); } });
"""


def has_records(root: Path) -> bool:
    """Whether ``root`` holds records as `bench track` lays them out (<commit>/<time>.json), without reading them."""
    return any(COMMIT.fullmatch(p.parent.name) for p in root.rglob("*.json"))


def default_page(root: Path) -> Path:
    """Beside the history's report (never inside the committed results/history)."""
    return default_out(root) / "browser.html"


def _median(values) -> float | None:
    finite = [float(v) for v in values if math.isfinite(float(v))]
    return statistics.median(finite) if finite else None


def _definition(settings: str) -> str:
    """The definition a row's settings name (analysis.history.definitions adds it to a redefined quantity's)."""
    return next((str(v) for k, v in json.loads(settings) if k == "definition"), "")


def _redefinitions(table, points: list[str]) -> dict[str, dict[str, str]]:
    """quantity name -> the commits whose definition differs from the commit measured before, -> what was before.
    By the name, not the series: each definition is a series of its own (as `analysis history` compares them)."""
    out = {}
    for name, g in table.groupby("name"):
        at = g.groupby("point")["version"].first()
        ordered = [p for p in points if p in at.index]
        out[name] = {p: at[q] for q, p in zip(ordered, ordered[1:]) if at[p] != at[q]}
    return out


def _series(table, points: list[str]) -> list[dict]:
    """One item per quantity: its keys, the median at each commit measured, and its redefinitions."""
    items, redefinitions = [], _redefinitions(table, points)
    for quantity, g in table.groupby("quantity", sort=True):
        first = g.iloc[0]
        at = [p for p in points if p in set(g["point"])]
        unit, factor = shown_unit(first["unit"])  # %, Mbit and ms, as in every figure
        medians = [_median(g.loc[g["point"] == p, "value"] * factor) for p in at]
        base = next((m for m in medians if m), None)
        changed = redefinitions.get(first["name"], {})
        items.append({"quantity": quantity, "part": str(quantity).split(".")[0], "kind": str(first["kind"]),
                      "unit": unit or "(none)", "points": at,
                      "versions": [str(g.loc[g["point"] == p, "version"].iloc[0]) for p in at],
                      "redefined": {p: changed[p] for p in at if p in changed},
                      "curves": {"value": medians,
                                 "relative": [m / base if m is not None and base else None for m in medians]}})
    return items


def _figure(items: list[dict], points: list[str], info: dict, colour: dict) -> go.Figure:
    fig = go.Figure()
    where = {p: i for i, p in enumerate(points)}
    for j, item in enumerate(items):
        x = [where[p] for p in item["points"]]
        symbols = ["diamond-open" if p in item["redefined"] else "circle" for p in item["points"]]
        fig.add_trace(go.Scatter(x=x, y=item["curves"]["relative"], mode="lines+markers", meta=j,
                                 name=item["quantity"], legendgroup=item["quantity"], customdata=item["points"],
                                 line={"color": colour[item["quantity"]], "width": 1.2},
                                 marker={"symbol": symbols, "size": [11 if s != "circle" else 5 for s in symbols]},
                                 hovertemplate=f"{item['quantity']}<br>%{{customdata}}: %{{y:.4g}}<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(points))),
                     ticktext=[info[p]["describe"][:24] for p in points], tickangle=-45, title_text="commit")
    fig.update_layout(height=560, template="plotly_white", showlegend=False, yaxis_title=Y_AXES["relative"],
                      margin={"l": 60, "r": 20, "t": 30, "b": 120})
    return fig


def _rows(items: list[dict], info: dict) -> list[tuple[dict, list[str]]]:
    """Every quantity at every commit it was measured at, with the change from the commit measured before."""
    rows = []
    for item in items:
        values = item["curves"]["value"]
        for i, point in enumerate(item["points"]):
            before = values[i - 1] if i else None
            now = values[i]
            change = (f"{(now - before) / abs(before):+.1%}" if now is not None and before else "–")
            mark = (f"redefined: definition {item['redefined'][point]} → {item['versions'][i]}"
                    if point in item["redefined"] else "")
            rows.append(({**{k: item[k] for k, _ in DIMENSIONS}, "commit": point},
                         [item["quantity"], item["kind"], item["unit"], "–" if now is None else f"{now:.4g}",
                          info[item["points"][i - 1]]["describe"] if i else "–", change, mark]))
    return rows


def build(root: Path, repo: str | None = None) -> tuple[str, int]:
    records, _ = load_records([root])
    if not records:
        raise UsageError(f"no usable bench track records (<machine>/<commit>/<time>.json) under {root}")
    table, _ = with_definitions(observations(records), repo)  # the notes are analysis history's to say
    table = split_by_settings(table.assign(version=[_definition(s) for s in table["settings"]]))
    every = pd.DataFrame([record_row(r) for r in records])
    ordered, _ = order_points(every, "graph", repo)
    points = [p for p in ordered if p in set(table["point"])]
    first = every.groupby("point").first()
    info = {p: {"describe": str(first.loc[p, "describe"]), "subject": str(first.loc[p, "subject"]),
                "date": str(first.loc[p, "commit_date"])} for p in points}
    items = _series(table, points)
    dimensions = [{"key": k, "label": label, "values": page.sort_values(i[k] for i in items)}
                  for k, label in DIMENSIONS]
    colour = {item["quantity"]: page.PALETTE[j % len(page.PALETTE)] for j, item in enumerate(items)}
    newest = points[-1]
    commits = {p: f"{info[p]['describe']} — {info[p]['subject'][:60]}" for p in reversed(points)}
    controls = (page.select("y-axis", "y axis", Y_AXES, "relative") + page.filters(dimensions)
                + "<br>" + page.select("commit", "commit (or click a point)", commits, newest, rows=True))
    marked = sum(len(i["redefined"]) for i in items)
    intro = (f"<p>{len(items)} quantities over {len(points)} commits ({html.escape(info[points[0]]['describe'])} .. "
             f"{html.escape(info[newest]['describe'])}): the median of each commit's repeats or seeds. "
             + f"{marked} points where a quantity's definition changed (a new series, not a change of the code "
             "measured) are drawn as open diamonds. "
             + "The table below lists every quantity at the chosen commit.</p>")
    data = {"noun": "quantities", "dimensions": dimensions, "colours": colour, "items": items, "commits": info}
    table_html = ("<h2>At one commit</h2>" + page.table(
        ["quantity", "kind", "unit", "median", "commit before", "change", "redefinition"], _rows(items, info)))
    text = page.render(f"History browser: {root}", intro, controls, _figure(items, points, info, colour), data,
                       table_html, FIGURE_GLUE + CLICK_GLUE)
    return text, len(items)
