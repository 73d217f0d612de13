"""Methods on a lossy network under torch.distributed against the simulator: the check of
tests/test_faults_methods.py, every case in one launch of processes."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd

from bench.cli import main
from test_dist import BASE, SETTINGS, TIMING, launch
from test_run import metrics

LOSSES = {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 2}


def assert_dist_cases_lose_as_the_simulation(tmp_path: Path, world: int, cases: dict) -> dict:
    """Runs every ``name: (algorithm, compressor, losses)`` of ``cases`` (losses: a faults setting), all in ONE
    launch of ``world`` gloo processes (their start-up paid once), and in the simulator; asserts the metrics agree
    to float rounding (timing aside), the same messages were lost (some), the bits are equal; returns each
    distributed run's run.json by name."""
    out = tmp_path / "dist"
    runs = {name: {"algorithm": a, "compressor": c, **SETTINGS, "faults": losses} for name, (a, c, losses) in cases.items()}
    ranks = launch([str(Path(__file__).with_name("dist_cases.py")), str(out), json.dumps(runs)], world,
                   stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parent)
    errors = [p.communicate(timeout=600)[1] for p in ranks]
    assert all(p.returncode == 0 for p in ranks), "\n".join(e[-1500:] for e in errors)
    infos = {}
    for name, (algorithm, compressor, losses) in cases.items():
        faults = [arg for key, value in losses.items() for arg in ("--set", f"faults.{key}={value}")]
        assert main(["run", *BASE, "--algorithm", algorithm, "--compressor", compressor, *faults, "--out",
                     str(tmp_path / "sim" / name)]) == 0
        sim, dist = metrics(tmp_path / "sim" / name), metrics(out / name)
        for column in sim.columns:  # the runtimes add in different orders: the models agree to float rounding
            if column not in TIMING:
                pd.testing.assert_series_equal(sim[column], dist[column], rtol=1e-4, atol=1e-6, check_names=False,
                                               obj=f"{name}: {column}")
        assert list(sim["messages_dropped"]) == list(dist["messages_dropped"]) and sim["messages_dropped"].iloc[-1] > 0
        assert list(sim["bits_per_worker"]) == list(dist["bits_per_worker"])
        infos[name] = json.loads((out / name / "run.json").read_text())
        assert infos[name]["status"] == "completed" and infos[name]["runtime"]["processes"] == world
    return infos
