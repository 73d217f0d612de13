"""Silent wrong results and lost data (issue 13): a graph read from a file is identified by its
contents, a run directory has one writer at a time, a damaged checkpoint is kept and named, and a full disk
fails a run cleanly."""
import errno
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from analysis.load import load_runs
from bench.cli import main
from bench.compressors import make_compressor
from bench.run import resolve
from bench.run.outputs import run_directory_lock, save_checkpoint, write_json, write_metrics
from bench.algorithms import ALGORITHMS, parse_options
from bench.topology import make_topology
from hostile import LSQ as FAST, refused, temps
from test_run import SMALL

RING4 = "0 1\n1 2\n2 3\n3 0\n"
COMPLETE4 = "0 1\n0 2\n0 3\n1 2\n1 3\n2 3\n"


def _on_file(argv, path):
    """SMALL on the edge list at ``path`` (4 nodes) for one epoch."""
    argv = [*argv[: argv.index("--topology") + 1], f"file:{path}", *argv[argv.index("--topology") + 2:]]
    return [*argv[: argv.index("--epochs") + 1], "1", *argv[argv.index("--epochs") + 2:]]


# ---- 1. a file topology is its contents, not its path ---------------------------------------
def test_an_edited_edge_list_is_another_run_and_the_same_graph_written_otherwise_is_not(tmp_path):
    edges = tmp_path / "edges.txt"
    edges.write_text(RING4)
    flags = {"topology": f"file:{edges}", "nodes": 4}
    ring = resolve({}, flags, {}).run_id()
    edges.write_text(COMPLETE4)
    complete = resolve({}, flags, {}).run_id()
    assert ring != complete and ring.split("_")[:-1] == complete.split("_")[:-1]
    # order, direction, duplicates and comments do not make another graph
    edges.write_text("# a ring\n3 0\n2 1\n1 0   # both ways\n0 1\n3 2\n")
    assert resolve({}, flags, {}).run_id() == ring


# the defaults these ids were first written under (the optimizer and local-model defaults changed since)
EARLIER = {"momentum": 0.0, "nesterov": False, "weight_decay": 0.0, "eval_local_workers": 4}


def test_run_ids_of_built_in_topologies_are_unchanged():
    # committed results and analysis name runs by these ids: the same settings keep their id
    assert resolve(EARLIER, {}, {}).run_id() == "mnist1d-mlp_choco_none_ring8_s0_6abe63a883"
    assert (resolve(EARLIER, {"topology": "torus", "nodes": 16, "compressor": "top:0.01"}, {}).run_id()
            == "mnist1d-mlp_choco_top0.01_torus16_s0_0f0ad0206f")
    assert (resolve(EARLIER, {"topology": "erdos-renyi:0.3", "nodes": 8, "seed": 2}, {}).run_id()
            == "mnist1d-mlp_choco_none_erdos-renyi0.38_s2_49eaec5829")


def test_two_graphs_at_one_path_are_two_runs_not_one_already_completed(tmp_path, capsys):
    edges = tmp_path / "edges.txt"
    edges.write_text(RING4)
    assert main(["run", *_on_file(SMALL, edges), "--out", str(tmp_path / "results" / "a")]) == 0
    edges.write_text(COMPLETE4)  # the finished ring's folder is no finished run of this graph
    refused(main, ["run", *_on_file(SMALL, edges), "--out", str(tmp_path / "results" / "a")], capsys, "other settings")
    assert main(["run", *_on_file(SMALL, edges), "--out", str(tmp_path / "results" / "b")]) == 0
    runs = load_runs(tmp_path / "results")
    assert len(runs.runs) == 2 and not runs.problems
    assert sorted(runs.runs["spectral_gap"].round(6)) == [round(2 / 3, 6), 1.0]
    digests = {json.loads((tmp_path / "results" / d / "run.json").read_text())["topology"]["digest"] for d in "ab"}
    assert len(digests) == 2
    # and two cells (one seed each), each named by the graph it ran on, not merged under one path
    assert sorted(runs.runs["topology"]) == sorted(f"file:{edges}#{d}" for d in digests)
    assert runs.runs["cell"].nunique() == 2


def test_runs_differing_only_in_bookkeeping_are_one_seed_not_two(tmp_path):
    """Two runs of one cell and seed that evaluated at other intervals are one experiment: analysis
    keeps the finer one, says which it skipped and why, and regress compares seed with seed."""
    from analysis import cli as analysis_cli
    from analysis_fixtures import make_run

    fine = [{"epoch": e / 2, "test_acc": 0.1 + 0.1 * e} for e in range(5)]
    make_run(tmp_path / "r" / "coarse", seed=1, eval_every=1.0)
    make_run(tmp_path / "r" / "fine", seed=1, eval_every=0.5, epochs_points=fine)
    make_run(tmp_path / "r" / "other-seed", seed=2, eval_every=1.0)
    runs = load_runs(tmp_path / "r")
    assert sorted(runs.runs["seed"]) == [1, 2] and runs.runs["cell"].nunique() == 1
    assert runs.runs.set_index("seed").loc[1, "path"].endswith("fine")
    (path, why), = runs.problems
    assert path.endswith("coarse") and "differs only in eval_every" in why and why.endswith("skipped")
    base = tmp_path / "base.json"
    assert analysis_cli.main(["baseline", str(tmp_path / "r"), "--out", str(base), "--target-acc", "0.3"]) == 0
    assert json.loads(base.read_text())["cells"].popitem()[1]["seeds"] == [1, 2]
    assert analysis_cli.main(["regress", "--baseline", str(base), "--current", str(tmp_path / "r")]) == 0


