"""Every figure registered by its module, and every one drawn: the catalog filled by importing the figure modules
keeps the pipeline's names, order and report questions; each figure declares a numbered question and an order,
and gives a reason, not a traceback, for tables and cells it cannot use; `python -m analysis figures` on two tiny
studies (run directories from tests/analysis_fixtures.py, a tuned.csv and a consensus trace) draws each figure or
says why not, and every figure is drawn from at least one of them; a new figure module registers itself."""
import contextlib
import importlib.util
import io
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import figures
from analysis.figures import base, command
from analysis.figures import requirements as req
from analysis.summary import load_tables
from analysis.tuning import select
from analysis_fixtures import TWO, make_run, two_method_runs

FAULTS = [("allreduce", "none", {}), ("allreduce", "none", {"straggler": {"model": "exponential", "mean": 1.0}}),
          ("choco", "sign", {"drop": 0.0}), ("choco", "sign", {"drop": 0.05}),
          ("choco", "sign", {"straggler": {"model": "exponential", "mean": 1.0}})]


def grid_study(root: Path) -> Path:
    """Two methods, two seeds, in SETTINGS on mnist1d-mlp; lsq at n = 1 and 4 recording the sub-optimality
    c/√(n t); a tuned.csv of three learning rates per method; a consensus trace of sign and exact gossip."""
    two_method_runs(root / "runs")
    for algorithm, compressor in TWO:
        for nodes in (1, 4):
            for seed in range(2):
                steps = np.arange(0, 65, 4)
                subopt = np.where(steps > 0, 1 / np.sqrt(nodes * np.maximum(steps, 1)), 10.0)
                make_run(root / "runs" / f"lsq_{algorithm}_n{nodes}_s{seed}", task="lsq", algorithm=algorithm,
                         compressor=compressor, topology="complete" if nodes == 1 else "ring", nodes=nodes,
                         seed=seed, lr=0.02, steps_per_epoch=16,
                         epochs_points=[{"epoch": s / 16, "train_subopt": v} for s, v in zip(steps, subopt)])
    trials = [{"cell": f"{a}_ring4", "trial": f"lr={lr}_s0", "lr": lr, "status": "completed",
               "val_acc": 0.8 - abs(math.log10(lr / 0.1)) / 10, "val_loss": 0.3, "task": "mnist1d-mlp",
               "algorithm": a, "compressor": c, "topology": "ring", "nodes": 4, "data": "shuffle",
               "weight_decay": 0.0, "gamma": 0.5, "momentum": 0.0, "epochs": 1.0, "epochs_done": 1.0,
               "val_fraction": 0.1, "val_ppl": math.nan} for a, c in TWO for lr in (0.01, 0.1, 1.0)]
    pd.concat([select(pd.DataFrame(g)) for _, g in pd.DataFrame(trials).groupby("cell")]).to_csv(
        root / "tuned.csv", index=False)
    (root / "consensus").mkdir()
    pd.DataFrame([{"method": m, "gamma": g, "step": s, "rel_error": 0.5 ** (s * k), "bits_per_worker": s * b,
                   "topology": "ring", "nodes": 8, "spectral_gap": 0.195, "dim": 100, "seed": 0}
                  for m, g, k, b in [("sign", 0.4, 0.3, 132), ("exact", 1.0, 1.0, 3200)] for s in range(0, 40, 4)]
                 ).to_csv(root / "consensus" / "traces.csv", index=False)
    return root


def faults_study(root: Path) -> Path:
    """All-reduce on a perfect network and with stragglers, sign-Choco losing 0 and 5 % of its messages and
    with stragglers, two seeds each, on a ring of 4: nothing but the faults figure's data."""
    for k, (algorithm, compressor, faults) in enumerate(FAULTS):
        slow = 1 + faults.get("straggler", {}).get("mean", 0.0)
        for seed in range(2):
            final = 0.9 - (0.0 if algorithm == "allreduce" else 0.03 + faults.get("drop", 0.0)) + 0.002 * seed
            make_run(root / "runs" / f"{k}_s{seed}", algorithm=algorithm, compressor=compressor, nodes=4, seed=seed,
                     faults=faults, messages_per_step=8, seconds_per_epoch=2.0 * slow,
                     epochs_points=[{"epoch": e, "test_acc": 0.1 + (final - 0.1) * e / 4, "local_evaluated": 4}
                                    for e in range(5)])
    return root


STUDIES = {"grid": grid_study, "faults": faults_study}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """study -> (its folder, figure -> the reason it was skipped): `python -m analysis figures` run on each."""
    out = {}
    for name, build in STUDIES.items():
        root = build(tmp_path_factory.mktemp(name))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert command.main([str(root)]) == 0
        skipped = dict(re.findall(r"^skipped (\w+): (.*)$", printed.getvalue(), flags=re.M))
        out[name] = (root, skipped)
    return out


