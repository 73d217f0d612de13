"""`--config scale=gpu`: the `bench run` lines carry the paper's model and
hyper-parameters. The expected values are the paper's numbers (shared/PAPER.md; where it is silent, the
authors' scripts in epfml/ChocoSGD, marked so), written here, not read back from the study files."""
import json
import shlex
from pathlib import Path

import pytest
import yaml


from bench.errors import BenchError
from bench.pipeline import Study, sized

pytestmark = pytest.mark.slow  # processes and pipelines: `make test` runs them, `make test-fast` does not

ROOT = Path(__file__).resolve().parents[1]

# Table 1: ResNet-20 on CIFAR-10, ring of 8, batch 128 per worker, 300 epochs, momentum 0.9, warm-up over 5
# epochs then /10 at 150 and 225, data reshuffled every epoch, every worker's local model evaluated
TABLE1 = {"task": "cifar10-resnet20", "epochs": "300", "batch_size": "128", "momentum": "0.9",
          "lr_schedule": "warmup-multistep", "warmup_epochs": "5", "milestones": "[150,225]", "lr_decay": "0.1",
          "data": "shuffle", "topology": "ring", "nodes": "8", "eval_local_workers": "8",
          "nesterov": "True"}  # Nesterov: the authors' CIFAR-10 scripts
# Scaling: ResNet-8 on CIFAR-10, n = 4, 16, 36, 64, constant LR (tuned), 300 epochs
SCALING = {"task": "cifar10-resnet8", "epochs": "300", "lr_schedule": "constant", "momentum": "0.9",
           "batch_size": "128"}  # batch: not stated for this study, Table 1's
# Table 3: Davis graph of 32 workers, data split once and kept, exponentially decaying LR
SOCIAL = {"topology": "social", "nodes": "32", "data": "split", "lr_schedule": "exp"}
SOCIAL_RESNET = {**SOCIAL, "task": "cifar10-resnet20", "momentum": "0.9",
                 "batch_size": "128", "epochs": "300", "weight_decay": "0.0001"}  # the authors' social script
# the LSTM: 3 layers x 650, BPTT 30, gradient clip 0.4, dropout 0.4 (tied weights: 28.95 M parameters)
SOCIAL_LSTM = {**SOCIAL, "task": "wikitext2-lstm", "task_options.num_layers": "3", "task_options.hidden": "650",
               "task_options.emb": "650", "task_options.bptt": "30", "task_options.dropout": "0.4",
               "task_options.tie_weights": "True", "grad_clip": "0.4",
               "batch_size": "32", "epochs": "300", "momentum": "0"}  # the authors' LSTM script
# Datacenter: ResNet-50 on ImageNet, 90 epochs
DATACENTER = {"task": "imagenet-resnet50", "epochs": "90"}
PAPER = {"table1": TABLE1, "scaling": SCALING, "social": SOCIAL_RESNET, "social-lstm": SOCIAL_LSTM,
         "datacenter": DATACENTER}


def parse(command: str) -> dict:
    """The settings of one `bench run` command line (its --settings JSON), with its out directory."""
    words = shlex.split(command.split("bench run", 1)[1])
    return {**flat(json.loads(words[words.index("--settings") + 1])), "out": words[words.index("--out") + 1]}


def parse_plan(line: str) -> list[dict]:
    """The trials of one tuning job (`python -m bench.pipeline.halving PLAN`), each with its settings, its out
    directory and the halving's rungs (epochs)."""
    words = shlex.split(line)
    plan = json.loads(words[words.index("bench.pipeline.halving") + 1])
    return [{**flat(trial["settings"]), "out": f"{plan['dir']}/{name}", "rungs": plan["rungs"]}
            for name, trial in plan["trials"].items()]


def flat(settings: dict) -> dict:
    """Settings with each option of a mapping (task_options, algorithm_options) as ``group.option``."""
    out = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            out.update({f"{key}.{option}": v for option, v in value.items()})
        else:
            out[key] = value
    return out


@pytest.fixture(scope="module")
def gpu_runs(study_dags):
    """study -> (final run lines, tuning trial lines) of its dry run at scale=gpu, for every study with a gpu:
    block (the others run their CPU settings: tests/snakemake_api.py; every study builds: test_pipeline.py)."""
    out = {}
    for name, said in study_dags.items():
        study, scale = name.split("@")
        if scale == "gpu":
            commands = [part for line in said.splitlines() if "bench run" in line for part in line.split("&&")]
            finals = [parse(c) for c in commands if f"results/{study}/runs/" in c]
            trials = [t for line in said.splitlines() if "bench.pipeline.halving" in line for t in parse_plan(line)]
            out[study] = (finals, trials)
    assert set(PAPER) <= set(out) and all(out[study][0] for study in PAPER), "a paper's study without a final run"
    return out


