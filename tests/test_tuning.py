"""The tuning stage: the validation split, the selection rule, the sensitivity slices, and a tuned
study end to end through the pipeline."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from analysis.figures.sensitivity import plot_sensitivity, sensitivity_slice
from analysis.tuning import SelectionError, read_trials, select, study_table
from analysis.tuning import main as tune_main
from bench.cli import main as bench_main
from bench.run.config import RunConfig
from bench.tasks import TaskSetup, make_task
from bench.tasks.supervised import validation_split

ROOT = Path(__file__).resolve().parents[1]
TINY = {"n_train": 200, "n_test": 50}


# -- the validation split ----------------------------------------------------------------------
def test_validation_split_is_disjoint_complete_and_fixed():
    keep, held = validation_split(1000, 0.1)
    assert len(held) == 100 and len(keep) == 900
    assert set(keep.tolist()).isdisjoint(held.tolist())
    assert sorted(keep.tolist() + held.tolist()) == list(range(1000))
    again_keep, again_held = validation_split(1000, 0.1)
    assert torch.equal(held, again_held) and torch.equal(keep, again_keep)
    assert len(validation_split(10, 0.01)[1]) == 1  # at least one example held out


def test_a_task_with_validation_trains_on_the_rest_and_reports_val_metrics():
    plain = make_task("mnist1d-mlp", TaskSetup(n_workers=2, batch_size=10, seed=0, options=TINY))
    tuned = make_task("mnist1d-mlp", TaskSetup(n_workers=2, batch_size=10, seed=3, val_fraction=0.25, options=TINY))
    assert plain.train_size == 200 and tuned.train_size == 150
    # the held-out examples are not among those trained on
    train_rows = {tuple(r.tolist()) for r in tuned.train_x}
    assert not any(tuple(r.tolist()) in train_rows for r in tuned.val_x)
    # the validation examples come out of the training set, the test set is untouched
    held = make_task("digits-mlp", TaskSetup(n_workers=2, batch_size=10, seed=3, val_fraction=0.25))
    plain_digits = make_task("digits-mlp", TaskSetup(n_workers=2, batch_size=10, seed=3))
    assert torch.equal(held.test_x, plain_digits.test_x)
    assert held.train_size + len(held.val_y) == plain_digits.train_size
    keep, out = validation_split(plain_digits.train_size, 0.25)
    assert torch.equal(held.val_x, plain_digits.train_x[out]) and torch.equal(held.train_x, plain_digits.train_x[keep])
    metrics = tuned.evaluate(tuned.init_params()[0])
    assert {"val_loss", "val_acc", "test_acc"} <= set(metrics)
    assert 0.0 <= metrics["val_acc"] <= 1.0 and math.isfinite(metrics["val_loss"])
    assert "val_acc" not in plain.evaluate(plain.init_params()[0])


def test_synthetic_task_with_validation_drops_the_suboptimality_it_could_not_measure():
    task = make_task("lsq", TaskSetup(n_workers=2, batch_size=10, val_fraction=0.2))
    metrics = task.evaluate(task.init_params()[0])
    assert "val_loss" in metrics and math.isnan(metrics["val_acc"]) and "train_subopt" not in metrics


def test_val_fraction_out_of_range_is_one_line_and_exit_2(tmp_path, capsys):
    for bad in ("1", "-0.1"):
        status = bench_main(["run", "--task", "lsq", "--nodes", "2", "--epochs", "1", "--set", f"val_fraction={bad}",
                             "--out", str(tmp_path / bad)])
        err = capsys.readouterr().err
        assert status == 2 and "val_fraction" in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / bad).exists()


def test_runs_without_validation_keep_their_ids():
    # val_fraction, recipe, algorithm_options and faults arrived after runs were written: at their defaults they leave the
    # fingerprint alone (stop_at never enters it: how far to train now is not what the run is)
    cfg = RunConfig()
    legacy = {k: v for k, v in cfg.to_dict().items() if k not in ("quiet", "val_fraction", "recipe", "stop_at",
                                                                       "algorithm_options", "faults")}
    legacy.update(gamma="auto", gamma_tune_steps=1000, order="paper")  # run settings then, the algorithm's now
    import hashlib

    expected = hashlib.sha256(json.dumps(legacy, sort_keys=True, default=str).encode()).hexdigest()[:10]
    assert cfg.fingerprint() == expected
    assert RunConfig(val_fraction=0.1).fingerprint() != expected
    assert RunConfig(recipe="tuned").fingerprint() != expected
    assert RunConfig(algorithm_options={"rank": 4}).fingerprint() != expected
    assert RunConfig(faults={"drop": 0.1}).fingerprint() != expected


# -- the selection rule ------------------------------------------------------------------------
def trials(rows):
    base = {"cell": "c", "task": "t", "algorithm": "choco", "compressor": "sign", "topology": "ring", "nodes": 4,
            "data": "shuffle", "weight_decay": 0.0, "gamma": 0.5, "momentum": 0.0, "epochs": 1.0,
            "val_fraction": 0.1, "val_ppl": math.nan}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_selection_takes_the_best_validation_accuracy_and_breaks_ties_by_loss():
    table = select(trials([
        {"trial": "a", "lr": 0.01, "status": "completed", "val_acc": 0.70, "val_loss": 0.9},
        {"trial": "b", "lr": 0.10, "status": "completed", "val_acc": 0.80, "val_loss": 0.7},
        {"trial": "c", "lr": 0.30, "status": "completed", "val_acc": 0.80, "val_loss": 0.6},
        {"trial": "d", "lr": 3.00, "status": "diverged", "val_acc": 0.95, "val_loss": 1e9},
    ]))
    assert table["selected"].sum() == 1
    assert table.loc[table["selected"], "trial"].item() == "c"  # d scored higher but diverged
    assert set(table["criterion"]) == {"val_acc"}


def test_selection_averages_the_tuning_seeds_of_a_grid_point_and_avoids_unstable_ones():
    table = select(trials([
        {"trial": "lr=0.1_s0", "lr": 0.1, "status": "completed", "val_acc": 0.90, "val_loss": 0.5},
        {"trial": "lr=0.1_s1", "lr": 0.1, "status": "completed", "val_acc": 0.50, "val_loss": 0.9},
        {"trial": "lr=0.03_s0", "lr": 0.03, "status": "completed", "val_acc": 0.75, "val_loss": 0.7},
        {"trial": "lr=0.03_s1", "lr": 0.03, "status": "completed", "val_acc": 0.75, "val_loss": 0.7},
        {"trial": "lr=0.3_s0", "lr": 0.3, "status": "completed", "val_acc": 0.95, "val_loss": 0.4},
        {"trial": "lr=0.3_s1", "lr": 0.3, "status": "diverged", "val_acc": 0.10, "val_loss": 1e9},
    ]))
    # the single best trial (lr 0.3) has a diverged seed; lr 0.1's mean (0.70) is below lr 0.03's (0.75)
    assert sorted(table.loc[table["selected"], "trial"]) == ["lr=0.03_s0", "lr=0.03_s1"]


def test_selection_by_perplexity_or_loss_prefers_lower():
    ppl = trials([{"trial": "a", "lr": 1, "status": "completed", "val_acc": math.nan, "val_ppl": 120.0, "val_loss": 4.8},
                  {"trial": "b", "lr": 2, "status": "completed", "val_acc": math.nan, "val_ppl": 90.0, "val_loss": 4.5}])
    assert select(ppl).loc[lambda t: t["selected"], "trial"].item() == "b"
    loss = trials([{"trial": "a", "lr": 1, "status": "completed", "val_acc": math.nan, "val_loss": 0.3},
                   {"trial": "b", "lr": 2, "status": "completed", "val_acc": math.nan, "val_loss": 0.2}])
    assert select(loss).loc[lambda t: t["selected"], "trial"].item() == "b"


def test_when_every_point_diverged_the_longest_lived_is_taken_and_said_so(tmp_path, capsys):
    """ECD at 4-bit QSGD diverges at every learning rate, as in the paper: its final runs still run (and
    diverge), so the table says "diverges" instead of the pipeline stopping."""
    table = select(trials([
        {"trial": "a", "lr": 1.0, "status": "diverged", "epochs_done": 1.0, "val_acc": 0.1, "val_loss": 1e9},
        {"trial": "b", "lr": 0.1, "status": "diverged", "epochs_done": 3.0, "val_acc": 0.1, "val_loss": 1e9},
        {"trial": "c", "lr": 0.03, "status": "diverged", "epochs_done": 3.0, "val_acc": 0.1, "val_loss": 1e9},
    ]))
    assert table.loc[table["selected"], "trial"].tolist() == ["c"] and table.attrs["all_diverged"]
    with pytest.raises(SelectionError, match="failed or unfinished"):
        select(trials([{"trial": "a", "lr": 9, "status": "failed", "val_acc": 0.1, "val_loss": 1e9}]))


def test_select_command_on_a_missing_directory_is_exit_2(tmp_path, capsys):
    assert tune_main(["select", str(tmp_path / "nope"), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "not found" in capsys.readouterr().err
    assert not (tmp_path / "x.yaml").exists()


# -- sensitivity -------------------------------------------------------------------------------
def test_sensitivity_slices_through_the_selected_point(tmp_path):
    rows = []
    for lr in (0.01, 0.1, 1.0):
        for gamma in (0.1, 1.0):
            acc = 0.5 + 0.2 * (lr == 0.1) + 0.1 * (gamma == 1.0)
            rows.append({"trial": f"{lr}_{gamma}", "lr": lr, "gamma": gamma, "status": "completed",
                         "val_acc": acc, "val_loss": 1 - acc})
    rows[-1].update(status="diverged")  # lr 1, γ 1
    table = select(trials(rows))
    from analysis.labels import with_methods

    by_lr = sensitivity_slice(with_methods(table), "lr")
    # the slice holds γ at its selected value (1.0): three learning rates, the diverged one marked
    assert by_lr["value"].tolist() == [0.01, 0.1, 1.0]
    assert by_lr["mean"].iloc[:2].round(6).tolist() == [0.6, 0.8] and math.isnan(by_lr["mean"].iloc[2])
    assert by_lr["diverged"].tolist() == [0, 0, 1] and by_lr["selected"].tolist() == [False, True, False]
    by_gamma = sensitivity_slice(with_methods(table), "gamma")
    assert by_gamma["mean"].round(6).tolist() == [0.7, 0.8]  # at lr = 0.1
    paths = plot_sensitivity(table, tmp_path / "sensitivity")
    assert all(p.stat().st_size > 0 for p in paths)



def test_sensitivity_draws_each_method_in_its_look(tmp_path, monkeypatch):
    from matplotlib.colors import to_rgba

    from analysis import labels
    from analysis.figures import sensitivity

    rows = [{"trial": f"{lr}", "lr": lr, "status": "completed", "val_acc": 0.5 + 0.1 * (lr == 0.1),
             "val_loss": 0.5} for lr in (0.01, 0.1, 1.0)]
    table = pd.concat([select(trials(rows)), select(trials(rows).assign(cell="d", algorithm="dpsgd",
                                                                         compressor="none"))])
    kept = []
    monkeypatch.setattr(sensitivity, "save_figure", lambda fig, out_stem: kept.append(fig) or [])
    plot_sensitivity(table, tmp_path / "s")
    ax = kept[0].axes[0]
    for algorithm, compressor in (("choco", "sign"), ("dpsgd", "none")):
        method = labels.method_label(algorithm, compressor)
        look = labels.style(method)
        line = next(line for line in ax.get_lines() if line.get_label() == method)
        assert (to_rgba(line.get_color()), line.get_marker(), line.get_linestyle()) == \
            (to_rgba(look["color"]), look["marker"], look["linestyle"])
    legend = [t.get_text() for t in kept[0].legends[0].get_texts()]
    assert legend[:2] == sorted(legend[:2], key=labels.method_sort_key) and "selected" in legend


# -- end to end --------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_tuned_study_selects_on_validation_and_its_final_runs_use_the_winner(tmp_path):
    env_path = f"{Path(sys.executable).parent}"
    import os

    env = {**os.environ, "PATH": f"{env_path}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--cores", "2",
                           "--configfile", str(ROOT / "config/test-tune.yaml"), "--directory", str(tmp_path)],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = tmp_path / "results" / "test-tune"
    table = pd.read_csv(study / "tuned.csv")
    cells = ["allreduce-none_ring4", "cedas-qsgd16_ring4", "choco-sign_ring4"]
    assert sorted(table["cell"].unique()) == cells  # dpsgd: lr by hand
    assert len(table) == 2 + 4 + 4  # allreduce: 2 learning rates; choco: 2 learning rates x 2 γ; cedas: x 2 copy steps
    assert (table["val_fraction"] == 0.2).all()
    diverged = table[table["lr"] == 500]
    assert (diverged["status"] == "diverged").all() and not diverged["selected"].any()
    assert table.groupby("cell")["selected"].sum().tolist() == [1, 1, 1]
    assert table.equals(study_table(study))
    assert table.loc[table["cell"] != "cedas-qsgd16_ring4", "copy_step"].isna().all()  # only CEDAS has the knob
    for cell in cells:
        chosen = yaml.safe_load((study / "tuned" / f"{cell}.yaml").read_text())
        best = table[(table["cell"] == cell) & table["selected"]].iloc[0]
        assert chosen["lr"] == best["lr"]
        for seed in (0,):
            config = json.loads((study / "runs" / f"{cell}_s{seed}" / "run.json").read_text())["config"]
            assert config["lr"] == chosen["lr"] and config["val_fraction"] == 0.0  # final runs: full training set
            assert config["epochs"] == 2  # trials ran 0.5 x the epochs
            if cell.startswith("choco"):
                assert config["algorithm_options"]["gamma"] == chosen["gamma"] == best["gamma"]  # the method's knob
            if cell.startswith("cedas"):  # a knob the method declares tunable, searched and used like γ
                assert config["algorithm_options"] == {"copy_step": chosen["copy_step"]} and "gamma" not in chosen
                assert chosen["copy_step"] == best["copy_step"]
    by_hand = json.loads((study / "runs" / "dpsgd-none_ring4_lr=0.2_s0" / "run.json").read_text())["config"]
    assert by_hand["lr"] == 0.2 and not (study / "tuned" / "dpsgd-none_ring4_lr=0.2.yaml").exists()
    assert (study / "figures" / "sensitivity.png").stat().st_size > 0
    report = (study / "report.md").read_text()
    assert "## Tuning" in report and "| choco-sign\\_ring4 | lr = " in report  # names as Markdown text


# -- successive halving ------------------------------------------------------------------------
def _fake_trainer(accuracy, calls):
    """A stand-in for `bench run`: writes the run directory a trial would, its validation accuracy at each
    epoch given by ``accuracy(lr, epoch)``; a run continued to a later stop_at keeps its earlier points."""
    from analysis_fixtures import make_run

    def run(command, settings, out):
        assert command == ["python", "-m", "bench", "run"]
        lr, full = float(settings["lr"]), 8.0
        stop = float(settings.get("stop_at", full))
        calls.append((out.name, stop))
        points = [{"epoch": e, "val_acc": accuracy(lr, e), "val_loss": 1 - accuracy(lr, e)}
                  for e in (0.0, 1.0, 2.0, 4.0, 8.0) if e <= stop]
        make_run(out, lr=lr, epochs=full, val_fraction=0.1, status="completed" if stop >= full else "paused",
                 epochs_points=points)
        return 0

    return run


def _plan(tmp_path, lrs):
    return {"cell": "c", "dir": str(tmp_path / "tune" / "c"), "rungs": [2.0, 4.0, 8.0], "keep": 1 / 3,
            "trials": {f"lr={lr}_s0": {"command": ["python", "-m", "bench", "run"], "settings": {"lr": lr}}
                       for lr in lrs}}


def _in_process_rank(cell_dir, at):
    from analysis.tuning import rank, read_trials

    return rank(read_trials(cell_dir), at)


def test_halving_chooses_on_the_full_budget_not_the_first_rung(tmp_path):
    """Small learning rates lead early and large ones overtake them (the bias of a single short rung):
    halving keeps a third of the points at each rung and chooses on the full schedule."""
    from bench.pipeline.halving import halve

    def accuracy(lr, epoch):  # lr 0.1 leads at 2 epochs, lr 0.3 from 4 on (not at the edge of the grid)
        return {0.03: 0.50, 0.1: 0.60, 0.3: 0.55, 1.0: 0.30}[lr] + epoch * {0.03: 0.0, 0.1: 0.01, 0.3: 0.03, 1.0: 0.0}[lr]

    calls = []
    record = halve(_plan(tmp_path, [0.03, 0.1, 0.3, 1.0]), run=_fake_trainer(accuracy, calls), rank=_in_process_rank)
    assert [r["trials"] for r in record["rungs"]] == [["lr=0.03_s0", "lr=0.1_s0", "lr=0.3_s0", "lr=1.0_s0"],
                                                      ["lr=0.1_s0", "lr=0.3_s0"], ["lr=0.3_s0"]]
    assert calls[:4] == [(f"lr={lr}_s0", 2.0) for lr in (0.03, 0.1, 0.3, 1.0)]
    assert calls[4:] == [("lr=0.1_s0", 4.0), ("lr=0.3_s0", 4.0), ("lr=0.3_s0", 8.0)]
    table = select(read_trials(tmp_path / "tune" / "c"))
    # the full budget decides: lr 0.3, where the first rung alone would have taken lr 0.1
    assert table.loc[table["selected"], "trial"].tolist() == ["lr=0.3_s0"]
    assert json.loads((tmp_path / "tune" / "c" / "halving.json").read_text())["rungs"][0]["epochs"] == 2.0
    assert not record["extended"]


def test_halving_continues_the_late_winner_and_extends_a_grid_at_its_edge_once(tmp_path):
    from bench.pipeline.halving import halve

    def accuracy(lr, epoch):  # at 2 epochs lr 0.03 leads; from 4 on, the larger the better (past the grid too)
        return 0.5 + (0.05 if lr == 0.03 else 0.0) * (epoch <= 2) + min(lr, 3.0) * 0.01 * epoch

    calls = []
    record = halve(_plan(tmp_path, [0.01, 0.03, 0.1, 0.3, 1.0, 0.003]), run=_fake_trainer(accuracy, calls),
                   rank=_in_process_rank)
    assert record["rungs"][1]["trials"] == ["lr=0.03_s0", "lr=1.0_s0"]  # the best third after the first rung
    assert record["rungs"][2]["trials"] == ["lr=1.0_s0"]
    (edge,) = record["extended"]
    assert edge["knob"] == "lr" and edge["value"] == 1.0 and edge["extend_to"] == 3.33
    assert calls[-1][1] == 8.0 and calls[-1][0].endswith("-ext3.33")  # straight to the full schedule, once
    table = select(read_trials(tmp_path / "tune" / "c"))
    assert table.loc[table["selected"], "lr"].item() == 3.33
    # the report: the winner on the full schedule, its neighbours with the budget they reached, the rungs
    assert tune_main(["table", str(tmp_path)]) == 0
    from analysis.tuning import tuning_markdown

    row = next(line for line in tuning_markdown(tmp_path).splitlines() if line.startswith("| c |"))
    cells = [c.strip() for c in row.split("|")]
    assert cells[2] == "lr = 3.33" and cells[3] == f"{accuracy(3.33, 8):.4g}"
    assert cells[4] == f"lr 1: {accuracy(1.0, 8):.4g}"  # its one neighbour (the grid's old edge)
    assert cells[5] == "6@2 → 2@4 → 1@8; lr 1 at the grid's edge, extended to 3.33"


def test_rank_lists_only_points_that_reached_the_rung(tmp_path):
    from analysis.tuning import rank

    table = trials([
        {"trial": "a", "lr": 0.1, "status": "paused", "epochs_done": 2.0, "val_acc": 0.9, "val_loss": 0.1},
        {"trial": "b", "lr": 0.3, "status": "completed", "epochs_done": 8.0, "val_acc": 0.7, "val_loss": 0.3},
        {"trial": "c", "lr": 1.0, "status": "diverged", "epochs_done": 8.0, "val_acc": 0.95, "val_loss": 1e9},
    ])
    assert [r["trials"] for r in rank(table, 2.0)["ranking"]] == [["a"], ["b"]]
    assert [r["trials"] for r in rank(table, 8.0)["ranking"]] == [["b"]]


def test_a_plain_trial_runs_in_process_and_a_bad_one_is_a_status_not_a_crash(tmp_path, monkeypatch):
    import types

    from bench.pipeline import halving

    refuse = types.SimpleNamespace(run=lambda *a, **k: pytest.fail("a plain trial must not start a process"))
    monkeypatch.setattr(halving, "subprocess", refuse)
    command, settings = ["python", "-m", "bench", "run"], {"task": "lsq", "nodes": 4, "epochs": 1, "quiet": True}
    assert halving._run(command, {**settings, "stop_at": 0.5}, tmp_path / "t") == 0
    assert json.loads((tmp_path / "t" / "run.json").read_text())["status"] == "paused"
    assert halving._run(command, {**settings, "lr": -1}, tmp_path / "bad") == 2
    assert not (tmp_path / "bad" / "run.json").exists()
