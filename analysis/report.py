"""``python -m analysis report DIR``: DIR/report.md with what was run, Table 1, the per-cell
table, epoch gaps, spectral-gap fits, consensus distance against the gap to centralized, the
non-i.i.d. comparison, and every figure of DIR/figures/index.json."""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from analysis.argparsing import Parser
from analysis.display import as_percent
from analysis.busy import report_note as busy_report_note
from analysis.errors import UsageError
from analysis.figures.index import read_index
from analysis.files import write_text_atomically
from analysis import labels
from analysis.labels import compressor_label, method_label
from analysis.lag import lag_section
from analysis.lag import write_tables as write_lag_tables
from analysis.load import load_runs
from analysis.noniid import noniid_section
from analysis.noniid import write_table as write_noniid_table
from analysis.report_head import RANKING, compared, purpose, ranking, what_was_run
from analysis.report_html import inside, md_code, md_text, warn
from analysis.selection import REFERENCE, usable
from analysis.speedup import speedup_section, write_speedup_csv
from analysis.summary import load_tables
from analysis.tuning import tuning_markdown
from analysis.tables import (AVERAGED, LOCAL, cell_table_markdown, has_local, table1_algorithms,
                             table1_latex, table1_markdown)



def table1_selection(summary: pd.DataFrame) -> tuple[pd.DataFrame, str] | None:
    """Table 1 at the most-run (task, topology, n) of DCD/ECD/Choco, if it has >= 2 compressors or
    >= 2 of those algorithms; all-reduce and D-PSGD at the same task and n are the reference lines."""
    data = usable(summary)
    compressed = data[data["algorithm"].isin(table1_algorithms(data)[0])]
    if compressed.empty:
        return None
    # one network preset and data scheme: runs that differ only there are the same training, not more seeds
    keys = ["task", "topology", "nodes", "network", "data"]
    task, topology, nodes, network, scheme = compressed.groupby(keys).size().idxmax()
    sel = compressed[(compressed["task"] == task) & (compressed["topology"] == topology)
                     & (compressed["nodes"] == nodes) & (compressed["network"] == network)
                     & (compressed["data"] == scheme)]
    if sel["compressor"].nunique() < 2 and sel["algorithm"].nunique() < 2:
        return None
    refs = data[data["algorithm"].isin([REFERENCE, "dpsgd"]) & (data["task"] == task) & (data["nodes"] == nodes)
                & (data["network"] == network) & (data["data"] == scheme)]
    return pd.concat([sel, refs]), (
        f"on {md_text(task)}, {md_text(topology)}, n = {nodes} ({md_text(scheme)} data, {md_text(network)}): "
        "mean ± standard deviation over seeds; \"diverges\" when every seed diverged, \"x (k of m diverged)\" "
        "gives the mean of the seeds that did not.")


def table1_metrics(frame: pd.DataFrame) -> list[str]:
    """The paper's metric first when the runs scored every local model, then the averaged model."""
    return [LOCAL, AVERAGED] if has_local(frame) else [AVERAGED]


def table1_section(summary: pd.DataFrame) -> str | None:
    picked = table1_selection(summary)
    if picked is None:
        return None
    frame, where = picked
    parts = []
    for value in table1_metrics(frame):
        if value == LOCAL:
            caption = ("**Local models (the paper's metric).** Final test accuracy (%) of each worker's own model on "
                       "the whole test set, averaged over the n workers, " + where + " \"workers ± s\" is the "
                       "standard deviation over workers, averaged over seeds. LaTeX: [table1.tex](table1.tex).")
        else:
            caption = ("**Averaged model.** Final test accuracy (%) of x̄, the mean of the workers' models, " + where
                       + ("" if has_local(frame) else " LaTeX: [table1.tex](table1.tex).")
                       + ("" if has_local(frame) else " These runs did not score every local model at the end, "
                          "so the paper's metric is not available."))
        parts.append(caption + "\n\n" + table1_markdown(frame, value))
    return "\n".join(parts)


def write_table1_latex(summary: pd.DataFrame, run_dir: Path) -> Path | None:
    picked = table1_selection(summary)
    if picked is None:
        return None
    return write_text_atomically(run_dir / "table1.tex", table1_latex(picked[0], table1_metrics(picked[0])[0]))


