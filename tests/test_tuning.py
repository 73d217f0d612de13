"""The tuning stage: the validation split, the selection rule, the sensitivity slices, successive halving,
and a tuned study end to end through the pipeline."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from analysis.figures.sensitivity import plot_sensitivity, sensitivity_slice
from analysis.tuning import SelectionError, rank, read_trials, select, study_table, tuning_markdown
from analysis.tuning import main as tune_main
from bench.run.config import RunConfig
from bench.tasks import TaskSetup, make_task
from bench.tasks.supervised import validation_split

ROOT = Path(__file__).resolve().parents[1]
TINY = {"n_train": 200, "n_test": 50}
NAN = math.nan


# -- the validation split ----------------------------------------------------------------------
def test_validation_split_is_disjoint_complete_and_fixed():
    keep, held = validation_split(1000, 0.1)
    assert (len(held), len(keep)) == (100, 900) and set(keep.tolist()).isdisjoint(held.tolist())
    assert sorted(keep.tolist() + held.tolist()) == list(range(1000))
    again_keep, again_held = validation_split(1000, 0.1)
    assert torch.equal(held, again_held) and torch.equal(keep, again_keep)
    assert len(validation_split(10, 0.01)[1]) == 1  # at least one example held out


def test_a_task_with_validation_trains_on_the_rest_and_reports_val_metrics():
    plain = make_task("mnist1d-mlp", TaskSetup(n_workers=2, batch_size=10, seed=0, options=TINY))
    tuned = make_task("mnist1d-mlp", TaskSetup(n_workers=2, batch_size=10, seed=3, val_fraction=0.25, options=TINY))
    assert plain.train_size == 200 and tuned.train_size == 150
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
    # a synthetic task drops the sub-optimality it could not measure
    task = make_task("lsq", TaskSetup(n_workers=2, batch_size=10, val_fraction=0.2))
    metrics = task.evaluate(task.init_params()[0])
    assert "val_loss" in metrics and math.isnan(metrics["val_acc"]) and "train_subopt" not in metrics


def test_settings_added_later_make_another_run_only_when_set():
    # at their defaults they leave every earlier run id alone (pinned: test_run_config_types.py)
    default = RunConfig().fingerprint()
    for later in ({"val_fraction": 0.1}, {"recipe": "tuned"}, {"algorithm_options": {"rank": 4}}, {"faults": {"drop": 0.1}}):
        assert RunConfig(**later).fingerprint() != default, later


# -- the selection rule ------------------------------------------------------------------------
def trials(rows):
    base = {"cell": "c", "task": "t", "algorithm": "choco", "compressor": "sign", "topology": "ring", "nodes": 4,
            "data": "shuffle", "weight_decay": 0.0, "gamma": 0.5, "momentum": 0.0, "epochs": 1.0,
            "val_fraction": 0.1, "val_ppl": NAN}
    return pd.DataFrame([{**base, **r} for r in rows])


def trial(name, lr, status, val_acc, val_loss, **kw):
    return {"trial": name, "lr": lr, "status": status, "val_acc": val_acc, "val_loss": val_loss, **kw}


@pytest.mark.parametrize("rows, chosen", [
    # the best validation accuracy, ties broken by loss; d scored higher but diverged
    ([trial("a", 0.01, "completed", 0.70, 0.9), trial("b", 0.1, "completed", 0.80, 0.7),
      trial("c", 0.3, "completed", 0.80, 0.6), trial("d", 3.0, "diverged", 0.95, 1e9)], ["c"]),
    # the mean over a point's tuning seeds: lr 0.3 has a diverged seed, lr 0.1's mean (0.70) is below lr 0.03's
    ([trial("lr=0.1_s0", 0.1, "completed", 0.90, 0.5), trial("lr=0.1_s1", 0.1, "completed", 0.50, 0.9),
      trial("lr=0.03_s0", 0.03, "completed", 0.75, 0.7), trial("lr=0.03_s1", 0.03, "completed", 0.75, 0.7),
      trial("lr=0.3_s0", 0.3, "completed", 0.95, 0.4), trial("lr=0.3_s1", 0.3, "diverged", 0.10, 1e9)],
     ["lr=0.03_s0", "lr=0.03_s1"]),
    # perplexity, then loss, where there is no accuracy: lower is better
    ([trial("a", 1, "completed", NAN, 4.8, val_ppl=120.0), trial("b", 2, "completed", NAN, 4.5, val_ppl=90.0)], ["b"]),
    ([trial("a", 1, "completed", NAN, 0.3), trial("b", 2, "completed", NAN, 0.2)], ["b"]),
    # every point diverged (ECD at 4-bit QSGD, as in the paper): the longest-lived, the smaller lr among equals
    ([trial("a", 1.0, "diverged", 0.1, 1e9, epochs_done=1.0), trial("b", 0.1, "diverged", 0.1, 1e9, epochs_done=3.0),
      trial("c", 0.03, "diverged", 0.1, 1e9, epochs_done=3.0)], ["c"]),
])
def test_selection_rule(rows, chosen):
    table = select(trials(rows))
    assert sorted(table.loc[table["selected"], "trial"]) == chosen
    assert table.attrs.get("all_diverged", False) == all(r["status"] == "diverged" for r in rows)


def test_nothing_to_select_is_an_error_and_exit_2(tmp_path, capsys):
    with pytest.raises(SelectionError, match="failed or unfinished"):
        select(trials([trial("a", 9, "failed", 0.1, 1e9)]))
    assert tune_main(["select", str(tmp_path / "nope"), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "not found" in capsys.readouterr().err and not (tmp_path / "x.yaml").exists()


# -- sensitivity -------------------------------------------------------------------------------
def test_sensitivity_slices_through_the_selected_point_and_names_each_method_as_its_runs_do(tmp_path, monkeypatch):
    from analysis import labels
    from analysis.figures import sensitivity
    from analysis.labels import with_methods
    from figure_probe import kept_figures

    rows = [trial(f"{lr}_{gamma}", lr, "completed", 0.5 + 0.2 * (lr == 0.1) + 0.1 * (gamma == 1.0), 0.5, gamma=gamma)
            for lr in (0.01, 0.1, 1.0) for gamma in (0.1, 1.0)]
    rows[-1].update(status="diverged")  # lr 1, γ 1
    table = select(trials(rows))
    by_lr = sensitivity_slice(with_methods(table), "lr")
    # the slice holds γ at its selected value (1.0): three learning rates, the diverged one marked
    assert by_lr["value"].tolist() == [0.01, 0.1, 1.0]
    assert by_lr["mean"].iloc[:2].round(6).tolist() == [0.6, 0.8] and math.isnan(by_lr["mean"].iloc[2])
    assert by_lr["diverged"].tolist() == [0, 0, 1] and by_lr["selected"].tolist() == [False, True, False]
    assert sensitivity_slice(with_methods(table), "gamma")["mean"].round(6).tolist() == [0.7, 0.8]  # at lr = 0.1
    assert [p.suffix for p in plot_sensitivity(table, tmp_path / "sensitivity") if p.stat().st_size] == [".png", ".pdf"]
    # the study's runs unread: display names from a trial's run.json, never the registry's "choco (sign)" (each
    # method in its colour and marker, legends in order: tests/test_figure_catalog.py)
    rows = [trial(f"{lr}", lr, "completed", 0.5 + 0.1 * (lr == 0.1), 0.5) for lr in (0.01, 0.1, 1.0)]
    kept = kept_figures(monkeypatch, sensitivity)
    labels.reset()
    select(trials(rows)).to_csv(tmp_path / "tuned.csv", index=False)
    (tmp_path / "tune" / "c" / "t").mkdir(parents=True)
    (tmp_path / "tune" / "c" / "t" / "run.json").write_text(json.dumps({"algorithm": {"label": "Choco-SGD"}}))
    sensitivity.draw(tmp_path, None, None, tmp_path / "s")
    assert [t.get_text() for t in kept[0].legends[0].get_texts()][0] == "Choco-SGD (sign)"


# -- end to end --------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_tuned_study_selects_on_validation_and_its_final_runs_use_the_winner(tmp_path):
    """config/test-tune.yaml with the two cells that tune a method's knob beside the lr (γ, CEDAS's copy step) and
    the one whose lr is given, on a smaller data set."""
    from shared_studies import snakemake

    config = yaml.safe_load((ROOT / "config/test-tune.yaml").read_text())
    config["blocks"]["tuned"]["method"] = ["choco/sign", "cedas/qsgd:16"]
    config["defaults"]["task_options"] = {"n_train": 200, "n_test": 50}
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(config))
    snakemake("--cores", "2", "--configfile", str(tmp_path / "tune.yaml"), "--directory", str(tmp_path))
    study = tmp_path / "results" / "test-tune"
    table = pd.read_csv(study / "tuned.csv")
    cells = ["cedas-qsgd16_ring4", "choco-sign_ring4"]
    assert sorted(table["cell"].unique()) == cells  # dpsgd: lr by hand
    assert len(table) == 4 + 4  # choco: 2 learning rates x 2 γ; cedas: x 2 copy steps
    assert (table["val_fraction"] == 0.2).all() and table.equals(study_table(study))
    diverged = table[table["lr"] == 500]
    assert (diverged["status"] == "diverged").all() and not diverged["selected"].any()
    assert table.groupby("cell")["selected"].sum().tolist() == [1, 1]
    assert table.loc[table["cell"] != "cedas-qsgd16_ring4", "copy_step"].isna().all()  # only CEDAS has the knob
    for cell in cells:
        chosen = yaml.safe_load((study / "tuned" / f"{cell}.yaml").read_text())
        best = table[(table["cell"] == cell) & table["selected"]].iloc[0]
        config = json.loads((study / "runs" / f"{cell}_s0" / "run.json").read_text())["config"]
        assert config["lr"] == chosen["lr"] == best["lr"] and config["val_fraction"] == 0.0  # full training set
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
def halve(tmp_path, lrs, accuracy):
    """Successive halving of one cell over ``lrs``, each trial a stand-in for `bench run` whose validation
    accuracy at each epoch is ``accuracy(lr, epoch)`` (a run continued to a later stop_at keeps its earlier
    points); returns halving's record and the (trial, stop_at) of each call."""
    from analysis_fixtures import make_run
    from bench.pipeline.halving import halve

    calls = []

    def run(command, settings, out):
        assert command == ["python", "-m", "bench", "run"]
        lr, stop = float(settings["lr"]), float(settings.get("stop_at", 8.0))
        calls.append((out.name, stop))
        points = [{"epoch": e, "val_acc": accuracy(lr, e), "val_loss": 1 - accuracy(lr, e)}
                  for e in (0.0, 1.0, 2.0, 4.0, 8.0) if e <= stop]
        make_run(out, lr=lr, epochs=8.0, val_fraction=0.1, status="completed" if stop >= 8 else "paused",
                 epochs_points=points)
        return 0

    plan = {"cell": "c", "dir": str(tmp_path / "tune" / "c"), "rungs": [2.0, 4.0, 8.0], "keep": 1 / 3,
            "trials": {f"lr={lr}_s0": {"command": ["python", "-m", "bench", "run"], "settings": {"lr": lr}}
                       for lr in lrs}}
    record = halve(plan, run=run, rank=lambda cell_dir, at: rank(read_trials(cell_dir), at))
    table = select(read_trials(tmp_path / "tune" / "c"))
    return record, calls, table.loc[table["selected"]]


