"""The Snakemake pipeline: lint, DAGs of every study, and the tiny test study end to end."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # processes and pipelines: `make test` runs them, `make test-fast` does not


ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
STUDIES = sorted(p.stem for p in (ROOT / "config").glob("*.yaml"))


def snakemake(*args, cwd=ROOT, check=True):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run([*SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc


def test_lint_is_clean():
    out = snakemake("--lint")
    assert "good condition" in out.stdout + out.stderr


def test_every_study_builds_its_dag(tmp_path):
    # one dry run per study, all at once: each is mostly interpreter start-up and DAG building
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    procs = {}
    for study in STUDIES:
        (tmp_path / study).mkdir()
        procs[study] = subprocess.Popen(
            [*SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), "-n", "--configfile",
             str(ROOT / "config" / f"{study}.yaml"), "--directory", str(tmp_path / study)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    broken = {}
    for study, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        if proc.returncode != 0 or "total" not in stdout:
            broken[study] = (stdout + stderr)[-1500:]
    assert len(STUDIES) >= 14 and not broken, broken


def test_gpu_switch_and_slurm_profile_build_the_paper_sized_dag(tmp_path):
    out = snakemake("-n", "--profile", str(ROOT / "workflow/profiles/slurm-gpu"), "--configfile",
                    str(ROOT / "config/scaling.yaml"), "--config", "scale=gpu", "--directory", str(tmp_path))
    assert "run_cell" in out.stdout  # seeds grouped per cell
    # the 64-node cells of the scaling grid are in the DAG
    assert "_ring64" in out.stdout and "_torus64" in out.stdout


def test_bad_study_file_names_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: bad\ntask: mnist1d-mlp\nblocks:\n  b:\n    method: [choco/sign]\n    topology: [ring]\n"
                   "    nodes: [8]\ndefaults: {learning_rate: 0.1}\n")
    out = snakemake("-n", "--configfile", str(bad), "--directory", str(tmp_path), check=False)
    assert out.returncode != 0 and "learning_rate" in out.stdout + out.stderr


def _completed_runs(study):
    done = {}
    for run_json in (study / "runs").glob("*/run.json"):
        try:
            status = json.loads(run_json.read_text())["status"]
        except (OSError, ValueError, KeyError):
            continue
        metrics = run_json.parent / "metrics.parquet"
        if status in ("completed", "diverged") and metrics.exists():
            done[run_json.parent.name] = metrics.stat().st_mtime_ns
    return done


def test_the_test_study_survives_an_interruption_and_finishes_end_to_end(tmp_path):
    config = str(ROOT / "config/test.yaml")
    study = tmp_path / "results" / "test"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.Popen([*SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), "--cores", "2", "--configfile",
                             config, "--directory", str(tmp_path)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while len(_completed_runs(study)) < 4 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C would
    proc.wait(timeout=120)
    finished = _completed_runs(study)
    assert 4 <= len(finished) < 14, "the interruption should land part-way"
    assert not (study / "summary.csv").exists()

    snakemake("--cores", "2", "--rerun-incomplete", "--configfile", config, "--directory", str(tmp_path))
    after = _completed_runs(study)
    assert all(after[run] == mtime for run, mtime in finished.items())  # finished runs were not redone
    summary = pd.read_csv(study / "summary.csv")
    assert len(summary) == 7 * 2  # 7 cells x 2 seeds
    statuses = dict(zip(summary["run_id"], summary["status"]))
    assert sum(s == "diverged" for s in statuses.values()) == 2  # a diverged run is a result, not a failure
    assert sum(s == "completed" for s in statuses.values()) == 12
    report = (study / "report.md").read_text()
    assert "accuracy_curves.png" in report and "consensus.png" in report
    for name in ("consensus", "accuracy_curves"):
        assert (study / "figures" / f"{name}.png").stat().st_size > 0
    assert (study / "consensus" / "summary.csv").exists()
    # the HTML report has every figure with its own caption
    snakemake("--configfile", config, "--directory", str(tmp_path), "--report", str(tmp_path / "report.html"))
    html = (tmp_path / "report.html").read_text(errors="replace")
    captions = json.loads((study / "figures" / "index.json").read_text())
    assert "accuracy_curves.png" in html
    for name in ("consensus", "accuracy_curves"):  # the caption drawn for these runs, not a fixed text
        assert captions[name][:60] in html, name


def test_a_study_can_ask_for_the_distributed_backend(tmp_path):
    snakemake("--cores", "2", "--configfile", str(ROOT / "config/test-dist.yaml"), "--directory", str(tmp_path))
    runs = sorted((tmp_path / "results" / "test-dist" / "runs").glob("*/run.json"))
    assert len(runs) == 2
    for path in runs:
        info = json.loads(path.read_text())
        assert info["status"] == "completed"
        assert info["runtime"]["backend"] == "dist" and info["runtime"]["processes"] == 2
    assert (tmp_path / "results" / "test-dist" / "summary.csv").exists()
