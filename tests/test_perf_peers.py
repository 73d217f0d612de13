"""`bench perf` group h: the harness that sets the suite against a peer library (bench/perf/peers.py; the peers'
own scripts are in benchmarks/peers/). The real peers are optional extras that this suite never installs, so a
stand-in peer plays them here: a short numpy script that reads the exported problem and runs the textbook
iteration. It checks what the harness promises: the problem it exports is the suite's run, a peer that computes
something else is refused before it is timed, each repeat gives one paired ratio, and a bench without the
checkout's scripts refuses group h in one line."""
import sys
from dataclasses import replace

import numpy as np
import pytest

from bench.cli import main
from bench.perf import peers

pytestmark = pytest.mark.slow  # runs `bench run` in fresh processes

STAND_IN = '''
import json, sys, time
import numpy as np
p = np.load(sys.argv[1])
A, b, x, W, lr, T = p["A"], p["b"], p["x0"].copy(), p["W"], float(p["lr"]), int(p["steps"])
ORDER = sys.argv[3]
t = time.perf_counter()
for _ in range(T):
    g = np.einsum("nmd,nm->nd", A, np.einsum("nmd,nd->nm", A, x) - b) / A.shape[1] + float(p["l2"]) * x
    x = W @ x - lr * g if ORDER == "paper" else W @ (x - lr * g)
json.dump({"peer": "stand-in", "x": x.tolist(), "loop_s": [time.perf_counter() - t]}, open(sys.argv[2], "w"))
'''

SMALL = peers._lsq(4, 5, 10, 30, 0.05)


def _comparison(tmp_path, order="paper"):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    return replace(peers.COMPARISONS["decent-bench"][0], name="lsq_small", sides={"": SMALL}, steps=30,
                   command=lambda python, problem, out: [python, str(script), str(problem), str(out), order])


def test_the_exported_problem_is_the_suites_run(tmp_path):
    peers._export_lsq(SMALL, tmp_path / "problem.bin")
    p = np.load(tmp_path / "problem.bin")
    assert p["A"].shape == (4, 10, 5) and p["b"].shape == (4, 10) and p["x0"].shape == (4, 5)
    W = p["W"]
    assert np.allclose(W, W.T) and np.allclose(W.sum(1), 1) and np.allclose(np.diag(W), 1 / 3)  # the ring's
    assert int(p["steps"]) == 30 and float(p["lr"]) == 0.05
    # the shards are the training set, each sample on one worker (data=split, a batch the whole shard)
    rows = {tuple(np.round(r, 6)) for r in p["A"].reshape(-1, 5)}
    assert len(rows) == 40


def test_a_peer_that_computes_the_same_iterates_is_timed_in_paired_repeats(tmp_path):
    figures = peers.compare(_comparison(tmp_path), sys.executable, repeats=2, progress=lambda *_: None)
    loop = figures["h.decent_bench_lsq_small_loop_speed"]
    assert loop["kind"] == "ratio" and loop["repeats"] == 2 and loop["higher_is_better"] and loop["target"] == 1.0
    assert loop["agreement"] < 1e-5  # float32 suite against float64 numpy
    # each ratio is its own pair's: peer time over suite time
    suite_rate, peer_rate = (figures[f"h.decent_bench_lsq_small_{side}_loop"]["values"] for side in ("suite", "peer"))
    assert loop["values"] == pytest.approx([s / p for s, p in zip(suite_rate, peer_rate)])
    assert figures["h.decent_bench_lsq_small_process_speed"]["repeats"] == 2


def test_a_peer_that_computes_something_else_is_refused_before_timing(tmp_path):
    with pytest.raises(RuntimeError, match="disagrees with the suite on lsq_small.*not timed"):
        peers.compare(_comparison(tmp_path, order="code"), sys.executable, repeats=1, progress=lambda *_: None)


def test_a_bench_without_the_checkouts_peer_scripts_refuses_group_h_in_one_line(tmp_path, capsys, monkeypatch):
    """A bench installed from a wheel has no benchmarks/ beside it: said before any runs (the other bad arguments
    of group h: tests/test_bad_input.py)."""
    monkeypatch.setattr(peers, "SCRIPTS", tmp_path / "no-checkout" / "benchmarks" / "peers")
    assert main(["perf", "--out-dir", str(tmp_path / "out"), "--peer", f"decent-bench={sys.executable}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "peers' scripts of a checkout" in err, err
    assert not (tmp_path / "out").exists()  # nothing written


def test_the_peer_scripts_are_where_group_h_runs_them():
    assert all((peers.SCRIPTS / name).is_file() for name in ("decent_bench_lsq.py", "decent_dp_mlp.py"))