def test_halving_chooses_on_the_full_budget_not_the_first_rung(tmp_path):
    """Small learning rates lead early and large ones overtake them (the bias of a single short rung):
    halving keeps a third of the points at each rung and chooses on the full schedule."""
    def accuracy(lr, epoch):  # lr 0.1 leads at 2 epochs, lr 0.3 from 4 on (not at the edge of the grid)
        return {0.03: 0.50, 0.1: 0.60, 0.3: 0.55, 1.0: 0.30}[lr] + epoch * {0.03: 0.0, 0.1: 0.01, 0.3: 0.03, 1.0: 0.0}[lr]

    record, calls, chosen = halve(tmp_path, [0.03, 0.1, 0.3, 1.0], accuracy)
    assert [r["trials"] for r in record["rungs"]] == [["lr=0.03_s0", "lr=0.1_s0", "lr=0.3_s0", "lr=1.0_s0"],
                                                      ["lr=0.1_s0", "lr=0.3_s0"], ["lr=0.3_s0"]]
    assert calls == [(f"lr={lr}_s0", 2.0) for lr in (0.03, 0.1, 0.3, 1.0)] + [
        ("lr=0.1_s0", 4.0), ("lr=0.3_s0", 4.0), ("lr=0.3_s0", 8.0)]
    # the full budget decides: lr 0.3, where the first rung alone would have taken lr 0.1
    assert chosen["trial"].tolist() == ["lr=0.3_s0"] and not record["extended"]
    assert json.loads((tmp_path / "tune" / "c" / "halving.json").read_text())["rungs"][0]["epochs"] == 2.0


