"""Every figure registered by its module, and every law checked on each: the catalog keeps the pipeline's names,
order and report questions; `python -m analysis figures` on five tiny studies (five methods in a grid, the same
with one method, all-reduce and sign-Choco on an unreliable network, each alone there) draws each figure or gives
the reason its requirement gives; a caption names the task it shows; a legend lists methods in the suite's order
in their colour and marker; an artist named for a method is in its colour; a panel names its axes."""
import contextlib
import importlib
import importlib.util
import io
import itertools
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba, to_rgba_array
from matplotlib.container import ErrorbarContainer
from matplotlib.lines import Line2D

from analysis import figures, labels, report
from analysis.figures import base, command
from analysis.figures import requirements as req
from analysis.summary import load_tables
from analysis.tuning import select
from analysis_fixtures import RHO, SETTINGS, make_run

METHODS = [("allreduce", "none"), ("dpsgd", "none"), ("choco", "sign"), ("choco", "top:0.01"), ("dcd", "top:0.01")]
CHOCO = [("choco", "sign")]
FAULTS = [("allreduce", "none", {}), ("allreduce", "none", {"straggler": {"model": "exponential", "mean": 1.0}}),
          ("choco", "sign", {"drop": 0.0}), ("choco", "sign", {"drop": 0.05}),
          ("choco", "sign", {"straggler": {"model": "exponential", "mean": 1.0}})]


def grid_study(root: Path, methods) -> Path:
    """Each method, two seeds, in SETTINGS on mnist1d-mlp, lagging all-reduce more on sparser graphs, larger n
    and sorted data; on lsq at n = 1 and 4 recording the sub-optimality c/√(n t); a tuned.csv of three learning
    rates each; a consensus trace of sign (and of exact gossip where all-reduce runs)."""
    for algorithm, compressor in methods:
        k = METHODS.index((algorithm, compressor))  # 0: all-reduce
        tag = f"{algorithm}-{compressor.replace(':', '')}"
        for (topology, nodes, data), seed in itertools.product(SETTINGS, range(2)):
            rho = RHO[(topology, nodes)]
            lag = 0.0 if k == 0 else (0.01 * k + 0.1 * (1 - rho)) * (3 if data == "sorted" else 1)
            final = 0.9 - lag - (0.03 if data == "sorted" else 0.0) + 0.002 * seed
            make_run(root / "runs" / f"{tag}_{topology}{nodes}_{data}_s{seed}", algorithm=algorithm,
                     compressor=compressor, topology=topology, nodes=nodes, data=data, seed=seed,
                     spectral_gap=1.0 if k == 0 else rho,
                     epochs_points=[{"epoch": e, "test_acc": 0.1 + (final - 0.1) * e / 4,
                                     "consensus_distance": 1e-3 * k / rho**2} for e in range(5)])
        for nodes, seed in itertools.product((1, 4), range(2)):
            steps = np.arange(0, 65, 4)
            subopt = np.where(steps > 0, 1 / np.sqrt(nodes * np.maximum(steps, 1)), 10.0)
            make_run(root / "runs" / f"lsq_{tag}_n{nodes}_s{seed}", task="lsq", algorithm=algorithm,
                     compressor=compressor, topology="complete" if nodes == 1 else "ring", nodes=nodes,
                     seed=seed, lr=0.02, steps_per_epoch=16,
                     epochs_points=[{"epoch": s / 16, "train_subopt": v} for s, v in zip(steps, subopt)])
    trials = [{"cell": f"{a}-{c}_ring4", "trial": f"lr={lr}_s0", "lr": lr, "status": "completed",
               "val_acc": 0.8 - abs(math.log10(lr / 0.1)) / 10, "val_loss": 0.3, "task": "mnist1d-mlp",
               "algorithm": a, "compressor": c, "topology": "ring", "nodes": 4, "data": "shuffle",
               "weight_decay": 0.0, "gamma": 0.5, "momentum": 0.0, "epochs": 1.0, "epochs_done": 1.0,
               "val_fraction": 0.1, "val_ppl": math.nan} for a, c in methods for lr in (0.01, 0.1, 1.0)]
    pd.concat([select(pd.DataFrame(g)) for _, g in pd.DataFrame(trials).groupby("cell")]).to_csv(
        root / "tuned.csv", index=False)
    for m, g, k, b in [("sign", 0.4, 0.3, 132)] + [("exact", 1.0, 1.0, 3200)] * (len(methods) > 1):
        (root / "consensus" / m).mkdir(parents=True)  # a folder for each, as `bench consensus` writes them
        pd.DataFrame([{"method": m, "gamma": g, "step": s, "rel_error": 0.5 ** (s * k), "bits_per_worker": s * b,
                       "topology": "ring", "nodes": 8, "spectral_gap": 0.195, "dim": 100, "seed": 0}
                      for s in range(0, 40, 4)]).to_csv(root / "consensus" / m / "traces.csv", index=False)
    return root


