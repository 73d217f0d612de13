"""What a study may ask for, checked when the DAG is built: a block sets only what a run may set (not the
study's task or seeds), every cell passes bench's own parsers, and every value reaches the shell quoted."""
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.errors import BenchError
from bench.pipeline import Study
from bench.run import resolved

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]
BLOCK = {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4]}


def study(block=None, **top):
    """A small lsq study of one block ``b`` (the block's keys over BLOCK's)."""
    return {"study": "v", "task": "lsq", "seeds": [0, 1], "defaults": {"epochs": 1, "gamma": 0.5},
            "blocks": {"b": {**BLOCK, **(block or {})}}, **top}


def refusal(config) -> str:
    with pytest.raises(BenchError) as err:
        Study(config)
    message = str(err.value)
    assert "\n" not in message and message.startswith("study 'v' at scale=cpu: ")
    return message


def snakemake(config, tmp_path, *args):
    path = tmp_path / f"{config['study']}.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run([*SNAKEMAKE, *args, "--configfile", str(path), "--directory", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True)


# -- 1. a block asks only for what a run takes -------------------------------------------------------------
def test_a_block_cannot_set_seeds_they_are_the_studys():
    # before: three cells named seed=1..3 merged into one, which ran seeds 0 and 1 of the study
    message = refusal(study({"seed": [1, 2, 3]}))
    assert "block 'b'" in message and "seed" in message and "seeds:" in message


def test_a_block_cannot_set_a_task_of_its_own():
    # before: the block's task was replaced by the study's and the cell merged with an identical block
    config = study({"task": ["digits-mlp"]})
    config["blocks"]["same"] = dict(BLOCK)
    message = refusal(config)
    assert "block 'b'" in message and "task" in message and "'lsq'" in message


@pytest.mark.parametrize("key", ["algorithm", "compressor"])
def test_a_block_gives_algorithm_and_compressor_by_its_method(key):
    message = refusal(study({key: ["dcd"]}))
    assert "block 'b'" in message and key in message and "method" in message


def test_an_unknown_block_key_names_the_block_not_set():
    message = refusal(study({"lerning_rate": [0.1]}))
    assert "block 'b'" in message and "'lerning_rate'" in message and "--set" not in message
    assert "lr" in message  # what is allowed


def test_the_settings_a_block_may_set_still_make_cells():
    cells = Study(study({"lr": [0.1, 0.2], "data": ["sorted"]})).cells
    assert sorted(cells) == ["choco-sign_ring4_data=sorted_lr=0.1", "choco-sign_ring4_data=sorted_lr=0.2"]


# -- 2. every value reaches `bench run` exactly as the study wrote it ----------------------------------------
NASTY = ["/data/it's", "$(touch PWNED)", "x; touch PWNED", "a`touch PWNED`b", 'say "hi" \\ $HOME', "it's; rm -rf $(pwd) #",
         "0.10", "[1, 2]", "key: value"]  # the last three: what `--set` would read as YAML


def bench_run_config(command: str):
    """The RunConfig and out directory of one command line of the pipeline, its settings read back as
    `bench run --settings` reads them (bench.run.settings_file)."""
    from bench.run.settings_file import load_settings

    words = shlex.split(command)
    assert words[:4] == ["python", "-m", "bench", "run"]
    assert words[4] == "--settings" and words[-2] == "--out"
    return load_settings(words[5]), words[-1]


@pytest.mark.parametrize("value", NASTY)
def test_every_command_line_gives_bench_the_studys_exact_value(value):
    tuned = {"grid": {"lr": [0.1, 0.2]}, "seeds": [0]}
    for config in (study(defaults={"epochs": 1, "gamma": 0.5, "data_root": value}, tune=tuned),
                   study({"data_root": [value]}, group_seeds=True, tune=tuned)):
        s = Study(config)
        for job in s.jobs():
            for settings in job.runs:
                out = f"results/v/{job.name}/it's $(touch PWNED)"
                line = s.command(settings, out, s.tuned_cells.get(job.cell, ()) if job.rule != "tune_cell" else ())
                cfg, parsed_out = bench_run_config(line)
                assert cfg.data_root == value and str(parsed_out) == out
                assert cfg.seed == settings["seed"] and cfg.topology == "ring"