def test_halving_continues_the_late_winner_and_extends_a_grid_at_its_edge_once(tmp_path):
    def accuracy(lr, epoch):  # at 2 epochs lr 0.03 leads; from 4 on, the larger the better (past the grid too)
        return 0.5 + (0.05 if lr == 0.03 else 0.0) * (epoch <= 2) + min(lr, 3.0) * 0.01 * epoch

    record, calls, chosen = halve(tmp_path, [0.01, 0.03, 0.1, 0.3, 1.0, 0.003], accuracy)
    assert record["rungs"][1]["trials"] == ["lr=0.03_s0", "lr=1.0_s0"]  # the best third after the first rung
    assert record["rungs"][2]["trials"] == ["lr=1.0_s0"]
    (edge,) = record["extended"]
    assert (edge["knob"], edge["value"], edge["extend_to"]) == ("lr", 1.0, 3.33)
    assert calls[-1][1] == 8.0 and calls[-1][0].endswith("-ext3.33")  # straight to the full schedule, once
    assert chosen["lr"].item() == 3.33
    # the report: the winner on the full schedule, its neighbours with the budget they reached, the rungs
    assert tune_main(["table", str(tmp_path)]) == 0
    row = next(line for line in tuning_markdown(tmp_path).splitlines() if line.startswith("| c |"))
    assert [c.strip() for c in row.split("|")][2:6] == [
        "lr = 3.33", f"{accuracy(3.33, 8):.4g}", f"lr 1: {accuracy(1.0, 8):.4g}",  # its one neighbour: the old edge
        "6@2 → 2@4 → 1@8; lr 1 at the grid's edge, extended to 3.33"]


def test_rank_lists_only_points_that_reached_the_rung():
    table = trials([trial("a", 0.1, "paused", 0.9, 0.1, epochs_done=2.0), trial("b", 0.3, "completed", 0.7, 0.3,
                                                                                 epochs_done=8.0),
                    trial("c", 1.0, "diverged", 0.95, 1e9, epochs_done=8.0)])
    assert [r["trials"] for r in rank(table, 2.0)["ranking"]] == [["a"], ["b"]]
    assert [r["trials"] for r in rank(table, 8.0)["ranking"]] == [["b"]]


def test_a_trial_stopped_at_its_rung_is_paused_and_a_bad_one_is_a_status_not_a_crash(tmp_path):
    from bench.pipeline import halving

    command, settings = ["python", "-m", "bench", "run"], {"task": "lsq", "nodes": 4, "epochs": 1, "quiet": True}
    assert halving._run(command, {**settings, "stop_at": 0.5}, tmp_path / "t") == 0
    assert json.loads((tmp_path / "t" / "run.json").read_text())["status"] == "paused"
    assert halving._run(command, {**settings, "lr": -1}, tmp_path / "bad") == 2
    assert not (tmp_path / "bad" / "run.json").exists()
