"""A method on a lossy network under torch.distributed against the simulator: the shared check of
tests/test_faults_run.py (D-PSGD) and tests/test_faults_choco.py (Choco)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd

from bench.cli import main
from test_dist import BASE, SETTINGS, TIMING, launch
from test_run import metrics

LOSSES = {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 2}


def assert_dist_loses_as_the_simulation(tmp_path: Path, world: int, algorithm: str, compressor: str,
                                        losses: dict = LOSSES) -> dict:
    """Runs ``algorithm/compressor`` with ``losses`` (a faults setting) on ``world`` gloo processes and in the simulator; asserts the
    metrics agree to float rounding (timing aside), the same messages were lost (some), the bits are equal;
    returns the distributed run's run.json."""
    out, name = tmp_path / "dist", f"{algorithm}-{compressor}"
    runs = {name: {"algorithm": algorithm, "compressor": compressor, **SETTINGS, "faults": losses}}
    ranks = launch([str(Path(__file__).with_name("dist_cases.py")), str(out), json.dumps(runs)], world,
                   stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parent)
    errors = [p.communicate(timeout=600)[1] for p in ranks]
    assert all(p.returncode == 0 for p in ranks), "\n".join(e[-1500:] for e in errors)
    faults = [arg for key, value in losses.items() for arg in ("--set", f"faults.{key}={value}")]
    assert main(["run", *BASE, "--algorithm", algorithm, "--compressor", compressor, *faults, "--out",
                 str(tmp_path / "sim")]) == 0
    sim, dist = metrics(tmp_path / "sim"), metrics(out / name)
    for column in sim.columns:  # the runtimes add in different orders: the models agree to float rounding
        if column not in TIMING:
            pd.testing.assert_series_equal(sim[column], dist[column], rtol=1e-4, atol=1e-6, check_names=False,
                                           obj=column)
    assert list(sim["messages_dropped"]) == list(dist["messages_dropped"]) and sim["messages_dropped"].iloc[-1] > 0
    assert list(sim["bits_per_worker"]) == list(dist["bits_per_worker"])
    info = json.loads((out / name / "run.json").read_text())
    assert info["status"] == "completed" and info["runtime"]["processes"] == world
    return info