@pytest.mark.slow  # draws every figure, PNG and PDF: `make test` runs it, test-fast does not
@pytest.mark.parametrize("name", figures.FIGURES)
def test_every_figure_draws_on_a_tiny_study_or_says_why(drawn, name):
    studies_drawing = []
    for study, (root, skipped) in drawn.items():
        index = json.loads((root / "figures" / "index.json").read_text())
        if name in skipped:  # not drawn: a reason, and nothing left behind
            assert skipped[name].strip() and name not in index, (study, skipped[name])
            assert not (root / "figures" / f"{name}.png").exists()
            continue
        png, pdf = root / "figures" / f"{name}.png", root / "figures" / f"{name}.pdf"
        assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 1000, study
        assert pdf.read_bytes().startswith(b"%PDF"), study
        assert len(index[name]) > 100, (study, index[name])  # the caption drawn with it
        studies_drawing.append(study)
    assert studies_drawing, f"{name}: drawn by no tiny study: {[s[name] for _, s in drawn.values()]}"


@pytest.mark.slow  # reads the tiny studies every figure was drawn on (the fixture above)
def test_a_figure_the_study_cannot_give_gives_the_reason_its_requirement_gives(drawn):
    """The faults study has one partition and one n: the figures about n, ρ and partitions name what they need,
    in the words the DAG build uses to refuse a study (each figure module's needs)."""
    root, skipped = drawn["faults"]
    summary = load_tables(root)[1]
    for name in ("gap_vs_nodes", "accuracy_vs_spectral_gap", "noniid_effect"):
        assert skipped[name] == figures.CATALOG[name].needs(req.Grid(summary)), name


# -- the catalog -------------------------------------------------------------------------------------------------
def test_the_catalog_keeps_the_pipelines_names_and_order():
    """Snakemake's figure rule, the studies' `figures:` lists and the report's groups name the figures of the
    committed studies: each is still found, in this order (a new figure module may join anywhere)."""
    committed = ["accuracy_curves", "gap_vs_nodes", "accuracy_vs_spectral_gap", "time_to_accuracy", "consensus",
                 "lag_vs_consensus", "noniid_effect", "sensitivity", "speedup", "methods", "faults_effect"]
    assert [name for name in figures.FIGURES if name in committed] == committed
    assert list(figures.QUESTIONS) == figures.FIGURES
    assert figures.QUESTIONS["lag_vs_consensus"] == "3. How do the graph and n set the gap to all-reduce?"


def test_the_report_questions_are_numbered_once_each():
    """One text per number and numbers 1..k without a gap: a figure with a typo in its question would
    open a group of its own in `snakemake --report`."""
    texts = set(figures.QUESTIONS.values())
    numbers = sorted(int(t.split(".")[0]) for t in texts)
    assert numbers == list(range(1, len(texts) + 1)), sorted(texts)


@pytest.mark.parametrize("name", figures.FIGURES)
def test_every_figure_declares_its_place_and_gives_a_reason_for_what_it_cannot_use(name, tmp_path):
    """The question that groups it in the report ("N. ...?") and its order; on a study without cells and on
    empty tables (no runs, no tuned.csv, no trace) it names what it needs, draws nothing and raises nothing."""
    figure = figures.CATALOG[name]
    assert re.fullmatch(r"\d+\. .+\?", figure.question) and isinstance(figure.order, int), figure
    assert figure.draw_function is getattr(importlib.import_module(f"analysis.figures.{name}"), "draw")
    why = figure.needs(req.Grid(req.cells_frame([])))
    assert isinstance(why, str) and why.strip()
    for tables in [(pd.DataFrame(), pd.DataFrame()), (None, None)]:
        result = figure.draw(tmp_path, *tables, tmp_path / name)
        assert isinstance(result, str) and result.strip(), result
    assert list(tmp_path.iterdir()) == []


def test_a_new_figure_module_registers_itself_when_imported(tmp_path, monkeypatch):
    """Its name is its module's, its place its order (then its name); a second figure in one module, or a
    question that is not text, is refused naming the module."""
    monkeypatch.setattr(base, "_REGISTERED", {})  # the committed figures stay as they are
    for name, order in [("late", 5), ("early", 5), ("first", 1)]:
        path = tmp_path / f"{name}.py"
        path.write_text("from analysis.figures.base import figure\n\n\n"
                        f"@figure('9. Late?', order={order}, reads_runs=False)\n"
                        "def draw(run_dir, points, summary, out_stem):\n    return 'nothing to draw'\n")
        spec = importlib.util.spec_from_file_location(f"figures_{name}", path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert [(f.name, f.order, f.reads_runs) for f in base.catalog().values()] == [
        ("figures_first", 1, False), ("figures_early", 5, False), ("figures_late", 5, False)]
    assert base.catalog()["figures_late"].draw(tmp_path, None, None, tmp_path / "late") == "nothing to draw"
    assert base.catalog()["figures_first"].needs(req.Grid(req.cells_frame([]))) == base.trains(req.Grid(
        req.cells_frame([]))) == "needs training runs (a block of cells)"

    def draw(run_dir, points, summary, out_stem):
        pass

    draw.__module__ = "figures_late"
    with pytest.raises(TypeError, match="figures_late: a second figure named 'figures_late'"):
        base.figure("9. Again?", order=1)(draw)
    draw.__module__ = "figures_odd"
    with pytest.raises(TypeError, match="figures_odd: .* order as a whole number"):
        base.figure("9. Odd?", order=True)(draw)
