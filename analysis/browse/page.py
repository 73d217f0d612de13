"""The browser's page: Plotly's figure (its plotly.js inlined, so the file opens from file:// with no server and
no network), the data it draws as one JSON block, the controls, a table, and the few lines of glue that let
the controls restyle the figure (Plotly.restyle) and hide table rows. Shared by the study and history pages."""
from __future__ import annotations

import html
import json
import math

import plotly.graph_objects as go
from plotly.colors import qualitative

from analysis.report_html import STYLE

PALETTE = qualitative.D3 + qualitative.Dark24  # values without a colour of their own (a method has one)
EXTRA_STYLE = """
body { max-width: 1500px; }
fieldset { display: inline-block; vertical-align: top; margin: .2em .4em .2em 0; padding: .2em .6em;
           border: 1px solid #d0d0d0; max-height: 12em; overflow-y: auto; font-size: .85em; }
fieldset label { display: block; white-space: nowrap; }
.controls select { font-size: .9em; margin-right: 1em; }
#shown { font-weight: 600; }
.note { color: #555; font-size: .9em; }
tr[hidden] { display: none; }
"""

# Filters (checkboxes with data-dim), group and axis selects change what the figure draws. The figure's traces
# each carry meta = the index of their item in DATA.items; the page's own script (FIGURE_GLUE, after this one:
# functions, and statements that may use PLOT and update) says what a trace looks like for the chosen group
# and axes. A link may carry a filter: #method=A,B&topology=ring.
GLUE = """
const DATA = JSON.parse(document.getElementById('browser-data').textContent);
const PLOT = document.getElementById('browser-plot');
function kept() {
  const out = {};
  for (const d of DATA.dimensions)  // null: one value, no checkboxes, nothing to filter on
    out[d.key] = d.values.length < 2 ? null
      : new Set([...document.querySelectorAll(`input[data-dim="${d.key}"]:checked`)].map(e => e.value));
  return out;
}
function passes(item, keep) {
  return DATA.dimensions.every(d => keep[d.key] === null || keep[d.key].has(String(item[d.key]))); }
function rowPasses(item, keep) {  // a table row also matches each select that names a key of its row (a commit)
  return passes(item, keep) && [...document.querySelectorAll('select[data-row-key]')].every(
    s => String(item[s.dataset.rowKey]) === s.value); }
function fromLink() {
  for (const part of decodeURIComponent(location.hash.slice(1)).split('&').filter(p => p.includes('='))) {
    const [key, values] = part.split('='), wanted = new Set(values.split(',')), choice = document.getElementById(key);
    if (choice && choice.tagName === 'SELECT') choice.value = values;  // #x-axis=Mbit&group-by=topology
    document.querySelectorAll(`input[data-dim="${key}"]`).forEach(e => { e.checked = wanted.has(e.value); });
  }
}
function update() {
  const keep = kept(), look = {visible: [], x: [], y: [], name: [], legendgroup: [], showlegend: [], 'line.color': []};
  const seen = new Set();
  let shown = new Set();
  for (const t of PLOT.data) {
    const item = DATA.items[t.meta], on = passes(item, keep), s = FIGURE_GLUE(item, t);
    look.visible.push(on); look.x.push(s.x); look.y.push(s.y || t.y); look.name.push(s.group);
    look.legendgroup.push(s.group); look['line.color'].push(s.colour); look.showlegend.push(on && !seen.has(s.group));
    if (on) { seen.add(s.group); shown.add(t.meta); }
  }
  Plotly.restyle(PLOT, look);
  if (typeof FIGURE_AXES === 'function') Plotly.relayout(PLOT, FIGURE_AXES());
  document.querySelectorAll('#browser-table tbody tr').forEach(tr => {
    tr.hidden = !rowPasses(JSON.parse(tr.dataset.item), keep); });
  document.getElementById('shown').textContent = `${shown.size} of ${DATA.items.length} ${DATA.noun} drawn`;
}
fromLink();
document.querySelectorAll('.browser-control').forEach(e => e.addEventListener('change', update));
update();
"""


def clean(value):
    """A value as JSON can hold it: NaN -> null, ±inf -> "inf"/"-inf" (a target never reached), numpy -> Python."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value


def as_json(data) -> str:
    """JSON safe inside <script>: "</" cannot close the block."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def sort_values(values) -> list:
    """Distinct values, numbers in numeric order (16 before 36 before 8 would read as a bug), then text."""
    def key(v):
        try:
            return (0, float(v), "")
        except (TypeError, ValueError):
            return (1, 0.0, str(v))
    return sorted({str(v) for v in values}, key=key)


def filters(dimensions: list[dict]) -> str:
    """A fieldset of checkboxes (all checked) per dimension with more than one value; a line for the rest."""
    boxes, fixed = [], []
    for d in dimensions:
        if len(d["values"]) == 1:
            fixed.append(f"{html.escape(d['label'])} {html.escape(d['values'][0])}")
            continue
        ticks = "".join(f'<label><input type="checkbox" class="browser-control" data-dim="{html.escape(d["key"])}" '
                        f'value="{html.escape(v)}" checked> {html.escape(v)}</label>' for v in d["values"])
        boxes.append(f'<fieldset id="filter-{html.escape(d["key"])}"><legend>{html.escape(d["label"])}</legend>'
                     f'{ticks}</fieldset>')
    same = f'<p class="note">The same everywhere: {"; ".join(fixed)}.</p>' if fixed else ""
    return f'<div class="filters">{"".join(boxes)}</div>{same}'


def select(key: str, label: str, options: dict[str, str], chosen: str, rows: bool = False) -> str:
    """A drop-down; ``rows``: it also keeps only the table rows whose item has the chosen value at ``key``."""
    items = "".join(f'<option value="{html.escape(k)}"{" selected" if k == chosen else ""}>{html.escape(v)}</option>'
                    for k, v in options.items())
    marked = f' data-row-key="{html.escape(key)}"' if rows else ""
    return (f'<label>{html.escape(label)} <select id="{html.escape(key)}" class="browser-control"{marked}>{items}'
            f'</select></label>')


def table(columns: list[str], rows: list[tuple[dict, list[str]]]) -> str:
    """An HTML table; each row carries its item's dimension values (data-item) so the filters hide it."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(f"<tr data-item=\"{html.escape(as_json(item))}\">"
                   + "".join(f"<td>{html.escape(str(v))}</td>" for v in cells) + "</tr>" for item, cells in rows)
    return f'<table id="browser-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def render(title: str, intro: str, controls: str, figure: go.Figure, data: dict, table_html: str,
           figure_glue: str) -> str:
    """The whole page. ``figure_glue`` defines FIGURE_GLUE(item, trace) -> {x, group, colour} (and may
    define FIGURE_AXES() -> a relayout) for the controls of this kind of page."""
    plot = figure.to_html(full_html=False, include_plotlyjs=True, div_id="browser-plot",
                          config={"displaylogo": False, "responsive": True})
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{html.escape(title)}"
            f"</title><style>{STYLE}{EXTRA_STYLE}</style></head>\n<body>\n<h1>{html.escape(title)}</h1>\n{intro}\n"
            f'<div class="controls">{controls}</div>\n<p id="shown"></p>\n{plot}\n{table_html}\n'
            f'<script type="application/json" id="browser-data">{as_json(data)}</script>\n'
            f"<script>{GLUE}\n{figure_glue}</script>\n</body></html>\n")