def faults_study(root: Path, methods) -> Path:
    """Of FAULTS, the settings of ``methods``, two seeds each on a ring of 4: nothing but the faults figure's data."""
    for k, (algorithm, compressor, faults) in enumerate(FAULTS):
        slow = 1 + faults.get("straggler", {}).get("mean", 0.0)
        for seed in range(2 if (algorithm, compressor) in methods else 0):
            final = 0.9 - (0.0 if algorithm == "allreduce" else 0.03 + faults.get("drop", 0.0)) + 0.002 * seed
            make_run(root / "runs" / f"{k}_s{seed}", algorithm=algorithm, compressor=compressor, nodes=4, seed=seed,
                     faults=faults, messages_per_step=8, seconds_per_epoch=2.0 * slow,
                     epochs_points=[{"epoch": e, "test_acc": 0.1 + (final - 0.1) * e / 4, "local_evaluated": 4}
                                    for e in range(5)])
    return root


STUDIES = {"grid": (grid_study, METHODS), "one": (grid_study, CHOCO), "faults": (faults_study, METHODS[:1] + CHOCO),
           "faults-choco": (faults_study, CHOCO), "faults-allreduce": (faults_study, METHODS[:1])}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """study -> its folder, summary, metrics, skipped {figure: reason}, captions {figure: caption} and figs [(figure,
    the matplotlib Figure, the methods' looks and legend ranks when it was drawn)]: `python -m analysis figures`
    run on each (then the report on the grid). A figure is written (PNG and PDF) by the first study that draws
    it; the later ones keep it without writing it again."""
    out, figs, written, tables = {}, [], set(), []

    def keep(name, save):
        def saved(fig, out_stem):
            figs.append((name, fig, {m: (labels.style(m), labels.method_sort_key(m)) for m in list(labels._METHODS)}))
            if name in written:
                return []
            written.add(name)
            return save(fig, out_stem)
        return saved

    with pytest.MonkeyPatch.context() as patch:
        for name in figures.FIGURES:
            module = importlib.import_module(f"analysis.figures.{name}")
            patch.setattr(module, "save_figure", keep(name, module.save_figure))
        patch.setattr(command, "load_tables", lambda root: tables.append(load_tables(root)) or tables[-1])
        for study, (build, methods) in STUDIES.items():
            root = build(tmp_path_factory.mktemp(study), methods)
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                assert command.main([str(root)]) == 0
                assert study != "grid" or report.main([str(root)]) == 0
            points, summary, _ = tables.pop()  # what the figures were drawn from
            out[study] = SimpleNamespace(
                root=root, summary=summary, metrics=list(points.columns), figs=list(figs),
                skipped=dict(re.findall(r"^skipped (\w+): (.*)$", printed.getvalue(), flags=re.M)),
                captions=json.loads((root / "figures" / "index.json").read_text()))
            figs.clear()
    return out


