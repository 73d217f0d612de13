"""Every figure draws from one method up, or a study that asks for one its cells cannot give is refused when its
DAG is built, naming the figure and why (issue 25): each figure from a one- and a two-method frame, the
requirement of each figure against a study's cells, and a two-method study through the whole pipeline."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis import figures
from analysis.figures.faults_effect import NO_FAULTS
from analysis.figures.requirements import Grid, cells_frame, unmet
from analysis.summary import load_tables
from analysis.tuning import select
from analysis_fixtures import TWO, make_run, two_method_runs
from bench.pipeline import Study

ROOT = Path(__file__).resolve().parents[1]
ONE = [("choco", "sign")]
# the figures that read only the runs' tables (the others read tuned.csv, traces.csv or sub-optimality)
FROM_RUNS = ["accuracy_curves", "gap_vs_nodes", "accuracy_vs_spectral_gap", "time_to_accuracy", "lag_vs_consensus",
             "noniid_effect", "gap_vs_alpha", "methods"]
NEEDS_ALLREDUCE = {"gap_vs_nodes", "lag_vs_consensus", "gap_vs_alpha"}  # a gap to all-reduce needs all-reduce


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two seeds of all-reduce and sign-Choco in five settings; Choco lags more on sparser graphs, larger n and
    sorted data, and keeps a consensus distance that grows as ρ shrinks."""
    root = two_method_runs(tmp_path_factory.mktemp("runs"))
    points, summary, _ = load_tables(root)
    return root, points, summary


def draw(name):
    return figures.CATALOG[name].draw


def of(frame, methods):
    return frame[[(a, c) in methods for a, c in zip(frame["algorithm"], frame["compressor"])]]


def assert_drawn(result, out_stem):
    assert not isinstance(result, str), result
    paths, caption = result
    assert paths == [out_stem.with_suffix(".png"), out_stem.with_suffix(".pdf")] and len(caption) > 100
    assert all(p.stat().st_size > 1000 for p in paths)


@pytest.mark.slow  # draws every figure, PNG and PDF: `make test` runs it, test-fast does not
@pytest.mark.parametrize("name", FROM_RUNS)
@pytest.mark.parametrize("methods", [ONE, TWO], ids=["one method", "two methods"])
def test_each_figure_of_the_runs_draws_from_one_method_or_says_what_it_needs(runs, name, methods, tmp_path):
    root, points, summary = runs
    result = draw(name)(root, of(points, methods), of(summary, methods), tmp_path / name)
    why = figures.CATALOG[name].needs(Grid(of(summary, methods)))
    if len(methods) == 1 and name in NEEDS_ALLREDUCE:  # one decentralized method: no gap to draw
        assert result == why and "all-reduce" in why
    else:
        assert why is None
        assert_drawn(result, tmp_path / name)


def lsq_points(methods):
    """Sub-optimality c/√(n t) of each method at n = 1 and n = 4, two seeds."""
    steps = np.arange(0, 65)
    parts = []
    for algorithm, compressor in methods:
        for nodes in (1, 4):
            values = np.where(steps > 0, 1 / np.sqrt(nodes * np.maximum(steps, 1)), 10.0)
            for seed in range(2):
                parts.append(pd.DataFrame({"step": steps, "train_subopt": values, "status": "completed",
                                           "run_id": f"{algorithm}-n{nodes}-s{seed}", "task": "lsq",
                                           "algorithm": algorithm, "compressor": compressor, "nodes": nodes,
                                           "seed": seed, "topology": "complete" if nodes == 1 else "ring",
                                           "data": "shuffle", "lr": 0.02}))
    return pd.concat(parts, ignore_index=True)


def tuning_table(methods):
    """tuned.csv of one cell per method, each searching three learning rates."""
    cells = []
    for algorithm, compressor in methods:
        rows = [{"cell": f"{algorithm}_ring4", "trial": f"lr={lr}_s0", "lr": lr, "status": "completed",
                 "val_acc": 0.8 - abs(math.log10(lr / 0.1)) / 10, "val_loss": 0.3, "task": "mnist1d-mlp",
                 "algorithm": algorithm, "compressor": compressor, "topology": "ring", "nodes": 4, "data": "shuffle",
                 "weight_decay": 0.0, "gamma": 0.5, "momentum": 0.0, "epochs": 1.0, "epochs_done": 1.0,
                 "val_fraction": 0.1, "val_ppl": math.nan} for lr in (0.01, 0.1, 1.0)]
        cells.append(select(pd.DataFrame(rows)))
    return pd.concat(cells, ignore_index=True)


