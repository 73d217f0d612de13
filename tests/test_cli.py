"""The command line: its registry of commands, JSON output of `bench topology`, one-line errors with exit
status 2."""
import json
import re
import subprocess
import sys

import pytest

from bench.cli import COMMANDS, main
from hostile import assert_refused, run_cli


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


def test_the_help_of_every_command_needs_neither_torch_nor_analysis():
    # a command module imports what it runs inside run(): the parser is built for every command at once; `bench
    # run --help` lists the registered operators and tasks, which are their torch modules (its own test, test_logs)
    code = ("import contextlib, io, sys\nfrom bench.cli import COMMANDS, main\n"
            "for name in [c for c in COMMANDS if c != 'run']:\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "        try:\n            main([name, '--help'])\n"
            "        except SystemExit as stop:\n            assert stop.code == 0, name\n"
            "    assert out.getvalue().startswith('usage: bench ' + name), name\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'analysis')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", (proc.stdout[-300:], proc.stderr[-500:])


def test_topology_json_has_the_contract_keys(capsys):
    assert main(["topology", "--topology", "torus", "--nodes", "16", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"n", "num_edges", "max_degree", "weights", "spectral_gap", "beta"} <= set(info)
    assert info["n"] == 16 and info["num_edges"] == 32 and info["max_degree"] == 4
    assert round(info["spectral_gap"], 3) == 0.4


def test_topology_weights_flag_changes_the_matrix(capsys):
    main(["topology", "--topology", "social", "--nodes", "32", "--weights", "metropolis", "--json"])
    metropolis = json.loads(capsys.readouterr().out)
    main(["topology", "--topology", "social", "--nodes", "32", "--json"])
    default = json.loads(capsys.readouterr().out)
    assert metropolis["weights"] == "metropolis" and default["weights"] == "maxdeg"
    assert metropolis["spectral_gap"] < default["spectral_gap"]


@pytest.mark.parametrize("argv,word", [
    (["topology", "--topology", "torus", "--nodes", "8"], "torus"),
    (["topology", "--topology", "hypercube", "--nodes", "8"], "hypercube"),
    (["topology", "--topology", "ring", "--nodes", "8", "--weights", "heat"], "heat"),
    (["topology", "--topology", "social", "--nodes", "31"], "32"),
    (["tune-gamma", "--compressor", "top:1.5", "--steps", "5"], "1.5"),
    (["tune-gamma", "--compressor", "zip:3", "--steps", "5"], "zip"),
    (["tune-gamma", "--compressor", "sign", "--nodes", "0"], "0"),
])
def test_bad_input_is_one_line_and_status_two(argv, word, capsys):
    # in process (the child process's real stderr: tests/test_run.py and tests/test_entry_properties.py)
    status, _, err = run_cli(main, argv, capsys)
    assert_refused(status, err, word)


def test_tune_gamma_prints_the_best_gamma_of_the_grid(capsys):
    argv = ["tune-gamma", "--topology", "ring", "--nodes", "8", "--dim", "200", "--steps", "150",
            "--compressor", "top:0.1", "--grid", "0.01,0.1,0.9", "--json", "--quiet"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    finite = [g for g in out["grid"] if not g["diverged"]]
    assert out["best_gamma"] in (0.01, 0.1, 0.9)
    assert out["best_rel_error"] == min(g["rel_error"] for g in finite)
    assert out["compressor"] == "top:0.1"


def test_consensus_command_writes_tidy_traces(tmp_path, capsys):
    argv = ["consensus", "--nodes", "8", "--dim", "100", "--steps", "60", "--methods", "exact", "sign", "top:0.2",
            "--out", str(tmp_path), "--quiet"]
    assert main(argv) == 0
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
    assert "exact" in capsys.readouterr().out


def test_bits_command_reproduces_table1_column(capsys):
    assert main(["bits", "--model", "resnet20", "--compressors", "none", "qsgd:4", "top:0.1", "sign"]) == 0
    out = capsys.readouterr().out
    assert "272,474 parameters in 65 tensors" in out
    rows = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()[2:]}
    assert round(rows["none"], 2) == 1.04
    assert round(rows["qsgd:4,biased=false"], 2) == 0.13
    assert round(rows["top:0.1"], 2) == 0.21
    assert round(rows["sign"], 3) == 0.033  # 0.032 in the paper, which leaves out the 65 per-layer scales


def test_one_node_is_allowed_on_complete_only(capsys):
    assert main(["topology", "--topology", "complete", "--nodes", "1", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n"] == 1 and info["num_edges"] == 0 and info["spectral_gap"] == 1.0
    proc = subprocess.run([sys.executable, "-m", "bench", "topology", "--topology", "ring", "--nodes", "1"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "n=1" in proc.stderr


def test_run_settings_json_is_the_flags_layer_beneath_the_flags_and_set(tmp_path, capsys):
    # the pipeline hands each job its settings as one JSON object; a flag or --set beside it wins
    fast = ["--set", "compute_time=0.01", "--set", "task_options.n_train=64", "--set", "batch_size=8", "--quiet"]
    settings = json.dumps({"task": "lsq", "nodes": 8, "epochs": 1, "seed": 2, "lr": 0.3})
    assert main(["run", "--settings", settings, "--nodes", "4", "--set", "lr=0.05", *fast,
                 "--out", str(tmp_path / "json")]) == 0
    assert main(["run", "--task", "lsq", "--nodes", "4", "--epochs", "1", "--seed", "2", "--lr", "0.05", *fast,
                 "--out", str(tmp_path / "flags")]) == 0
    json_run, flags_run = (json.loads((tmp_path / d / "run.json").read_text()) for d in ("json", "flags"))
    assert json_run["config"]["nodes"] == 4 and json_run["config"]["lr"] == 0.05
    assert json_run["run_id"] == flags_run["run_id"] and json_run["fingerprint"] == flags_run["fingerprint"]
    capsys.readouterr()
    assert main(["run", "--settings", "{not json", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not JSON" in err and not (tmp_path / "bad").exists()