@pytest.mark.slow  # draws every figure, PNG and PDF: `make test` runs it, test-fast does not
@pytest.mark.parametrize("name", figures.FIGURES)
def test_every_figure_draws_on_a_tiny_study_or_gives_the_reason_its_requirement_gives(drawn, name):
    """Drawn (PNG, PDF, a caption in the index) by one study at least; where not, nothing is left behind and the
    reason is its requirement's (the words the DAG build refuses a study with) where that names one; from one
    method every figure draws but those of a gap to all-reduce, which say so."""
    figure, studies_drawing = figures.CATALOG[name], []
    # the runs alone can meet its requirement (not a tune: grid or a consensus: block): a skip gives its reason
    runs_decide = any(figure.needs(req.Grid(s.summary, metrics=s.metrics)) is None for s in drawn.values())
    for study, seen in drawn.items():
        png, pdf = seen.root / "figures" / f"{name}.png", seen.root / "figures" / f"{name}.pdf"
        if name in seen.skipped:
            assert seen.skipped[name].strip() and name not in seen.captions and not png.exists(), study
            why = figure.needs(req.Grid(seen.summary, metrics=seen.metrics)) if runs_decide else None
            assert why is None or seen.skipped[name] == why, (study, seen.skipped[name])
            assert study != "one" or name in drawn["grid"].skipped or "all-reduce" in seen.skipped[name]
            continue
        shown = set(seen.summary["task"]) if figure.reads_runs else {"ring of n = 8"}  # the caption names its task
        assert len(seen.captions[name]) > 100 and any(t in seen.captions[name] for t in shown), (study, shown)
        if studies_drawing:  # drawn before: kept, not written again
            assert not png.exists() and not pdf.exists(), study
        else:
            assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 1000, study
            assert pdf.read_bytes().startswith(b"%PDF"), study
        studies_drawing.append(study)
    assert "grid" in studies_drawing or "faults" in studies_drawing, {s: d.skipped.get(name) for s, d in drawn.items()}


def every_figure(drawn):
    """(study, figure, matplotlib Figure, looks when drawn) of everything the tiny studies drew."""
    return [(study, *entry) for study, seen in drawn.items() for entry in seen.figs]


def legends(fig):
    return list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]


def colour(artist):
    """A line's colour; a patch's or a marker set's fill, or its edge where it is hollow (white or none)."""
    if isinstance(artist, Line2D):
        return to_rgba(artist.get_color())
    face = [tuple(c) for c in to_rgba_array(artist.get_facecolor())]
    return tuple(to_rgba_array(artist.get_edgecolor())[0]) if face in ([], [to_rgba("white")]) else face[0]


@pytest.mark.slow  # reads the tiny studies every figure was drawn on (the fixture above)
def test_every_method_has_its_colour_and_marker_in_legends_in_order_and_in_artists_named_for_it(drawn):
    """A method's colour and marker (its compressor family's) are the same in every figure of a study; legends list
    the exact methods first, then by algorithm and the paper's compressor order; lines, bars and marks whose gid
    names a method (kind:method[:more]) carry its colour (the speed-up's curves alone are coloured by n)."""
    in_legends, in_artists = set(), set()
    for study, name, fig, looks in every_figure(drawn):
        for legend in legends(fig):
            entries = [(t.get_text(), h) for t, h in zip(legend.get_texts(), legend.legend_handles)
                       if t.get_text() in looks]
            assert [m for m, _ in entries] == sorted((m for m, _ in entries), key=lambda m: looks[m][1]), name
            for method, handle in entries:
                look = looks[method][0]
                assert colour(handle) == to_rgba(look["color"]), (study, name, method)
                if isinstance(handle, Line2D) and handle.get_marker() not in (None, "None", ""):
                    assert handle.get_marker() == look["marker"], (study, name, method)
                in_legends.add(name)
        for artist in (artist for ax in fig.axes for artist in ax.get_children()):
            kind, _, rest = str(artist.get_gid() or "").partition(":")
            method = next((m for m in looks if rest == m or rest.startswith(f"{m}:") or rest.endswith(f":{m}")), None)
            if method and kind != "curve":
                assert colour(artist) == to_rgba(looks[method][0]["color"]), (study, name, artist.get_gid())
                in_artists.add(name)
    assert len(in_legends) >= 8 and len(in_artists) >= 8, (in_legends, in_artists)