def epoch_gap_section(summary: pd.DataFrame) -> str | None:
    from analysis.summary import epoch_gap

    if "epochs_to_target" not in summary:
        return None
    gaps = epoch_gap(summary)
    gaps = gaps[gaps["gap_status"] != "no_reference"]
    if gaps.empty:
        return None
    gaps.insert(0, "method", [method_label(a, c) for a, c in zip(gaps["algorithm"], gaps["compressor"].astype(str))])
    gaps[["method", "task", "topology"]] = gaps[["method", "task", "topology"]].map(md_text)
    gaps["target"] = [f"{t:.3g} %" + (" (this n)" if rule == "setting" else "")
                      for t, rule in zip(as_percent(gaps["target"]), gaps["target_rule"])]
    shown = gaps[["method", "task", "topology", "nodes", "target", "n_seeds", "epochs_to_target",
                  "allreduce_epochs_to_target", "epoch_ratio", "epoch_difference", "gap_status"]].rename(columns={
                      "nodes": "n", "n_seeds": "seeds", "epochs_to_target": "epochs (median)",
                      "allreduce_epochs_to_target": "all-reduce epochs", "epoch_ratio": "ratio",
                      "epoch_difference": "difference", "gap_status": "status"})
    per_n = sorted({int(n) for n in gaps.loc[gaps["target_rule"] == "setting", "nodes"]})
    rule = str(summary["target_source"].iloc[0]).split(" x best")[0] if "target_source" in summary else ""
    which = ("Target: the study's, except at n = " + ", ".join(map(str, per_n)) + f", where all-reduce never reaches "
             f"it: there {rule} x all-reduce's best at that n, marked *this n*. " if per_n else "Target: the study's. ")
    return ("Epochs each decentralized method needs to reach the target, against all-reduce SGD at the same "
            "task and n (medians over seeds; inf = the median seed never reached it). " + which + "\n\n"
            + shown.to_markdown(index=False, floatfmt=".3g") + "\n")


def slope_text(fit: dict) -> str:
    """A fitted slope with its interval; a line through two points has none (never "[-inf, inf]")."""
    finite = math.isfinite(fit["ci_low"] - fit["ci_high"])
    return f"{fit['slope']:.2f} " + (f"[{fit['ci_low']:.2f}, {fit['ci_high']:.2f}]" if finite
                                     else f"(interval not estimable from {fit['n']} points)")


def spectral_section(summary: pd.DataFrame) -> str | None:
    """Power-law fits of the accuracy gap and the consensus distance against ρ, per task and
    method, over all its runs (ρ varies with the topology and with n)."""
    from analysis.summary import spectral_fit

    data = usable(summary)
    data = data[(data["algorithm"] != REFERENCE) & (data["status"] != "diverged")]
    rows = []
    # one fit per data partition: a non-i.i.d. variant is a different problem, not more points
    for (task, scheme, algorithm, compressor), g in data.groupby(["task", "data", "algorithm", "compressor"],
                                                                 dropna=False):
        if g["spectral_gap"].nunique() < 2:
            continue
        for y, label in (("final_gap", "accuracy gap to all-reduce"),
                         ("final_consensus_distance", "consensus distance")):
            if y not in g:
                continue
            # the slope of the method's own bound, as its runs say (Choco's 1/(ρ⁴δ²): −4)
            theory = labels.consensus_slope(algorithm) if y == "final_consensus_distance" else None
            try:
                fit = spectral_fit(g, y=y, reference_slope=theory)
            except ValueError as err:
                rows.append({"task": md_text(task), "data": md_text(scheme),
                             "method": md_text(method_label(algorithm, compressor)),
                             "quantity": label, "slope [95% CI]": f"no fit: {md_text(err)}"})
                continue
            rows.append({"task": md_text(task), "data": md_text(scheme),
                         "method": md_text(method_label(algorithm, compressor)), "quantity": label,
                         "slope [95% CI]": slope_text(fit),
                         "R²": f"{fit['r2']:.2f}", "runs": fit["n"], "dropped": fit["n_dropped"],
                         "theory": "—" if theory is None else f"{theory:g} (bound)"})
    if not rows:
        return None
    return ("Least-squares fit of log(quantity) = a + b·log ρ over the runs of each method (diverged runs "
            "excluded; a gap ≤ 0 cannot be on a log scale and is dropped). Choco-SGD's bound on the consensus "
            "distance scales as ρ⁻⁴ at fixed δ, so its slope should be no steeper than −4.\n\n"
            + pd.DataFrame(rows).fillna("").to_markdown(index=False) + "\n")


def _caption_text(caption) -> str:
    """A figure's caption as it reads: one paragraph, no HTML (its names stay text in any renderer)."""
    return " ".join(str(caption).split()).replace("&", "&amp;").replace("<", "&lt;")


def figures_section(run_dir: Path) -> str | None:
    """Each figure of figures/index.json with its caption; one whose picture lies outside ``run_dir``
    (a name that climbs out, a link to elsewhere) is refused with a note here and a warning on stderr."""
    index = read_index(run_dir / "figures")
    parts = []
    for name, caption in index.items():
        png, pdf = f"figures/{name}.png", f"figures/{name}.pdf"
        heading = f"### {md_text(name.replace('_', ' '))}\n\n"
        if inside(run_dir, png) is None:
            warn(f"report: figure {name!r} not shown: {png} lies outside {run_dir}")
            parts.append(heading + f"*(figure {md_code(name)} refused: {md_code(png)} lies outside the results "
                         "folder)*\n")
            continue
        alt = re.sub(r"([\\\[\]])", r"\\\1", " ".join(name.split()))
        link = f" ([PDF]({quote(pdf)}))" if inside(run_dir, pdf) is not None else ""
        parts.append(heading + f"![{alt}]({quote(png)})\n\n{_caption_text(caption)}{link}\n")
    return "\n".join(parts) if parts else None


