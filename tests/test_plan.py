"""`bench plan` on tiny studies: jobs grouped by run shape, steps from the real data sizes, the CSV, the
runtime the pipeline then asks for each job, and one-line errors for bad input."""
import csv
import math
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from bench.cli import main
from bench.pipeline import Study
from bench.plan.measure import Shape, Timing
from bench.plan.sizes import REAL, DataModel, sizes_of
from bench.plan.table import COLUMNS, Row, capped, runtime_minutes, summary
from bench.tasks import TaskSetup, make_task
from datafiles import write_cifar, write_wikitext
from snakemake_api import cli

ROOT = Path(__file__).resolve().parents[1]

# ResNet-8 on CIFAR-10: tuned cells at n = 3 (all-reduce, Choco) and a cell at n = 4 with its LR by hand
TINY = {"study": "tiny", "task": "cifar10-resnet8", "seeds": [0, 1],
        "defaults": {"epochs": 2, "batch_size": 4, "lr": 0.1, "eval_local_workers": 1, "gamma": 0.5},
        "tune": {"grid": {"lr": [0.1, 0.2]}, "budget": 0.5, "val_fraction": 0.1, "seeds": [0]},
        "blocks": {"pair": {"method": ["allreduce/none", "choco/sign"], "topology": ["ring"], "nodes": [3]},
                   "four": {"method": ["dpsgd/none"], "topology": ["ring"], "nodes": [4], "lr": [0.1]}}}


def test_jobs_group_into_shapes_by_task_options_n_batch_and_backend():
    study = Study({**TINY, "scale": "cpu"})
    jobs = study.jobs()
    assert sorted((j.rule, j.name) for j in jobs if j.rule == "tune_cell") == [
        ("tune_cell", "allreduce-none_ring3"), ("tune_cell", "choco-sign_ring3")]
    shapes = {Shape.of(study.run_config(run)) for job in jobs for run in job.runs}
    assert {(s.task, s.nodes, s.batch_size, s.backend) for s in shapes} == {
        ("cifar10-resnet8", 3, 4, "sim"), ("cifar10-resnet8", 4, 4, "sim")}
    grouped = Study({**TINY, "group_seeds": True, "scale": "cpu"}).jobs()
    assert [len(j.runs) for j in grouped if j.rule == "run_cell"] == [2, 2, 2]
    dist = Study({**TINY, "defaults": {**TINY["defaults"], "backend": "dist", "procs": 2},
                  "blocks": {"four": TINY["blocks"]["four"]}})
    assert Shape.of(dist.run_config(dist.runs["dpsgd-none_ring4_lr=0.1_s0"])).label() == "cifar10-resnet8 n=4 b=4 dist/2"


@pytest.mark.parametrize("extend", [True, False])
def test_a_tuning_jobs_work_holds_the_most_its_grid_extension_can_add(extend):
    # three learning rates (a grid that can be extended at its edge), two tuning seeds, rungs at 1 and 2 epochs
    tune = {**TINY["tune"], "grid": {"lr": [0.05, 0.1, 0.2]}, "seeds": [0, 1], "extend": extend}
    study = Study({**TINY, "tune": tune, "scale": "cpu"})
    work = study.tuning_work("choco-sign_ring3")
    staged = [w for w in work if "stop_at" in w]
    assert len(staged) == 3 * 2 + 1 * 2  # every point to the first rung, the best third of them on, all seeds
    assert [w["stop_at"] for w in staged] == [1.0] * 6 + [1.0] * 2  # increments: 0 -> 1 -> 2 epochs
    extension = [w for w in work if "stop_at" not in w]  # the full schedule, for each of the point's seeds
    assert sorted(w["seed"] for w in extension) == ([0, 1] if extend else [])
    job = next(j for j in study.jobs() if (j.rule, j.name) == ("tune_cell", "choco-sign_ring3"))
    assert job.runs == work  # what bench plan times and what the pipeline sizes a job by without a plan