@pytest.mark.slow  # reads the tiny studies every figure was drawn on (the fixture above)
def test_every_panel_names_its_axes_and_its_caption_what_its_intervals_are(drawn):
    """A panel that draws data has a y label (or shares its y axis with one that has) and an x label (or names
    its categories on its ticks); error bars, a band or a line of the seeds' spread (gid seeds) of some height are
    what the figure declares (@figure(intervals=...): a std, the seeds' range, a 95 % interval), in its caption."""
    for study, name, fig, _ in every_figure(drawn):
        said, caption = figures.CATALOG[name].intervals, drawn[study].captions.get(name, "")
        ys = [seg[:, 1] for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer)
              for lc in c[2] for seg in lc.get_segments()]
        ys += [p.vertices[:, 1] for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)
               for p in c.get_paths()]
        ys += [line.get_ydata() for ax in fig.axes for line in ax.lines if str(line.get_gid()).startswith("seeds")]
        if any(np.ptp(np.asarray(y, float)) > 0 for y in ys if len(y)) and caption:
            assert said and all(words in caption for words in said), (study, name, said)
        fig.canvas.draw()  # tick labels are set when drawn
        panels = [ax for ax in fig.axes if ax.axison and (ax.lines or ax.patches or ax.collections)]
        for ax in panels:
            named_y = [o for o in panels if o.get_ylabel() and (o is ax or ax.get_shared_y_axes().joined(ax, o))]
            assert named_y and (ax.get_xlabel() or any(t.get_text() for t in ax.get_xticklabels())), (study, name)


@pytest.mark.slow  # reads the grid study the report was written for (the fixture above)
def test_the_report_shows_every_drawn_figure_with_its_caption_beside_the_tables(drawn):
    seen = drawn["grid"]
    md = (seen.root / "report.md").read_text()
    assert "| compression | Choco-SGD | DCD-PSGD |" in md and "| method" in md  # Table 1, the per-cell table
    assert "\\toprule" in (seen.root / "table1.tex").read_text()  # Table 1 in LaTeX next to the report
    for name, caption in seen.captions.items():
        assert f"![{name}](figures/{name}.png)" in md and caption in md


# -- the catalog -------------------------------------------------------------------------------------------------
def test_the_catalog_keeps_the_pipelines_names_order_and_numbered_questions():
    """Snakemake's figure rule, the studies' `figures:` lists and the report's groups name the figures of the
    committed studies: each is still found, in this order (a new figure module may join anywhere); one text
    per number, 1..k without a gap (a typo would open a group of its own in `snakemake --report`)."""
    committed = ["accuracy_curves", "gap_vs_nodes", "accuracy_vs_spectral_gap", "time_to_accuracy", "consensus",
                 "lag_vs_consensus", "noniid_effect", "sensitivity", "speedup", "methods", "faults_effect"]
    assert [name for name in figures.FIGURES if name in committed] == committed
    assert list(figures.QUESTIONS) == figures.FIGURES
    assert figures.QUESTIONS["lag_vs_consensus"] == "3. How do the graph and n set the gap to all-reduce?"
    texts = set(figures.QUESTIONS.values())
    assert sorted(int(t.split(".")[0]) for t in texts) == list(range(1, len(texts) + 1)), sorted(texts)


@pytest.mark.parametrize("name", figures.FIGURES)
def test_every_figure_declares_its_place_and_gives_a_reason_for_what_it_cannot_use(name, tmp_path):
    """The question that groups it in the report ("N. ...?") and its order; on a study without cells and on
    empty tables (no runs, no tuned.csv, no trace) it names what it needs, draws nothing and raises nothing."""
    figure = figures.CATALOG[name]
    assert re.fullmatch(r"\d+\. .+\?", figure.question) and isinstance(figure.order, int), figure
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