def consensus_traces(methods):
    return pd.DataFrame([{"method": m, "gamma": g, "step": s, "rel_error": 0.5 ** (s * k), "bits_per_worker": s * b,
                          "topology": "ring", "nodes": 8, "spectral_gap": 0.195, "dim": 100, "seed": 0}
                         for m, g, k, b in methods for s in range(0, 40, 4)])


@pytest.mark.slow  # draws every figure, PNG and PDF: `make test` runs it, test-fast does not
@pytest.mark.parametrize("count", [1, 2], ids=["one method", "two methods"])
def test_speedup_sensitivity_and_consensus_draw_from_one_method(count, tmp_path):
    speedup = draw("speedup")(tmp_path, lsq_points(TWO[-count:]), None, tmp_path / "speedup")
    assert_drawn(speedup, tmp_path / "speedup")
    tuning_table(TWO[-count:]).to_csv(tmp_path / "tuned.csv", index=False)
    assert_drawn(draw("sensitivity")(tmp_path, None, None, tmp_path / "sensitivity"),
                 tmp_path / "sensitivity")
    (tmp_path / "consensus").mkdir()
    consensus_traces([("sign", 0.4, 0.3, 132), ("exact", 1.0, 1.0, 3200)][:count]).to_csv(
        tmp_path / "consensus" / "traces.csv", index=False)
    assert_drawn(draw("consensus")(tmp_path, None, None, tmp_path / "fig"), tmp_path / "fig")


@pytest.fixture(scope="module")
def fault_runs(tmp_path_factory):
    """Two seeds of all-reduce (on a perfect network and with stragglers) and of sign-Choco (messages lost at 0
    and 5 %, and with stragglers) on a ring of 4."""
    root = tmp_path_factory.mktemp("faults")
    settings = [("allreduce", "none", {}), ("allreduce", "none", {"straggler": {"model": "exponential", "mean": 1.0}}),
                ("choco", "sign", {"drop": 0.0}), ("choco", "sign", {"drop": 0.05}),
                ("choco", "sign", {"straggler": {"model": "exponential", "mean": 1.0}})]
    for k, (algorithm, compressor, faults) in enumerate(settings):
        slow = 1 + faults.get("straggler", {}).get("mean", 0.0)
        for seed in range(2):
            final = 0.9 - (0.0 if algorithm == "allreduce" else 0.03 + faults.get("drop", 0.0)) + 0.002 * seed
            make_run(root / f"{k}_s{seed}", algorithm=algorithm, compressor=compressor, nodes=4, seed=seed,
                     faults=faults, messages_per_step=8, seconds_per_epoch=2.0 * slow,
                     epochs_points=[{"epoch": e, "test_acc": 0.1 + (final - 0.1) * e / 4, "local_evaluated": 4}
                                    for e in range(5)])
    points, summary, _ = load_tables(root)
    return root, points, summary


@pytest.mark.parametrize("methods", [ONE, TWO, [("allreduce", "none")]], ids=["choco", "two methods", "allreduce"])
def test_the_faults_figure_draws_from_one_method_and_is_refused_without_faults(fault_runs, runs, methods, tmp_path):
    root, points, summary = fault_runs
    assert figures.CATALOG["faults_effect"].needs(Grid(of(summary, methods))) is None
    assert_drawn(draw("faults_effect")(root, of(points, methods), of(summary, methods), tmp_path / "f"),
                 tmp_path / "f")
    root, points, summary = runs  # a perfect network throughout
    why = draw("faults_effect")(root, of(points, methods), of(summary, methods), tmp_path / "g")
    assert why == figures.CATALOG["faults_effect"].needs(Grid(of(summary, methods))) and "unreliable network" in why


# -- the study's cells, as the DAG build reads them (workflow/rules/common.smk) ---------------------------------
def two_method_study(**changes):
    study = yaml.safe_load((Path(__file__).with_name("two_methods.yaml")).read_text())
    return {**study, **changes}


def grid_of(config):
    S = Study(config)
    return Grid(cells_frame([S.configs[c].to_dict() for c in S.cells]), tune_grid=S.tune_grid, tuned=S.tuned_cells,
                consensus=S.consensus, metrics=S.metrics)


def block(method, topology, nodes, **extra):
    return {"method": method, "topology": [topology], "nodes": nodes, **extra}


