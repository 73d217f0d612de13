"""The command line: its registry of commands, JSON output of `bench topology`, one-line errors with exit
status 2."""
import json
import re

import pytest

from bench.cli import COMMANDS, main
from hostile import run_cli


def test_every_registered_command_has_help_and_a_run_and_the_help_lists_exactly_them(capsys):
    for name, module in COMMANDS.items():
        assert module.NAME == name and module.HELP.strip(), module.__name__
        assert callable(module.add_arguments) and callable(module.run), module.__name__
    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0
    assert re.findall(r"^    ([a-z][\w-]*)\s", out, flags=re.M) == list(COMMANDS)  # one line each, in order
    for module in COMMANDS.values():
        assert " ".join(module.HELP.split()[:4]) in " ".join(out.split()), module.NAME
    assert "draw the study's figures" in run_cli(__import__("analysis.cli").cli.main, ["--help"], capsys)[1]  # words


@pytest.mark.parametrize("argv, expected", [
    (["--topology", "torus", "--nodes", "16"], {"n": 16, "num_edges": 32, "max_degree": 4,
                                                 "spectral_gap": pytest.approx(0.4)}),
    (["--topology", "complete", "--nodes", "1"], {"n": 1, "num_edges": 0, "spectral_gap": 1.0}),  # one node
    # the --weights flag changes the matrix: Metropolis weights mix the social graph more slowly
    (["--topology", "social", "--nodes", "32"], {"weights": "maxdeg", "spectral_gap": pytest.approx(0.0903, 1e-3)}),
    (["--topology", "social", "--nodes", "32", "--weights", "metropolis"],
     {"weights": "metropolis", "spectral_gap": pytest.approx(0.0821, 1e-3)}),
])
def test_topology_json_has_the_contract_keys(argv, expected, capsys):
    assert main(["topology", *argv, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"n", "num_edges", "max_degree", "weights", "spectral_gap", "beta"} <= set(info)
    assert {key: info[key] for key in expected} == expected


def test_tune_gamma_prints_the_best_gamma_of_the_grid_and_one_line_of_what_it_did(capsys):
    argv = ["tune-gamma", "--topology", "ring", "--nodes", "8", "--dim", "200", "--steps", "150",
            "--compressor", "top:0.1", "--grid", "0.01,0.1,0.9", "--json"]
    status, out, err = run_cli(main, argv, capsys)
    assert status == 0 and re.fullmatch(r"top:0\.1: best γ = \S+ of 3 values × 150 rounds \(\d+\.\d s\)\n", err), err
    out = json.loads(out)
    finite = [g for g in out["grid"] if not g["diverged"]]
    assert out["best_gamma"] in (0.01, 0.1, 0.9)
    assert out["best_rel_error"] == min(g["rel_error"] for g in finite)
    assert out["compressor"] == "top:0.1"
    argv = ["tune-gamma", "--nodes", "4", "--dim", "10", "--steps", "20", "--compressor", "sign", "--grid", "0.1,0.5"]
    status, out, err = run_cli(main, argv, capsys)  # without --json: a table of the grid
    assert status == 0 and "best gamma = " in out and out.count("<- best") == 1, out


def test_consensus_command_writes_tidy_traces_and_one_line_per_compressor(tmp_path, capsys):
    argv = ["consensus", "--nodes", "8", "--dim", "100", "--steps", "60", "--methods", "exact", "sign", "top:0.2",
            "--out", str(tmp_path)]
    status, out, err = run_cli(main, argv, capsys)
    lines = err.splitlines()  # off a terminal: no progress bar, a line per compressor; the table on stdout
    assert status == 0 and len(lines) == 3 and "\r" not in err and "method" in out and "exact" in out, err
    assert lines[0].startswith("[1/3] exact: exact gossip, relative error")
    assert lines[1].startswith("[2/3] sign: γ = ") and "(tuned: 20 values × " in lines[1]
    import pandas as pd

    traces = pd.read_csv(tmp_path / "traces.csv")
    assert list(traces["method"].unique()) == ["exact", "sign", "top:0.2"]
    assert (traces["spectral_gap"] == traces["spectral_gap"].iloc[0]).all() and (traces["nodes"] == 8).all()
    for _, group in traces.groupby("method"):
        assert group["rel_error"].iloc[0] == pytest.approx(1.0)
        assert group["bits_per_worker"].is_monotonic_increasing
    # exact gossip sends 32 bits per coordinate per round, a copy to each of a ring worker's 2 neighbours
    exact = traces[traces["method"] == "exact"]
    assert exact["bits_per_worker"].iloc[-1] == 2 * 32 * 100 * exact["step"].iloc[-1]
    assert (exact["bits_per_worker_max"] == exact["bits_per_worker"]).all()  # a ring is regular
    assert exact["bits_paper_per_worker"].iloc[-1] == 32 * 100 * exact["step"].iloc[-1]
    quiet = run_cli(main, ["consensus", "--nodes", "4", "--dim", "10", "--steps", "20", "--methods", "sign",
                           "--quiet"], capsys)
    assert quiet[0] == 0 and quiet[2] == ""


def test_bits_command_reproduces_table1_column(capsys):
    assert main(["bits", "--model", "resnet20", "--compressors", "none", "qsgd:4", "top:0.1", "sign"]) == 0
    out = capsys.readouterr().out
    assert "272,474 parameters in 65 tensors" in out
    rows = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()[2:]}
    assert round(rows["none"], 2) == 1.04
    assert round(rows["qsgd:4,biased=false"], 2) == 0.13
    assert round(rows["top:0.1"], 2) == 0.21
    assert round(rows["sign"], 3) == 0.033  # 0.032 in the paper, which leaves out the 65 per-layer scales