def test_a_tuned_cells_command_reads_its_tuned_values_and_leaves_them_out():
    s = Study(study(tune={"grid": {"lr": [0.1, 0.2]}, "seeds": [0]}))
    run = s.runs["choco-sign_ring4_s0"]
    words = shlex.split(s.command(run, "out", s.tuned_cells["choco-sign_ring4"], "tuned/it's.yaml"))
    assert words[words.index("--config") + 1] == "tuned/it's.yaml" and "--replace-stale" in words
    settings = json.loads(words[words.index("--settings") + 1])
    assert "lr" not in settings and settings["seed"] == 0 and settings["algorithm"] == "choco"


@pytest.mark.slow
def test_a_real_run_with_shell_code_in_its_values_runs_none_of_it(tmp_path, monkeypatch):
    """A file topology and a data root whose names hold shell code, trained and gossiped for real."""
    monkeypatch.chdir(tmp_path)  # where the pipeline runs, so the edge file is found from here
    edges = "edges it's $(touch PWNED); touch PWNED `touch PWNED`.txt"
    (tmp_path / edges).write_text("0 1\n1 2\n2 3\n3 0\n")
    root = "it's $(touch PWNED); touch PWNED"
    config = study({"method": ["dpsgd/none"], "topology": [f"file:{edges}"]}, seeds=[0],
                   defaults={"epochs": 1, "batch_size": 8, "data_root": root, "task_options": {"n_train": 64, "n_test": 16}},
                   consensus={"topology": f"file:{edges}", "nodes": 4, "dim": 4, "steps": 4, "methods": ["exact"],
                              "seed": 0})
    (run,) = Study(config).runs
    targets = [f"results/v/runs/{run}/run.json", "results/v/consensus/exact/traces.csv"]
    proc = snakemake(config, tmp_path, "--cores", "1", *targets)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not list(tmp_path.rglob("PWNED"))
    info = json.loads((tmp_path / targets[0]).read_text())
    assert info["status"] == "completed"
    assert info["config"]["data_root"] == root and info["config"]["topology"] == f"file:{edges}"


# -- 3. every cell passes bench's own checks before anything is submitted ---------------------------------------
BAD_CELLS = [
    ({"topology": ["torus"], "nodes": [37]}, "choco-sign_torus37", "n=37"),
    ({"method": ["choco/top:2"]}, "choco-top2_ring4", "'top:2'"),
    ({"method": ["choco/zip:3"]}, "choco-zip3_ring4", "'zip'"),
    ({"topology": ["hypercube"]}, "choco-sign_hypercube4", "'hypercube'"),
    ({"topology": ["file:no-such-edges.txt"]}, "choco-sign_fileno-such-edges.txt4", "'no-such-edges.txt'"),
    ({"topology": ["random-regular:3"], "nodes": [5]}, "choco-sign_random-regular35", "n=5"),
    ({"method": ["dpsgd/sign"]}, "dpsgd-sign_ring4", "'dpsgd'"),
    ({"weights": ["optimal"]}, "choco-sign_ring4_weights=optimal", "'optimal'"),
    ({"network": ["lan-1g"]}, "choco-sign_ring4_network=lan-1g", "'lan-1g'"),
    ({"lr": [-1]}, "choco-sign_ring4_lr=-1", "lr=-1"),
    # a collective on a shared medium; the published PowerGossip on links that go one way
    ({"method": ["allreduce/none"], "network": ["edge-10m,medium=broadcast"]},
     "allreduce-none_ring4_network=edge-10m_medium=broadcast", "medium=broadcast"),
    ({"method": ["powergossip/none"], "topology": ["one-peer-exp"]}, "powergossip-none_one-peer-exp4",
     "warm_start=false"),
]