def skipped_section(run_dir: Path, skipped: list[tuple[str, str]]) -> str | None:
    """The run directories left out of every table and figure, each with the reason."""
    if not skipped:
        return None

    def shown(path: str) -> str:
        try:
            return str(Path(path).relative_to(run_dir))
        except ValueError:
            return path

    lines = [f"- {md_code(shown(path))}: {md_text(reason)}" for path, reason in sorted(skipped)]
    return (f"{len(skipped)} run director{'y was' if len(skipped) == 1 else 'ies were'} left out of every table "
            "and figure (fix or remove them and run the analysis again):\n\n" + "\n".join(lines) + "\n")


def claims_section(summary: pd.DataFrame, traces, run_dir: Path) -> str:
    """The claims' table, each measurement and reason as Markdown text (they name cells); a comparison shows only
    the claims whose cells it holds (the rest test other studies, not the method compared)."""
    from analysis.claims import INCOMPLETE, check_claims, claims_markdown

    table = check_claims(summary, traces)
    table = table.assign(measured=table["measured"].map(md_text), reason=table["reason"].map(md_text))
    if compared(run_dir) is not None:
        table = table[table["verdict"] != INCOMPLETE]
        if table.empty:
            return None
    return claims_markdown(table)


def report_title(run_dir: Path) -> str:
    return "your method against the baselines" if compared(run_dir) is not None else "Choco-SGD reproduction report"


def build_report(run_dir: Path, tables=None, skipped: list[tuple[str, str]] | None = None) -> str:
    """report.md's text; ``tables`` as load_tables gives them and ``skipped`` as Runs.skipped, read
    from ``run_dir`` when not given."""
    points, summary, note = tables if tables is not None else load_tables(run_dir)
    skipped = load_runs(run_dir).skipped if skipped is None else skipped
    out = [f"# {md_text(run_dir.resolve().name)}: {report_title(run_dir)}\n", purpose(run_dir) + "\n"]
    if summary is None or summary.empty:
        out.append(f"No training runs to summarize ({note or 'no summary.csv'}).\n")
    else:
        out.append("## What was run\n\n" + what_was_run(summary) + "\n")
    skipped_text = skipped_section(run_dir, skipped)
    if skipped_text:
        out.append("## Skipped runs\n\n" + skipped_text)
    if summary is not None and not summary.empty:
        from analysis.claims import read_traces

        traces = read_traces(run_dir)
        sections = [("Your method against the baselines", lambda s: ranking(s, run_dir)),
                    ("Table 1: accuracy by compressor and algorithm", table1_section),
                    ("The paper's claims", lambda s: claims_section(s, traces, run_dir)),
                    ("Per cell", lambda s: "Final accuracy as in Table 1; time (modelled), epochs and Mbit a worker put on "
                     "its links (a copy per link) to the target as median over seeds with reached/seeds, or why the median seed missed it.\n\n"
                     + busy_report_note(s) + cell_table_markdown(s)),
                    ("Epoch gap to centralized training", epoch_gap_section),
                    ("Spectral-gap effects", spectral_section),
                    ("Why decentralized training lags: consensus distance against the gap",
                     lambda s: lag_section(points, s)),
                    ("Non-i.i.d. data", noniid_section)]
        for title, make in sections:
            text = make(summary)
            if text:
                out.append(f"## {title}\n\n{text}")
        speedup = speedup_section(points)
        if speedup:
            out.append(f"## Linear speed-up\n\n{speedup}")
    tuning = tuning_markdown(run_dir)
    if tuning:
        out.append("## Tuning\n\n" + tuning)
    figures = figures_section(run_dir)
    out.append("## Figures\n\n" + (figures or "No figures yet (`python -m analysis figures DIR` draws them).\n"))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m analysis report",
               description="Write DIR/report.md and DIR/report.html (the same, one self-contained page).")
    p.add_argument("dir", type=Path, help="a study's results directory")
    try:
        args = p.parse_args(argv)
    except UsageError as err:  # one line, not argparse's usage and the error
        print(f"analysis report: error: {err}", file=sys.stderr)
        return 2
    if not args.dir.is_dir():
        print(f"error: results directory not found: {args.dir}", file=sys.stderr)
        return 2
    points, summary, note, skipped = load_tables(args.dir, with_skipped=True)  # every run read once
    text = build_report(args.dir, (points, summary, note), skipped)
    if summary is not None and not summary.empty:
        written = [write_table1_latex(summary, args.dir), *write_lag_tables(args.dir, points, summary),
                   write_noniid_table(args.dir, summary), write_speedup_csv(points, args.dir)]
        for path in written:
            if path is not None:
                print(f"wrote {path}")
    ranked = ranking(summary, args.dir) if summary is not None and not summary.empty else None
    if ranked:  # `bench compare` prints it on the terminal
        print(f"wrote {write_text_atomically(args.dir / RANKING, ranked)}")
    print(f"wrote {write_text_atomically(args.dir / 'report.md', text)}")
    from analysis.report_html import render

    page = render(text, args.dir, f"{args.dir.resolve().name}: {report_title(args.dir)}")
    print(f"wrote {write_text_atomically(args.dir / 'report.html', page)}")  # self-contained: figures inlined
    return 0