@pytest.mark.parametrize("study", sorted(PAPER))
def test_run_lines_carry_the_papers_settings(gpu_runs, study):
    finals, trials = gpu_runs[study]
    for run in finals + trials:
        for key, value in PAPER[study].items():
            if run in trials and key in ("epochs", "eval_local_workers"):  # a trial's own, checked below
                continue
            if key == "data" and "data=" in run["out"]:  # a non-i.i.d. variant of the study
                continue
            assert run.get(key) == yaml.safe_load(value), f"{study}: {key}={run.get(key)!r}, the paper's {value!r}"
        assert run.get("device") == "cuda"
        assert run.get("compute_time", "measured") == "measured"  # a CPU study's modelled step time never leaks
    for run in trials:  # the full schedule, paused at shorter rungs, on a validation split, no local models
        assert float(run["epochs"]) == float(finals[0]["epochs"]) == run["rungs"][-1] > run["rungs"][0]
        assert float(run["val_fraction"]) > 0 and run["eval_local_workers"] == 0


def test_scaling_and_table1_sweep_and_tune_what_the_paper_did(gpu_runs, study_dags):
    finals, trials = gpu_runs["scaling"]  # the paper's node counts, the LR tuned per cell (from its tuned YAML)
    assert {r["nodes"] for r in finals} == {4, 16, 36, 64} and all("lr" not in r for r in finals)
    assert {(r["topology"], r["nodes"]) for r in finals} >= {("ring", 64), ("torus", 64)}
    assert "run_cell" in study_dags["scaling@gpu"]  # a job holds a cell's seeds
    assert {r["lr"] for r in trials} >= {0.1}
    finals, trials = gpu_runs["table1"]  # lr, weight decay and Choco's γ tuned
    assert all("lr" not in r and "weight_decay" not in r for r in finals) and {"lr", "weight_decay"} <= set(trials[0])
    assert any("algorithm_options.gamma" in r for r in trials if r["algorithm"] == "choco" and r["compressor"] != "none")
    assert len({(r["algorithm"], r["compressor"]) for r in finals}) == 3 * 11 + 2  # {DCD, ECD, Choco} x 11, AR, D-PSGD


def test_no_cpu_model_size_reaches_the_lstm(gpu_runs):
    finals, _ = gpu_runs["social-lstm"]
    assert {r["algorithm"] for r in finals} == {"allreduce", "dpsgd", "choco"}
    assert all(r["task_options.hidden"] == 650 for r in finals)


# -- the merge rule -----------------------------------------------------------------------------------
BASE = {"study": "s", "task": "mnist1d-mlp",
        "defaults": {"epochs": 2, "lr": 0.1, "data": "shuffle", "task_options": {"n_train": 400, "hidden": [8]}},
        "tune": {"grid": {"lr": [0.1, 1.0], "weight_decay": [0, 1e-4]}, "budget": 0.5},
        "blocks": {"b": {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4]}}}


def test_scale_block_merges_recursively_but_owns_task_options_and_grid_and_keeps_no_cpu_size():
    config = {**BASE, "gpu": {"task": "cifar10-resnet8", "defaults": {"epochs": 300, "device": "cuda"},
                              "tune": {"grid": {"lr": [0.05]}}}}
    merged = sized(config, "gpu")
    assert merged["task"] == "cifar10-resnet8"
    assert merged["defaults"] == {"epochs": 300, "lr": 0.1, "data": "shuffle", "device": "cuda"}
    assert merged["tune"] == {"grid": {"lr": [0.05]}, "budget": 0.5}  # the CPU weight-decay grid is not kept
    assert sized(config, "cpu")["defaults"]["task_options"] == {"n_train": 400, "hidden": [8]}
    # the same task at scale keeps no CPU size, and no tune block means not tuned
    config = {**BASE, "gpu": {"defaults": {"epochs": 30}}}
    study = Study({**config, "scale": "gpu"})
    assert "task_options" not in study.defaults and not study.tuned_cells
    assert study.run_config(study.cells["choco-sign_ring4"]).task_options == {}


def test_an_option_the_paper_sized_task_does_not_take_names_study_and_key():
    config = {**BASE, "gpu": {"task": "cifar10-resnet20", "defaults": {"task_options": {"hidden": [650]}}}}
    with pytest.raises(BenchError, match=r"study 's' at scale=gpu: gpu\.defaults\.task_options\.hidden"):
        Study({**config, "scale": "gpu"})