def test_the_two_method_study_gives_every_figure_but_the_speedup():
    assert unmet(figures.FIGURES, grid_of(two_method_study())) == [
        ("speedup", "needs runs with train_subopt (the lsq and logreg tasks record it)"),
        ("faults_effect", NO_FAULTS)]


@pytest.mark.parametrize("figure, blocks, why", [
    ("gap_vs_nodes", {"a": block(["allreduce/none", "choco/sign"], "ring", [4])}, "node counts"),
    ("gap_vs_nodes", {"a": block(["choco/sign"], "ring", [4, 9])}, "all-reduce"),
    ("accuracy_vs_spectral_gap", {"a": block(["allreduce/none", "choco/sign"], "ring", [4, 9])}, "topologies"),
    ("lag_vs_consensus", {"a": block(["allreduce/none", "choco/sign"], "ring", [4])}, ">= 2 settings"),
    ("noniid_effect", {"a": block(["allreduce/none", "choco/sign"], "ring", [4])}, "data partitions"),
    ("speedup", {"a": block(["allreduce/none"], "ring", [4, 9])}, "n = 1"),
    ("sensitivity", {"a": block(["choco/sign"], "ring", [4])}, "tune: grid"),
    ("consensus", {"a": block(["choco/sign"], "ring", [4])}, "consensus: block"),
    ("accuracy_curves", {}, "training runs"),
    ("faults_effect", {"a": block(["allreduce/none", "choco/sign"], "ring", [4])}, "unreliable network"),
    ("faults_effect", {"a": block(["choco/sign"], "ring", [4], faults=[{"drop": 0.0}, {"down": [
        {"edge": [0, 1], "rounds": [10, 20]}]}])}, "unreliable network"),  # no loss at a rate: nothing to draw
])
def test_a_figure_the_cells_cannot_give_is_named_with_why(figure, blocks, why):
    config = {"study": "s", "task": "lsq" if figure == "speedup" else "mnist1d-mlp", "seeds": [0], "blocks": blocks}
    if figure == "sensitivity":
        config["tune"] = {"grid": {"weight_decay": [0.0, 1e-4]}}  # a grid, but no LR or γ to draw against
    ((name, reason),) = unmet([figure], grid_of(config))
    assert name == figure and why in reason


@pytest.mark.parametrize("faults", [[{"drop": 0.0}, {"drop": 0.05}], [{"straggler": {"model": "exponential",
                                                                                  "mean": 1.0}}]],
                         ids=["losses", "stragglers"])
def test_a_study_with_faults_gives_the_faults_figure(faults):
    config = {"study": "s", "task": "mnist1d-mlp", "seeds": [0],
              "blocks": {"a": block(["dpsgd/none", "choco/sign"], "ring", [4], faults=faults)}}
    assert unmet(["faults_effect"], grid_of(config)) == []


# -- the pipeline -------------------------------------------------------------------------------------------------
def snakemake(*args, cwd):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), *args], cwd=cwd,
                          env=env, capture_output=True, text=True)


@pytest.mark.slow  # snakemake's DAG build, in a child process
def test_a_study_asking_for_a_figure_it_cannot_draw_is_refused_when_its_dag_is_built(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(two_method_study(figures=["accuracy_curves", "speedup"])))
    out = snakemake("-n", "--configfile", str(study), "--directory", str(tmp_path), cwd=tmp_path)
    errors = [line for line in (out.stdout + out.stderr).splitlines() if line.startswith("error:")]
    assert out.returncode != 0 and errors == [
        "error: study 'two-methods' at scale=cpu: figure 'speedup' cannot be drawn from its cells: needs runs with "
        "train_subopt (the lsq and logreg tasks record it)"], out.stderr[-2000:]


@pytest.mark.slow  # ~30 jobs: 11 small training runs, a tuned cell, the consensus problem, every figure (1-3 min)
def test_a_two_method_study_draws_every_figure_it_asks_for_end_to_end(tmp_path):
    config = two_method_study()
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(config))
    out = snakemake("--cores", "2", "--configfile", str(study), "--directory", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    drawn = tmp_path / "results" / config["study"] / "figures"
    for name in config["figures"]:
        assert all((drawn / f"{name}{suffix}").stat().st_size > 1000 for suffix in (".png", ".pdf")), name
    assert set(json.loads((drawn / "index.json").read_text())) == set(config["figures"])
    summary = pd.read_csv(tmp_path / "results" / config["study"] / "summary.csv")
    assert set(zip(summary["algorithm"], summary["compressor"])) == set(TWO)