@pytest.mark.parametrize("block, cell, bad", BAD_CELLS, ids=[c for _, c, _ in BAD_CELLS])
def test_an_invalid_cell_is_refused_naming_study_block_cell_and_value(block, cell, bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = study({"method": ["choco/sign", "dpsgd/none"], "nodes": [4, 9]})
    config["blocks"]["bad"] = {**BLOCK, **block}
    message = refusal(config)
    assert "block 'bad'" in message and f"cell {cell}" in message and bad in message


@pytest.mark.parametrize("block, cell", [
    ({"method": ["dcd/sign"], "faults": {"drop": 0.1}}, "dcd-sign_ring4_faults=drop0.1~"),
    ({"method": ["adpsgd/none"], "backend": "dist"}, "adpsgd-none_ring4_backend=dist"),
], ids=["faults-without-a-rule", "backend-refused"])
def test_a_cell_bench_run_would_refuse_is_refused_at_the_dag_build_with_its_line(block, cell, tmp_path, capsys):
    """The DAG build checks a cell as `bench run` does before it writes anything (bench/run/resolved.py): faults
    the method has no rule for, a backend it refuses; the same line, after the cell's name."""
    from bench.cli import main

    config = study()
    config["blocks"]["bad"] = {**BLOCK, **block}
    message = refusal(config)
    settings = {**config["defaults"], **{k: v for k, v in block.items() if k != "method"}, "task": "lsq",
                "topology": "ring", "nodes": 4, "algorithm": block["method"][0].split("/")[0],
                "compressor": block["method"][0].split("/")[1]}
    out = tmp_path / "run"
    assert main(["run", "--settings", json.dumps(settings), "--out", str(out)]) == 2 and not out.exists()
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("bench: error: ")
    assert message.startswith(f"study 'v' at scale=cpu: block 'bad', cell {cell}")
    assert message.endswith(f": {line.removeprefix('bench: error: ')}")


def test_a_bad_value_in_the_defaults_is_refused_at_the_first_cell():
    message = refusal(study(defaults={"epochs": 1, "network": "lan-1g"}))
    assert "block 'b'" in message and "'lan-1g'" in message


def test_the_gpu_cells_are_the_ones_checked_at_scale_gpu():
    config = study(gpu={"defaults": {"network": "lan-1g"}})
    Study(config)  # the CPU version is fine
    with pytest.raises(BenchError, match=r"^study 'v' at scale=gpu: block 'b', cell choco-sign_ring4: .*'lan-1g'"):
        Study({**config, "scale": "gpu"})


def test_a_file_topology_is_read_from_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("edges.txt").write_text("0 1\n1 2\n2 3\n3 0\n")
    assert list(Study(study({"topology": ["file:edges.txt"]})).cells) == ["choco-sign_fileedges.txt4"]


@pytest.mark.parametrize("consensus, bad", [({"topology": "torus", "nodes": 37}, "n=37"),
                                            ({"methods": ["exact", "top:2"]}, "'top:2'")])
def test_the_consensus_study_is_checked_too(consensus, bad):
    config = study(consensus={"topology": "ring", "nodes": 8, "dim": 4, "steps": 4, "methods": ["exact"], "seed": 0,
                              **consensus})
    message = refusal(config)
    assert "consensus" in message and bad in message


def test_each_topology_is_built_once_per_shape(monkeypatch):
    calls = []
    real = resolved.make_topology
    monkeypatch.setattr(resolved, "make_topology", lambda *a, **kw: calls.append((a, kw)) or real(*a, **kw))
    config = study({"method": ["choco/sign", "dpsgd/none", "dcd/qsgd:4"], "nodes": [4, 8], "lr": [0.1, 0.2]},
                   tune={"grid": {"momentum": [0.0, 0.9]}, "seeds": [0, 5]})
    config["blocks"]["again"] = {**BLOCK, "nodes": [8, 16]}
    Study(config)
    assert sorted(a for a, _ in calls) == [("ring", 4), ("ring", 8), ("ring", 16)]


@pytest.mark.slow
def test_a_dag_with_an_invalid_cell_stops_at_build_with_one_line(tmp_path):
    config = study({"topology": ["ring", "torus"], "nodes": [36, 37]})
    proc = snakemake(config, tmp_path, "-n")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "study 'v'" in line]
    assert len(lines) == 1 and "block 'b', cell choco-sign_torus37" in lines[0] and "n=37" in lines[0]


def test_an_unknown_setting_in_the_defaults_names_the_defaults():
    message = refusal(study(defaults={"epochs": 1, "colour": "blue"}))
    assert "unknown setting 'colour' in the study's defaults" in message


@pytest.mark.slow
def test_an_unknown_figure_stops_the_dag_with_one_line(tmp_path):
    """The schema does not list the figures: the DAG checks them against analysis/figures' own list."""
    proc = snakemake(study(figures=["acuracy_curves"]), tmp_path, "-n")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if "unknown figure" in line]
    assert "'acuracy_curves'" in line and "accuracy_curves" in line.split("known:")[1]
