"""`bench perf` (at its --quick sizes): the JSON it writes, the training-step benchmarks (f) and the CPU
target (g), and `analysis regress` on two of them."""
import contextlib
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from bench.cli import main
from bench.perf import GROUPS, cpu_target, sizes_for, training


pytestmark = pytest.mark.slow  # runs `bench perf` itself: `make test` runs it, `make test-fast` does not


@pytest.fixture(scope="module")
def perf_json(tmp_path_factory):
    out, said = tmp_path_factory.mktemp("perf"), io.StringIO()
    with contextlib.redirect_stdout(said):  # in this process, one thread as `bench track` runs it (conftest)
        assert main(["perf", "--quick", "--name", "base", "--out-dir", str(out)]) == 0
    assert "b.round_vs_copy_sign" in said.getvalue() and "wrote" in said.getvalue()
    return out / "base.json"


def test_perf_json_has_every_group_with_spread_machine_sizes_units_and_targets(perf_json):
    result = json.loads(perf_json.read_text())
    assert {"machine", "sizes", "figures"} <= set(result) and result["machine"]["torch"]
    figures = result["figures"]
    assert {name.split(".")[0] for name in figures} == set(GROUPS) - {"h"}  # h: the peers, with their Pythons only
    for fig in figures.values():
        assert fig["min"] <= fig["median"] <= fig["max"] and fig["repeats"] >= 1 and fig["unit"]
    assert figures["a.speedup_n4"]["kind"] == "ratio" and figures["b.round_vs_copy_sign"]["median"] > 1
    assert 0 < figures["d.peak_memory"]["median"] < 8
    # f: training steps of n models against one plain model at the same total batch
    quick = training.QUICK
    for n, batch in quick["step_configs"]:
        label = f"f.{quick['step_model']}_n{n}"
        for name in ("vectorized", "loop"):
            ratio, seconds = figures[f"{label}_{name}_vs_one"], figures[f"{label}_{name}_s"]
            assert ratio["kind"] == "ratio" and ratio["unit"] == f"x one model at batch {n * batch}"
            assert seconds["kind"] == "absolute" and seconds["unit"] == "s/step" and seconds["median"] > 0
            assert "target" not in ratio  # the targets are GPU-only, at the paper's sizes
    assert f"f.lstm_n{quick['lstm']['n']}_vectorized_vs_one" in figures
    # g: the CPU target, its speedup and the two gradient paths' runs
    prefix = f"g.{cpu_target.QUICK['model']}_n{cpu_target.QUICK['n']}"
    speedup = figures[f"{prefix}_vectorized_speedup"]
    assert speedup["kind"] == "ratio" and speedup["higher_is_better"]
    assert "target" not in speedup  # 1.4x is stated for n = 64, batch 4: not at the quick sizes
    acc, loss = figures[f"{prefix}_run_acc_difference"], figures[f"{prefix}_run_loss_difference"]
    assert acc["target"] == 0.01 and loss["target"] == 1e-3 and not acc["higher_is_better"]
    # the two gradient paths differ by float rounding only: the targets are the benchmark's (bench track reports
    # a miss); ten training steps carry rounding further on some CPUs (loss 1.6e-3 apart on an AMD EPYC), so the
    # test asks for agreement within a few times the loss target, and the accuracy target itself
    assert acc["median"] <= 0.01 and loss["median"] <= 5e-3


def test_largest_difference_is_relative_for_losses_and_flags_a_one_sided_nan():
    a = pd.DataFrame({"loss": [2.0, math.nan, 1.0], "acc": [0.5, 0.25, 0.0]})
    b = pd.DataFrame({"loss": [2.002, math.nan, 1.0], "acc": [0.5, 0.5, 0.0]})
    assert cpu_target._largest_difference(a, b, ("loss",), relative=True) == pytest.approx(0.002 / 2.002)
    assert cpu_target._largest_difference(a, b, ("acc",), relative=False) == 0.25
    b.loc[2, "loss"] = math.nan
    assert cpu_target._largest_difference(a, b, ("loss",), relative=True) == math.inf


def test_the_quick_sizes_are_the_ones_the_committed_history_was_measured_with():
    """`bench track` measures `bench perf --quick`, and `analysis history` compares a commit only with commits
    measured at the same sizes: a change to the quick sizes (even a key added with the value it had) would leave
    `make track-check` nothing to compare with, and CI fails. Changing them on purpose means measuring the
    history again at the new sizes."""
    root = Path(__file__).resolve().parents[1] / "results" / "history"
    records = [json.loads(p.read_text()) for p in root.glob("*/*/*.json") if p.name != "machine.json"]
    measured = [r for r in records if isinstance(r.get("perf"), dict) and r["perf"].get("sizes")]
    assert measured, f"no committed perf records under {root}"
    newest = max(measured, key=lambda r: r["commit_date"])
    assert newest["perf"]["sizes"] == json.loads(json.dumps(sizes_for(torch.device("cpu"), True)))


def test_sizes_and_targets_by_device():
    cpu, gpu = sizes_for(torch.device("cpu"), False), sizes_for(torch.device("cuda"), False)
    assert gpu["step_configs"] == [[8, 128], [64, 32]] and gpu["lstm"]["hidden"] == 650
    assert cpu["step_model"] == "resnet20" and [n for n, _ in cpu["step_configs"]] == [8, 64]
    assert cpu["cpu_target"] == gpu["cpu_target"] == cpu_target.FULL
    assert training.resnet_target("resnet20", 64, 32, "cuda") == 1.5
    assert training.resnet_target("resnet20", 64, 4, "cuda") is None
    assert training.resnet_target("resnet20", 64, 32, "cpu") is None
    assert training.lstm_target(32, "cuda") == 2.0 and training.lstm_target(32, "cpu") is None
