"""Modelled time to reach the target accuracy, per method and network preset (grouped bars,
unreached targets shown, not dropped)."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from analysis.figures import as_percent, iid_only, one_cell_per, save_figure, select_setting, usable  # noqa: E402
from analysis.labels import colours, method_sort_key, with_methods  # noqa: E402

AXIS_LABELS = {"time_to_target_s": "modelled time to target (s)", "epochs_to_target": "epochs to target",
               "bits_to_target": "bits sent per worker to target"}


def bar_table(summary: pd.DataFrame, value: str = "time_to_target_s") -> pd.DataFrame:
    """One row per (network, method): median over seeds (unreached seeds count as +inf, so the
    median is finite only when most seeds reached), min/max of reached seeds, and status counts."""
    data = with_methods(usable(summary))
    rows = []
    for (network, method), g in data.groupby([data["network"].fillna("default"), "method"]):
        v = pd.to_numeric(g[value], errors="coerce").fillna(math.inf).to_numpy(float).copy()
        reached = g["tta_status"].eq("reached").to_numpy()
        v[~reached] = math.inf
        unreached = g.loc[~reached, "tta_status"].value_counts()
        rows.append({"network": network, "method": method, "median": float(np.median(v)),
                     "low": v[reached].min() if reached.any() else math.nan,
                     "high": v[reached].max() if reached.any() else math.nan,
                     "reached": int(reached.sum()), "seeds": len(g),
                     "status": ", ".join(f"{n} {s}" for s, n in unreached.items()) or "reached"})
    return pd.DataFrame(rows)


def plot_time_to_accuracy(summary: pd.DataFrame, out_stem: Path, *, value: str = "time_to_target_s",
                          title: str | None = None) -> list[Path]:
    """``summary``: one row per run (algorithm, compressor, network, status, tta_status, ``value``).
    Bars: median over seeds, whiskers min–max of the seeds that reached; a method whose median
    did not reach is a hatched bar to the top, labelled with why (diverged / censored)."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)
    table = bar_table(summary, value)
    networks = sorted(table["network"].unique())
    methods = sorted(table["method"].unique(), key=method_sort_key)
    colors = colours(methods)
    finite = table.loc[np.isfinite(table["median"]), ["median", "high"]].to_numpy(float)
    finite = finite[np.isfinite(finite)]
    floor, ceiling = (finite.min() / 3, finite.max() * 3) if finite.size else (0.1, 1.0)
    widest = table.groupby("network").size().max()
    fig, ax = plt.subplots(figsize=(max(6.5, 1.2 + len(networks) * widest * 0.55), 4.6))
    for i, network in enumerate(networks):
        # each preset's group holds only the methods run there, so a preset with few is not full of gaps
        group = table[table["network"] == network]
        group = group.iloc[sorted(range(len(group)), key=lambda k: method_sort_key(group["method"].iloc[k]))]
        width = 0.8 / widest
        for j, (_, r) in enumerate(group.iterrows()):
            method = r["method"]
            x = i - width * len(group) / 2 + width * (j + 0.5)
            if np.isfinite(r["median"]):
                ax.bar(x, r["median"], width, color=colors[method])
                if r["reached"] > 1:
                    ax.plot([x, x], [r["low"], r["high"]], color="black", linewidth=1.2)
                text = f"{r['reached']}/{r['seeds']}" if r["reached"] < r["seeds"] else ""
                y = r["high"] if np.isfinite(r["high"]) else r["median"]
            else:
                # no value to plot, so the bar shows the ceiling and says why the target was missed
                ax.bar(x, ceiling, width, color="white", edgecolor=colors[method], hatch="//", linewidth=1.5)
                text, y = f"{r['status']} of {r['seeds']}", floor * 1.3
            if text:
                ax.text(x, y * 1.15 if np.isfinite(r["median"]) else y, text, ha="center",
                        va="bottom", rotation=90, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(floor, ceiling * 1.6)
    ax.set_xticks(range(len(networks)))
    ax.set_xticklabels(networks)
    ax.set_xlabel("network preset (α–β model)")
    ax.set_ylabel(AXIS_LABELS.get(value, value) + ", log scale")
    handles = [Patch(color=colors[m], label=m) for m in methods]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="target not reached"))
    ax.legend(handles=handles, fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    ax.set_title(title or "Time to target accuracy per method and network")
    fig.tight_layout()
    return save_figure(fig, out_stem)


def draw(run_dir: Path, points, summary, out_stem: Path):
    """The most-run (task, topology, n) setting, every network preset, one cell per method and preset."""
    needed = {"time_to_target_s", "tta_status", "network"}
    if summary is None or summary.empty or not needed <= set(summary.columns):
        return f"no summary with {', '.join(sorted(needed))}"
    if not summary["tta_status"].isin(["reached", "diverged", "censored"]).any():
        return "no target accuracy set (summarize with --target-acc or --target-rel)"
    chosen = select_setting(iid_only(usable(summary)))
    if chosen is None:
        return "no finished runs"
    (task, topology, nodes), runs = chosen
    runs = one_cell_per(runs.assign(network=runs["network"].fillna("default")), ["network", "method"])
    target = pd.to_numeric(runs.get("target"), errors="coerce").dropna()
    metric = runs["metric"].iloc[0] if "metric" in runs else "test_acc"
    if not len(target):
        target_text = "the target"
    elif metric == "test_acc":
        target_text = f"{as_percent(target).iloc[0]:.4g}% test accuracy"
    else:
        target_text = f"{metric} {target.iloc[0]:.4g}"
    title = f"Modelled time to {target_text} ({task}, {topology}, n = {nodes})"
    paths = plot_time_to_accuracy(runs, out_stem, title=title)
    caption = (f"Time to reach {target_text} on {task} with n = {nodes} workers on a {topology}, under each "
               "network preset of the α–β cost model (latency α, bandwidth B; a round costs compute plus the "
               "slowest worker's communication). Bars: median over seeds, counting a seed that missed the "
               "target as infinite; whiskers: fastest and slowest seed that reached; k/m: seeds that reached. "
               "A hatched bar to the top means the median seed never reached the target, labelled with how many "
               "seeds diverged (loss NaN or above 10³) or were censored (the run ended first). Log scale. "
               "Compression pays off "
               "where bandwidth is scarce, so Choco's advantage should grow on the slower presets.")
    return paths, caption