def test_gamma_is_tuned_again_for_an_edited_edge_list(tmp_path, monkeypatch):
    import bench.algorithms.step_tuning as step_tuning

    tuned = []
    real = step_tuning.tune_gamma
    monkeypatch.setattr(step_tuning, "tune_gamma",
                        lambda topo, *a, **k: tuned.append(topo.W.copy()) or real(topo, *a, **k))
    edges = tmp_path / "edges.txt"
    compressor = make_compressor("top:0.5", contraction=True)
    gammas = []
    for text in (RING4, COMPLETE4, RING4):
        edges.write_text(text)
        cfg = resolve({}, {"topology": f"file:{edges}", "nodes": 4}, {"gamma_tune_steps": 20})
        choco = ALGORITHMS.get("choco")
        options = parse_options(choco, cfg.algorithm_options)
        gammas.append(choco.resolve_options(options, make_topology(cfg.topology, 4), compressor)[0].gamma)
    assert len(tuned) == 2 and not np.allclose(tuned[0], tuned[1])  # the ring again comes from the cache
    assert gammas[0] == gammas[2]


# ---- 2. one writer per run directory --------------------------------------------------------
def test_a_held_lock_refuses_a_dist_run_too(tmp_path, capsys):
    out = tmp_path / "run"
    with run_directory_lock(out):  # as another process holds it while it writes the run
        refused(main, ["run", *SMALL, "--out", str(out)], capsys, out, "another")
        refused(main, ["run", *SMALL, "--backend", "dist", "--out", str(out)], capsys, "another")
    assert not (out / "run.json").exists()


@pytest.mark.parametrize("damage", ["missing", "unreadable", "checkpoint only"])
def test_metrics_without_a_readable_run_json_are_refused_not_overwritten(tmp_path, capsys, damage):
    out = tmp_path / "run"
    if damage == "checkpoint only":  # another run's state, nothing else
        out.mkdir()
        (out / "checkpoint.pt").write_bytes(b"another run's state")
        kept, words = out / "checkpoint.pt", ["checkpoint.pt"]
    else:
        assert main(["run", *SMALL, "--out", str(out)]) == 0
        (out / "run.json").unlink() if damage == "missing" else (out / "run.json").write_text('{"run_id": "trunc')
        kept, words = out / "metrics.parquet", ["run.json", "metrics.parquet", "--out"]
    before = kept.read_bytes()
    capsys.readouterr()
    refused(main, ["run", *SMALL, "--out", str(out)], capsys, *words)
    assert kept.read_bytes() == before and (damage == "unreadable" or not (out / "run.json").exists())
    if damage == "checkpoint only":  # --replace-stale sets them aside, and the run starts
        assert main(["run", *SMALL, "--replace-stale", "--out", str(out)]) == 0
        (aside,) = (tmp_path / ".stale").iterdir()
        assert (aside / "checkpoint.pt").read_bytes() == before
        assert json.loads((out / "run.json").read_text())["status"] == "completed"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished FAST run, copied by the tests that damage it."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert main(["run", *FAST, "--out", str(out)]) == 0
    return out


def _checkpoint(kind: str, path: Path) -> None:
    """A damaged checkpoint at ``path`` (of a run whose run.json says running, so it is loaded)."""
    if kind in ("not a dict", "missing keys"):
        torch.save([1, 2] if kind == "not a dict" else {"fingerprint": json.loads(
            (path.parent / "run.json").read_text())["fingerprint"]}, path)
        return
    whole = io.BytesIO()
    torch.save({"fingerprint": "x", "algo": {"x": torch.zeros(4, 50)}, "counters": {"global_step": 3}}, whole)
    path.write_bytes({"empty": b"", "truncated": whole.getvalue()[:700],
                      "garbage": b"\x00\x01 not a checkpoint \xff" * 40}[kind])


