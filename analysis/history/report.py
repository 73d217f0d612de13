"""The written and printed summaries of `python -m analysis history`: the noise line (the spread of the
perf figures without a change of code, beside the tolerance in force) and history.md (commits, steps, the
newest commit's verdicts, noise, figures)."""
from __future__ import annotations

import math

import pandas as pd

from analysis.report_html import md_text


def _noise_line(noise: pd.DataFrame, tolerances: dict) -> str:
    """The spread of the perf figures without a change of code, beside the tolerance in force."""
    parts = []
    for kind in ("ratio", "absolute"):
        rows = noise[noise["kind"] == kind]
        spread = rows["repeat_spread"].dropna()
        deviation = rows["record_deviation_p90"].dropna()
        if not len(spread) and not len(deviation):
            continue
        text = f"{kind} (tolerance {tolerances[kind][1]:.0%}):"
        if len(spread):
            text += (f" the repeats of a commit span {spread.median():.0%} of their median (median over {len(spread)} "
                     f"figures; 90th percentile {spread.quantile(0.9):.0%}, max {spread.max():.0%})")
        if len(deviation):
            text += (f"{',' if len(spread) else ''} one record's median strays from its segment's by "
                     f"{deviation.median():.0%} (90th percentile {deviation.quantile(0.9):.0%}, max "
                     f"{rows['record_deviation_max'].max():.0%})")
        parts.append(text)
    return "noise: " + ("; ".join(parts) if parts else "no repeated perf figures yet")


def _fmt(value, mode) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:+.1%}" if mode == "rel" else f"{value:+.4g}"


def _markdown(records, points, info, machines, series, steps, verdicts, newest, noise, tolerances, args, drawn,
              failures) -> str:
    """history.md. Every name, subject, label and error line a record holds is md_text, as the study's reports
    show names: a subject `<script>...` or a benchmark named `[x](javascript:...)` had reached it as markup."""
    info = {p: {"describe": md_text(i["describe"]), "subject": md_text(i["subject"][:70])} for p, i in info.items()}
    lines = ["# Tracking history", "",
             f"{len(records)} records of {len(points)} commits ({info[points[0]]['describe']} .. "
             f"{info[points[-1]]['describe']}) on {', '.join(map(md_text, machines))}; {len(series)} quantities. "
             "Steps: binary "
             f"segmentation, two-sided Mann-Whitney, Bonferroni over the splits of a segment, alpha {args.alpha:g}, "
             f"at least {args.min_side} commits a side. Tolerances: "
             + ", ".join(f"{k} {v:.0%}" if m == "rel" else f"{k} {v:g}" for k, (m, v) in tolerances.items()) + ".", "",
             "## Commits", "", "| # | commit | describe | subject |", "|---|---|---|---|"]
    lines += [f"| {i} | {p} | {info[p]['describe']} | {info[p]['subject']} |" for i, p in enumerate(points)]
    lines += ["", f"## Steps ({len(steps)})", ""]
    if len(steps):
        lines += ["| quantity | first commit | before | after | change | p (adjusted) | verdict |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {md_text(r.quantity)} | {r.first_commit} {md_text(r.describe)} | {r.before_median:.4g} | "
                  f"{r.after_median:.4g} | {_fmt(r.change, r.mode)} | {r.p_adj:.2g} | {r.verdict} |"
                  for r in steps.itertuples()]
    else:
        lines.append("None detected.")
    flagged = newest[newest["verdict"].isin(["regression", "unconfirmed", "improvement", "within noise",
                                             "continues an earlier change"])]
    lines += ["", f"## Newest commit ({info[points[-1]]['describe']})", "", md_text(verdicts) + ".", ""]
    if len(flagged):
        lines += ["| quantity | before | newest | change | test | records worse | verdict |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {md_text(r.quantity)} | {r.before_median:.4g} | {r.newest_median:.4g} | "
                  f"{_fmt(r.change, r.mode)} | {r.test} | {r.records_worse} | {r.verdict} |"
                  for r in flagged.itertuples()]
    if failures:
        lines += ["", f"**Failed** ({len(failures)}; exit status 1):", ""] + [f"- {md_text(line)}" for line in failures]
    lines += ["", "## Noise", "", _noise_line(noise, tolerances), "",
              "noise.csv: per quantity the median spread of a commit's values (repeats or seeds) and how far one "
              "record's median strays from its segment's median (90th percentile, maximum).", ""]
    if drawn:
        lines += ["## Figures", ""] + [f"- [{md_text(p.stem)}](figures/{p.name})" for p in drawn]  # name: _safe
    return "\n".join(lines) + "\n"
