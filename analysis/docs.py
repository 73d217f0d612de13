"""``python -m analysis docs [--check] [--from DIR ...]``: the tables and figures of README.md and docs/results.md
that a study measured, each between ``<!-- generated: NAME from FOLDER (python -m analysis docs) -->`` and
``<!-- end generated -->``, written again from the study's committed summaries (FOLDER, under
results/baselines/docs/) by the code that writes the study's report, so a doc cannot drift from its numbers.
``--check`` writes nothing and exits 1 naming each block whose text differs; ``--from DIR`` first copies a finished
study's small tables to results/baselines/docs/STUDY/ with stamp.json (the commit and dates of its runs).
Bad input is one line, exit status 2."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from analysis.argparsing import Parser
from analysis.errors import DamagedFile, UsageError
from analysis.files import read_regular, write_atomically, write_text_atomically

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/results.md")
BASELINES = "results/baselines/docs"
# a study's small tables (kilobytes each) that the blocks read: what --from copies
COPIED = ("summary.csv", "noniid.csv", "lag.csv", "lag_fits.csv", "consensus/summary.csv", "speedup.csv")
CLOSE = "<!-- end generated -->"
BLOCK = re.compile(r"<!-- generated: (?P<name>[\w-]+) from (?P<folder>\S+) \(python -m analysis docs\) -->\n"
                   r"(?P<text>.*?)<!-- end generated -->", re.S)


@dataclass(frozen=True)
class Block:
    study: str
    # (the study's committed folder, the folder figures are drawn to) -> the block's Markdown
    render: Callable[[Path, Path], str]


def _read(folder: Path, name: str) -> pd.DataFrame:
    path = folder / name
    if not path.is_file():
        raise UsageError(f"{path}: missing; `python -m analysis docs --from results/{folder.name}` copies it")
    if name == "summary.csv":
        from analysis.summary import read_summary

        return read_summary(path)
    return pd.read_parquet(path) if name.endswith(".parquet") else pd.read_csv(path)


def table(renderer: str, name: str) -> Callable[[Path, Path], str]:
    """A block of one committed table as ``renderer`` (module.function of analysis, the report's) writes it."""
    def render(folder: Path, figures: Path | None) -> str:
        import importlib

        module, function = renderer.rsplit(".", 1)
        return getattr(importlib.import_module(f"analysis.{module}"), function)(_read(folder, name))
    return render


def lag_fits(folder: Path, figures: Path) -> str:
    """The fit over every decentralized method pooled, one row per data partition (the report's first rows)."""
    from analysis.lag import fits_markdown

    fits = _read(folder, "lag_fits.csv")
    fits["note"] = fits["note"].astype(object).where(fits["note"].notna(), "")  # a fit without a note: ""
    return fits_markdown(fits[fits["scope"] == "all methods"])


def figure(name: str, table: str, png: str | None = None, derive: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
           alt: bool = False, at: str = "figures") -> Callable[[Path, Path], str]:
    """A figure module's from_table on one committed table (or on what ``derive`` makes of it), drawn to
    FIGURES/PNG.png (PNG: the module's name unless given; its PDF dropped), shown from AT (README: docs/figures)
    with the module's alt_text of the table where ``alt`` (a sentence that must stay true), else PNG."""
    png = png or name

    def render(folder: Path, figures: Path | None) -> str:
        import importlib

        module = importlib.import_module(f"analysis.figures.{name}")
        data = (derive or (lambda t: t))(_read(folder, table))
        text = f"![{module.alt_text(data) if alt else png}]({at}/{png}.png)\n"
        if figures is None:  # the text only
            return text
        with tempfile.TemporaryDirectory() as tmp:
            drawn = module.from_table(data, Path(tmp) / name)
            if isinstance(drawn, str):
                raise UsageError(f"figure {name} from {folder / table}: {drawn}")
            shutil.copyfile(Path(tmp) / f"{name}.png", figures / f"{png}.png")
        return text
    return render


def tuning_winners(folder: Path, figures: Path) -> str:
    """The tuning study's winners (their slices of tuned.csv) beside their final runs (summary.csv)."""
    from analysis.winners import winners_markdown

    return winners_markdown(_read(folder, "tuned_slices.csv"), _read(folder, "summary.csv"))


def _gap_table(summary: pd.DataFrame) -> pd.DataFrame:
    from analysis.noniid import gap_table

    return gap_table(summary)


BLOCKS = {
    "smoke-cells": Block("smoke", table("tables.cell_table_markdown", "summary.csv")),
    "smoke-lag-fits": Block("smoke", lag_fits),
    "smoke-consensus": Block("smoke", table("consensus.table_markdown", "consensus/summary.csv")),
    "noniid-table": Block("noniid", table("noniid.table_markdown", "noniid.csv")),
    "noniid-lag-fits": Block("noniid", lag_fits),
    "noniid-effect": Block("noniid", figure("noniid_effect", "noniid.csv")),
    "noniid-lag-figure": Block("noniid", figure("lag_vs_consensus", "lag.csv")),
    "methods-costs": Block("methods", table("tables.cost_table_markdown", "summary.csv")),
    "methods-figure": Block("methods", figure("methods", "methods_curves.csv")),
    "methods-alpha": Block("methods", table("noniid.gap_pivot_markdown", "noniid.csv")),
    "methods-alpha-figure": Block("methods", figure("gap_vs_alpha", "summary.csv", "methods_gap_vs_alpha",
                                                    _gap_table)),
    "spectral-table": Block("spectral", table("tables.spectral_markdown", "summary.csv")),
    "spectral-figure": Block("spectral", figure("accuracy_vs_spectral_gap", "summary.csv", "spectral_neighbours")),
    "speedup-table": Block("speedup", table("speedup.speedup_pivot_markdown", "speedup.csv")),
    "speedup-figure": Block("speedup", figure("speedup", "speedup_points.parquet")),
    "tuning-table": Block("tuning", tuning_winners),
    "tuning-figure": Block("tuning", figure("sensitivity", "tuned_slices.csv")),
    "scaling-table": Block("scaling", table("tables.scaling_markdown", "summary.csv")),
    "scaling-figure": Block("scaling", figure("gap_vs_nodes", "summary.csv", "scaling_gap_vs_nodes")),
    "scaling-readme-figure": Block("scaling", figure("gap_vs_nodes", "summary.csv", "scaling_gap_vs_nodes",
                                                     alt=True, at="docs/figures")),
}


def again(study: str) -> str:
    """The command that runs a study of config/ again (config.yaml holds the default study)."""
    return f"make reproduce STUDY={study}" if (ROOT / "config" / f"{study}.yaml").is_file() else "make reproduce"


def stamp_line(folder: Path) -> str:
    """The block's first line, and the study's names learned (analysis.labels) for the table that follows."""
    from analysis import labels

    stamp = json.loads(read_regular(folder / "stamp.json"))
    labels.reset()
    labels.learn_known(stamp.get("labels", {}))
    return (f"<sub>Generated by `python -m analysis docs` from `{BASELINES}/{folder.name}/`: runs at "
            f"{', '.join(stamp['commits'])} on {stamp['dates']}; again: `{again(folder.name)}`, then "
            f"`python -m analysis docs --from results/{folder.name}`.</sub>\n\n")


def render_block(name: str, folder: str, figures: Path | None, root: Path = ROOT) -> str:
    block = BLOCKS.get(name)
    if block is None:
        raise UsageError(f"no generated block named {name!r}; known: {', '.join(BLOCKS)}")
    if folder != f"{BASELINES}/{block.study}":
        raise UsageError(f"block {name} reads {BASELINES}/{block.study}, not {folder}")
    path = root / folder
    if not (path / "stamp.json").is_file():
        raise UsageError(f"{path}/stamp.json: missing; `python -m analysis docs --from results/{block.study}`")
    return stamp_line(path) + block.render(path, figures)


def rendered(text: str, figures: Path | None, root: Path = ROOT) -> tuple[str, list[str]]:
    """The doc with every block rendered again (its figures drawn to ``figures``; None: not drawn), and the names
    of the blocks whose text changed."""
    changed = []

    def one(match: re.Match) -> str:
        new = render_block(match["name"], match["folder"], figures, root)
        if new != match["text"]:
            changed.append(match["name"])
        return f"<!-- generated: {match['name']} from {match['folder']} (python -m analysis docs) -->\n{new}{CLOSE}"
    opened = text.count("<!-- generated:")
    if opened != len(BLOCK.findall(text)) or opened != text.count(CLOSE):
        raise UsageError("a generated block's first line is not `<!-- generated: NAME from FOLDER (python -m "
                         f"analysis docs) -->`, or it has no `{CLOSE}`")
    return BLOCK.sub(one, text), changed


def unmarked(text: str, tables: bool = True) -> list[int]:
    """Lines of the tables (``tables``) and figures whose nearest line above is neither a generated block's first
    line nor a "Not generated yet" one: every result a doc shows says where it came from."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.startswith("![") or (tables and line.startswith("|") and not (i and lines[i - 1].startswith("|"))):
            above = next((up for up in reversed(lines[:i]) if up.strip()), "")
            if not above.startswith(("<sub>Generated by", "<sub>Not generated yet")):
                out.append(i + 1)
    return out


def _runs_stamp(study_dir: Path) -> dict:
    """The commits the runs were made at (each run.json's provenance), the dates they started, and what they said
    of their algorithms and compressors (their names in the tables)."""
    from analysis import labels
    from analysis.load import load_runs

    labels.reset()
    if (study_dir / "runs").is_dir():
        load_runs(study_dir)
    commits, dates = set(), set()
    for record in sorted((study_dir / "runs").glob("*/run.json")):
        run = json.loads(read_regular(record))
        commits.add(str(run.get("provenance", {}).get("git_commit", "unknown"))[:7])
        dates.add(str(run.get("start_time", ""))[:10])
    if not commits:  # a study of consensus traces only: they record no commit, so the checkout's when copied
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        traces = sorted(study_dir.glob("consensus/*/traces.csv"))
        commits = {f"{head or 'unknown'} (checkout when copied)"}
        dates = {pd.Timestamp(t.stat().st_mtime, unit="s").strftime("%Y-%m-%d") for t in traces}
    dates.discard("")
    return {"commits": sorted(commits), "dates": " to ".join(sorted(dates)[::max(len(dates) - 1, 1)]) or "unknown",
            "labels": labels.known()}


def _derive(study_dir: Path, out: Path) -> None:
    """Of the points of every run (a study's largest table), what its methods and speed-up figures draw; of its
    tuning trials where it drew the sensitivity figure, those on the slices through each winner (that figure's and
    the winners' table's)."""
    from analysis.tuning import read_tuned

    trials = read_tuned(study_dir) if (study_dir / "figures" / "sensitivity.png").is_file() else None
    if trials is not None and trials["selected"].astype(bool).any():
        from analysis.figures.sensitivity import drawn as sliced

        write_text_atomically(out / "tuned_slices.csv", sliced(trials).to_csv(index=False))
    drawn = {name for name in ("methods", "speedup") if (study_dir / "figures" / f"{name}.png").is_file()}
    if not drawn or not (study_dir / "points.parquet").is_file():
        return
    points = pd.read_parquet(study_dir / "points.parquet")
    if "methods" in drawn:  # the curves as drawn (medians per step): a quarter of the points' size
        from analysis.figures.methods import drawn as shown, table_of

        curves = shown(table_of(points)).to_csv(index=False, float_format="%.6g")
        write_text_atomically(out / "methods_curves.csv", curves)
    if "speedup" in drawn:  # every seed's curve is drawn (their range): the points, their columns drawn only
        from analysis.figures.speedup import COLUMNS
        from analysis.speedup import speedup_points

        data = speedup_points(points)
        if data is not None:
            write_atomically(out / "speedup_points.parquet", lambda tmp: data[COLUMNS].to_parquet(tmp, index=False))


def copy_study(study_dir: Path, root: Path = ROOT) -> Path:
    """DIR's small tables to results/baselines/docs/STUDY/ (STUDY: DIR's name), with stamp.json."""
    if not (study_dir / "summary.csv").is_file() and not (study_dir / "consensus" / "summary.csv").is_file():
        raise UsageError(f"{study_dir}: no summary.csv or consensus/summary.csv: not a finished study")
    out = root / BASELINES / study_dir.resolve().name
    for name in COPIED:
        if (study_dir / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(study_dir / name, out / name)
    stamp = {"study": out.name, **_runs_stamp(study_dir)}  # the runs' labels learned: the curves' names below
    _derive(study_dir, out)
    write_text_atomically(out / "stamp.json", json.dumps(stamp, indent=1) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m analysis docs", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="compare only; exit 1 naming each block that differs")
    p.add_argument("--from", dest="studies", nargs="+", type=Path, default=[], metavar="DIR",
                   help="finished studies (results/STUDY) whose tables are copied first")
    try:
        args = p.parse_args(argv)
        for study_dir in args.studies:
            print(f"copied {study_dir} -> {copy_study(study_dir)}")
        with tempfile.TemporaryDirectory() as tmp:
            # a check draws the figures too (each must be drawable), where they change nothing
            figures = Path(tmp) if args.check else ROOT / "docs" / "figures"
            changed = {doc: rendered(read_regular(ROOT / doc).decode(), figures) for doc in DOCS}
        status = 0
        for doc, (new, names) in changed.items():
            loose = unmarked(new, tables=doc != "README.md")  # README's one table lists files, not results
            for line in loose:
                print(f"{doc}:{line}: a table or figure outside a generated block, with no `<sub>Not generated yet` "
                      "line above it", file=sys.stderr)
            for name in names:
                print(f"{doc}: block {name} differs from what `python -m analysis docs` writes" if args.check
                      else f"{doc}: block {name} written again", file=sys.stderr if args.check else sys.stdout)
            if names and not args.check:
                write_text_atomically(ROOT / doc, new)
            status = 1 if loose or (names and args.check) else status
        return status
    except (UsageError, DamagedFile, OSError, ValueError) as err:
        print(f"analysis docs: error: {err}", file=sys.stderr)
        return 2