@pytest.mark.parametrize("kind", ["empty", "truncated", "garbage", "not a dict", "missing keys"])
def test_a_damaged_checkpoint_names_the_file_and_how_to_restart(kind, finished_run, tmp_path, capsys):
    out = shutil.copytree(finished_run, tmp_path / "run")
    record = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**record, "status": "running"}))  # interrupted: resumed from it
    _checkpoint(kind, out / "checkpoint.pt")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    refused(main, ["run", *FAST, "--out", str(out)], capsys, out / "checkpoint.pt", "remove")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the damaged checkpoint is kept too
    (out / "checkpoint.pt").unlink()  # and, as the line says, without it the same command starts again
    assert main(["run", *FAST, "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["status"] == "completed"


# ---- 3. a full disk (at a checkpoint or the metrics: test_run_failures.py's test_an_error_mid_run_...) -------
@pytest.mark.parametrize("writes_that_fit", [0, 1])
def test_a_disk_full_for_everything_ends_with_one_line_and_no_temp_files(tmp_path, monkeypatch, capsys,
                                                                         writes_that_fit):
    assert main(["run", *SMALL, "--out", str(tmp_path / "warm")]) == 0  # the data set is cached
    capsys.readouterr()
    out = tmp_path / "run"
    real, calls = os.fsync, []

    def fsync(fd):  # 0: not even run.json at the start fits; 1: it does, nothing after it
        calls.append(fd)
        if len(calls) > writes_that_fit:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    refused(main, ["run", *SMALL, "--out", str(out)], capsys, "No space left on device", code=1)
    if writes_that_fit:  # the failure could not be recorded: run.json says what the last write said
        assert json.loads((out / "run.json").read_text())["status"] == "running" and temps(out) == []
    else:
        assert not out.exists()  # made for the run, which wrote nothing
    monkeypatch.undo()
    assert main(["run", *SMALL, "--out", str(out)]) == 0


def test_leftover_temp_files_of_earlier_writes_are_removed_by_the_next_run(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in (".checkpoint.pt.tmp-4242", ".metrics.parquet.4242.1a2b3c4d.tmp", ".run.json.tmp-17"):
        (out / name).write_bytes(b"\0" * 1024)
    (out / "notes.tmp.txt").write_text("mine")  # not ours: kept
    assert main(["run", *SMALL, "--out", str(out)]) == 0
    assert temps(out) == ["notes.tmp.txt"]


METRIC_ROWS = {
    "integers": [{"step": 0, "messages_sent": 3}, {"step": 1, "messages_sent": 5}],
    "integer then float": [{"v": 1}, {"v": 2.5}],
    "a key missing, a None": [{"step": 0, "test_acc": 0.5}, {"step": 1}, {"step": 2, "test_acc": None}],
    "integer with a gap": [{"a": 1}, {"a": None}],
    "nan and infinities": [{"a": float("nan")}, {"a": float("inf")}, {"a": -float("inf")}],
    "not numbers": [{"flag": True, "name": "x"}, {"flag": False, "name": None}],
    "all None": [{"a": None}, {"a": None}],
    "large integers": [{"bits": 2**62}, {"bits": -(2**40)}],
}


@pytest.mark.parametrize("rows", METRIC_ROWS.values(), ids=METRIC_ROWS.keys())
def test_metrics_read_back_as_the_frame_pandas_makes_of_the_rows(tmp_path, rows):
    """write_metrics builds numeric columns from buffers (no pandas import in a run); a reader must still see
    the columns, dtypes and values that pandas.DataFrame(rows) has, gaps as NaN included."""
    path = tmp_path / "metrics.parquet"
    write_metrics(path, rows)
    pd.testing.assert_frame_equal(pd.read_parquet(path), pd.DataFrame(rows))


def _writers(tmp_path):
    from analysis.files import write_atomically
    from analysis.figures.consensus import plot_consensus
    from bench.cache import update_json
    from bench.data.base import save_npz_atomic
    from bench.plan.table import write_csv
    from bench.algorithms.step_tuning import store_gamma

    traces = pd.DataFrame({"method": "exact", "gamma": 1.0, "step": [0, 1], "rel_error": [1.0, 0.1],
                           "bits_per_worker": [0, 64]})
    return {
        "run.json": lambda p: write_json(p, {"status": "completed"}),
        "metrics.parquet": lambda p: write_metrics(p, [{"step": 0, "test_acc": 0.5}]),
        "checkpoint.pt": lambda p: save_checkpoint(p, {"x": torch.zeros(3)}),
        "cache.npz": lambda p: save_npz_atomic(p, x=np.zeros(3)),
        "plan.csv": lambda p: write_csv(p, []),
        "gamma.json": lambda p: store_gamma(p, "ring|4", 0.5),
        "gradient-paths.json": lambda p: update_json(p, "mlp", {"path": "vmap"}),
        "summary.csv": lambda p: write_atomically(p, lambda tmp: traces.to_csv(tmp, index=False)),
        "consensus.png": lambda p: plot_consensus(traces, p.with_suffix("")),
    }


OLD = {"gamma.json": b'{"ring|8": 0.25}', "gradient-paths.json": b"{}"}  # caches: the old file must be valid


@pytest.mark.parametrize("name", ["run.json", "metrics.parquet", "checkpoint.pt", "cache.npz", "plan.csv",
                                  "gamma.json", "gradient-paths.json", "summary.csv", "consensus.png"])
def test_every_writer_leaves_the_old_file_and_no_temp_file_when_the_disk_fills(tmp_path, monkeypatch, name):
    path, old = tmp_path / name, OLD.get(name, b"old")
    path.write_bytes(old)

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space") as failure:
        _writers(tmp_path)[name](path)
    assert failure.value.filename == str(path)  # the file meant, not the temporary one
    assert path.read_bytes() == old and temps(tmp_path) == []
    monkeypatch.undo()
    _writers(tmp_path)[name](path)
    assert path.read_bytes() != old and temps(tmp_path) == []