def test_steps_per_epoch_come_from_the_real_data_sizes():
    cifar = DataModel("memory", REAL["cifar10"], train_eval=5000)
    assert cifar.evaluated_units(0.0) == 10_000 + 5_000
    text = DataModel("text", REAL["wikitext2"], bptt=30, train_eval=20_000)
    assert text.steps_per_epoch(32, 32, 0.0) == ((2_088_628 // 32) // 32 - 1) // 30 == 67
    assert DataModel("disk", REAL["imagenet"]).steps_per_epoch(32, 128, 0.0) == 1_281_167 // 32 // 128


@pytest.mark.parametrize("val_fraction", [0.0, 0.2])
def test_the_size_model_agrees_with_the_tasks_built_on_synthetic_data(tmp_path, val_fraction):
    write_cifar(tmp_path / "cifar-10-batches-py", per_batch=40, test_size=30)
    setup = TaskSetup(n_workers=3, batch_size=5, val_fraction=val_fraction, data_root=str(tmp_path))
    task = make_task("cifar10-resnet8", setup)
    model = DataModel.of(task, sizes_of(task))
    assert sizes_of(task).train == 200 and model.steps_per_epoch(3, 5, val_fraction) == task.steps_per_epoch
    write_wikitext(tmp_path / "wt2", lines=300)
    text = make_task("wikitext2-lstm", TaskSetup(n_workers=3, batch_size=4, data="split", data_root=str(tmp_path / "wt2"),
                                                 options={"emb": 8, "hidden": 8, "num_layers": 1, "bptt": 7}))
    assert DataModel.of(text, sizes_of(text)).steps_per_epoch(3, 4, 0.0) == text.steps_per_epoch


def read_plan(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def tiny_plan(tmp_path_factory):
    """`bench plan` of the tiny study: 1 untimed and 1 timed step per shape, gradient path imposed."""
    folder = tmp_path_factory.mktemp("plan")
    (folder / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    out = folder / "plan.csv"
    code = main(["plan", "--configfile", str(folder / "tiny.yaml"), "--steps", "1", "--warmup", "1", "--device", "cpu",
                 "--vectorize", "false", "--quiet", "--out", str(out)])
    assert code == 0
    return read_plan(out)


def test_plan_csv_has_one_row_per_job_with_real_steps(tiny_plan):
    assert tuple(tiny_plan[0]) == COLUMNS
    rows = {(r["rule"], r["job"]): r for r in tiny_plan}
    assert len(rows) == 2 + 6 and {r["device"] for r in tiny_plan} == {"cpu"}
    final = rows[("run", "dpsgd-none_ring4_lr=0.1_s0")]
    assert int(final["steps"]) == 2 * (50_000 // 4 // 4)  # 2 epochs of the real CIFAR-10 at n = 4, batch 4
    assert int(final["evaluations"]) == 1 + 2  # before the first step, then once an epoch
    tune = rows[("tune_cell", "choco-sign_ring3")]  # 2 trials of half the epochs, 10 % held out
    # successive halving: both learning rates to the first rung (1 of 2 epochs), the better one to the end
    assert int(tune["runs"]) == 2 + 1 and int(tune["steps"]) == 3 * math.ceil(0.5 * 2 * (45_000 // 3 // 4))
    assert rows[("run", "allreduce-none_ring3_s0")]["shape"] == "cifar10-resnet8 n=3 b=4"
    for row in tiny_plan:
        hours = (int(row["steps"]) * float(row["s_per_step"]) + int(row["evaluations"]) * float(row["s_per_eval"])) / 3600
        assert float(row["hours"]) == pytest.approx(hours, rel=1e-4)
        assert int(row["runtime_min"]) == runtime_minutes(float(row["hours"]), 1.5, 10)
        assert "synthetic data" in row["note"] and row["submissions"] == "1"
        assert "timed: per-worker loop, imposed by --vectorize false (the jobs follow task_options.vectorize=auto)" \
            in row["note"]


@pytest.mark.slow  # a Snakemake dry run: `make test` runs it, test-fast does not
def test_plan_true_targets_the_plan_alone(tmp_path):
    _, said = cli("-n", "--configfile", str(ROOT / "config/table1.yaml"), "--config", "scale=gpu", "plan=true",
                  "--directory", str(tmp_path))
    counts = {line.split()[0]: line.split()[1] for line in said.splitlines() if line[:4] in ("plan", "all ")}
    assert counts == {"plan": "1", "all": "1"}


def test_a_shape_out_of_gpu_memory_is_listed_without_hours(tmp_path, monkeypatch):
    import torch

    import bench.plan.command as command

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(command, "measure", out_of_memory)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    out = tmp_path / "plan.csv"
    assert main(["plan", "--configfile", str(tmp_path / "tiny.yaml"), "--device", "cpu", "--quiet",
                 "--out", str(out)]) == 0
    rows = read_plan(out)
    assert len(rows) == 8 and all(r["hours"] == "nan" and r["runtime_min"] == "" for r in rows)
    assert {r["note"] for r in rows} == {"out of memory on cpu"}


def test_a_study_without_training_runs_plans_no_job(tmp_path, capsys):
    out = tmp_path / "plan.csv"
    assert main(["plan", "--configfile", str(ROOT / "config/consensus.yaml"), "--quiet", "--out", str(out)]) == 0
    assert out.read_text().strip() == ",".join(COLUMNS) and "no training job" in capsys.readouterr().out


def test_a_job_past_max_runtime_asks_the_cap_and_is_resubmitted_from_its_checkpoint():
    assert capped(100, 2880) == (100, 1) and capped(2880, 2880) == (2880, 1) and capped(6000, 2880) == (2880, 3)
    rows = [Row("s", "gpu", "tune_cell", f"j{h}", 1, "shape", "cuda", "vmap", 1, 1, 1.0, 1.0, h, 1.5,
                *capped(runtime_minutes(h, 1.5, 10), 2880), float("nan"), "") for h in (10, 40, 100)]
    text = summary(rows, "s", "gpu", "cuda", 3, 1, 1.5, 10, cap_minutes=2880, retries=1)
    # 15 h, then 60 h and 150 h with the safety factor: 2 and 4 submissions of 48 h; 2 submissions a snakemake call
    assert "total           3              3               150.0  48.0 h, 303.0 h" in text
    assert "longest job: tune_cell j100, 100.0 h planned, 150.0 h with x1.5: 4 submissions of 48 h" in text
    assert "2 of 3 jobs need more than max_runtime (48 h)" in text
    assert "so 1 of them need snakemake run again (up to 2 calls in all)" in text


def test_plan_shows_progress_and_warns_of_a_busy_machine(tmp_path, monkeypatch, capsys):
    import bench.plan.command as command

    def fake_measure(cfg, device, steps, warmup, workdir, vectorize=None, max_workers=None, report=None):
        report("path", 20.0, "timed: vectorised, the path the jobs take (rule)")
        report("set-up", 10.0)
        for i in range(warmup + steps):
            report("warm-up step" if i < warmup else "timed step", 20.0)
        report("evaluation", 5.0)
        return Timing("cpu", 20.0, 1e-3, DataModel("memory", REAL["cifar10"], train_eval=5000), 1, "vmap", "n")

    monkeypatch.setattr(command, "measure", fake_measure)  # other processes took 60 % of the CPU while it timed:
    monkeypatch.setattr(command, "CpuMeter", lambda: nullcontext(SimpleNamespace(result={"others_cpu_share": 0.6})))
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    assert main(["plan", "--configfile", str(tmp_path / "tiny.yaml"), "--device", "cpu", "--steps", "2",
                 "--out", str(tmp_path / "plan.csv")]) == 0
    said = capsys.readouterr().err
    assert "2 shape(s) to time" in said and "shape 1/2: timed step 3/3: 20 s" in said
    assert "shape 1/2: built, gradient path settled in 20 s; timed: vectorised, the path the jobs take" in said
    # after the first step: 3 more parts of this shape, then a set-up and 4 parts of the other
    assert "shape 1/2: about 60 s left for this shape, about 3 min for the plan" in said
    assert "WARNING: other processes took 60% of this machine's CPU while shape 2 was timed" in said
    assert {r["others_cpu_share"] for r in read_plan(tmp_path / "plan.csv")} == {"0.6"}
