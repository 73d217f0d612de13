"""`bench perf` (at its --quick sizes): the JSON it writes, and `analysis regress` on two of them."""
import json
import subprocess
import sys

import pytest

from bench.perf.timing import figure, ratio_figure


def test_ratio_figures_pair_repeats():
    fig = ratio_figure([2.0, 4.0, 9.0], [1.0, 2.0, 3.0], "x", False)
    assert fig["values"] == [2.0, 2.0, 3.0] and fig["median"] == 2.0 and fig["kind"] == "ratio"
    assert figure([3.0, 1.0, 2.0], "s", False, "absolute")["min"] == 1.0


@pytest.fixture(scope="module")
def perf_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("perf")
    done = subprocess.run([sys.executable, "-m", "bench", "perf", "--quick", "--name", "base", "--out-dir", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "b.round_vs_copy_sign" in done.stdout and "wrote" in done.stdout
    return out / "base.json"


def test_perf_json_has_every_group_with_spread_and_machine(perf_json):
    result = json.loads(perf_json.read_text())
    assert {"machine", "sizes", "figures"} <= set(result) and result["machine"]["torch"]
    figures = result["figures"]
    for name in ("a.sim_throughput_n4", "a.proc_throughput_n4", "a.speedup_n4", "b.round_vs_copy_sign",
                 "b.round_vs_copy_top:0.01", "b.round_vs_copy_qsgd:4", "c.overhead_choco_sign", "d.peak_memory",
                 "e.resnet20_vmap_speedup", "e.resnet20_vmap_s", "e.resnet20_loop_s"):
        fig = figures[name]
        assert fig["min"] <= fig["median"] <= fig["max"] and fig["repeats"] >= 1 and fig["unit"]
    assert figures["a.speedup_n4"]["kind"] == "ratio" and figures["b.round_vs_copy_sign"]["median"] > 1
    assert 0 < figures["d.peak_memory"]["median"] < 8


def test_regress_compares_perf_ratios(perf_json, tmp_path):
    same = subprocess.run([sys.executable, "-m", "analysis", "regress", "--baseline", str(perf_json),
                           "--current", str(perf_json)], capture_output=True, text=True)
    assert same.returncode == 0, same.stderr
    slower = json.loads(perf_json.read_text())
    fig = slower["figures"]["b.round_vs_copy_sign"]
    fig["median"] *= 2  # the round got twice as slow relative to a copy
    path = tmp_path / "slower.json"
    path.write_text(json.dumps(slower))
    caught = subprocess.run([sys.executable, "-m", "analysis", "regress", "--baseline", str(perf_json),
                             "--current", str(path)], capture_output=True, text=True)
    assert caught.returncode == 1 and "b.round_vs_copy_sign" in caught.stderr
