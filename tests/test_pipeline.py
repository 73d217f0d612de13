"""The Snakemake pipeline: lint, DAGs of every study, what the SLURM profile asks of each job, and the tiny test study end to end."""
import json
import math
import re
import shlex
import subprocess
import sys

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.slow  # processes and pipelines: `make test` runs them, `make test-fast` does not


from shared_studies import ROOT  # noqa: F401 - other test files import it from here
from snakemake_api import STUDIES, cli


def test_lint_is_clean():
    assert "good condition" in cli("--lint")[1]


def test_every_study_builds_its_dag(study_dags):
    """Every study of config/, on the CPU and at scale=gpu (tests/snakemake_api.py: built once a session)."""
    broken = {name: said for name, said in study_dags.items() if said.startswith("BROKEN")}
    assert len(STUDIES) >= 14 and {name.split("@")[0] for name in study_dags} == set(STUDIES) and not broken, broken


def slurm_jobs(tmp_path, configfile, *config) -> tuple[list[dict], str]:
    """The jobs of a dry run under the slurm-gpu profile as the SLURM executor would see each (whether it is local:
    a dry run runs all locally, so Snakemake's `localrule` mark is not printed; its threads and resources; and,
    submitted, the sbatch line the plugin builds from them), and what the dry run said. `--cores` high, as under
    SLURM, where no core count caps a job's threads (a dry run caps them at one by default)."""
    import snakemake.jobs
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    jobs, log_info = [], snakemake.jobs.Job.log_info

    def seen(job, *args, **kwargs):
        rule, workflow = job.rule, job.dag.workflow
        local = rule.group is None and (rule.name in workflow._localrules or rule.norun)  # Workflow.is_local
        info = {"rule": rule.name, "wildcards": dict(job.wildcards_dict), "local": local, "threads": job.threads,
                "resources": {k: v for k, v in job.resources.items() if not k.startswith("_")}}
        if not local:
            params = {"run_uuid": "ID", "slurm_logfile": "LOG", "comment_str": "C", "workdir": None,
                      "account": "", "partition": f" -p {job.resources.get('slurm_partition')}"}
            info["sbatch"] = get_submit_command(job, params) + set_gres_string(job)
        jobs.append(info)
        return log_info(job, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(snakemake.jobs.Job, "log_info", seen)
        _, said = cli("-n", "--cores", "1024", "--profile", str(ROOT / "workflow/profiles/slurm-gpu"), "--configfile",
                      str(configfile), "--directory", str(tmp_path), *(["--config", *config] if config else []))
    return jobs, said


def _halving_work(points, shares, keep=1 / 3):
    """Runs' worth of work of successive halving: every point to the first share of the schedule, then
    ceil(points x keep) of them each rung's increment (bench/pipeline/halving.py)."""
    work, done = 0.0, 0.0
    for rung, share in enumerate(shares):
        if rung:
            points = math.ceil(points * keep)
        work, done = work + points * (share - done), share
    return work


def test_slurm_profile_sizes_training_by_its_work_or_plan_within_max_runtime_and_keeps_light_rules_local(tmp_path):
    study = yaml.safe_load((ROOT / "config/table1.yaml").read_text())
    tune = study["gpu"]["tune"]
    # a plan for one tuning job and one run: their runtimes come from there (hours x plan_safety, at least the
    # floor of 10 min), the others' from the task's runtime of one run x their work
    planned = "choco-sign_ring8"
    plan = tmp_path / "results" / "table1" / "plan.csv"
    plan.parent.mkdir(parents=True)
    plan.write_text("study,scale,rule,job,device,hours\n"
                    f"table1,gpu,tune_cell,{planned},cuda:NVIDIA H200,2.0\ntable1,gpu,run,{planned}_s0,cuda:0,0.001\n")
    # no cap here: the asked runtime is the task's runtime x the job's work
    jobs, said = slurm_jobs(tmp_path, ROOT / "config/table1.yaml", "scale=gpu", "max_runtime=1000000", "plan_safety=2")
    assert "runtime of 2 training jobs: planned in results/table1/plan.csv" in said

    light = {"select_cell", "tuned_table", "summarize", "figure", "report", "browser", "all"}
    by_rule = {}
    for job in jobs:
        by_rule.setdefault(job["rule"], []).append(job)
    assert set(by_rule) == light | {"tune_cell", "run"}
    assert all(job["local"] for rule in light for job in by_rule[rule])  # 54 light jobs + all: never submitted
    assert len(by_rule["select_cell"]) == len(by_rule["tune_cell"]) == 49
    submitted = [job for job in jobs if not job["local"]]
    assert {job["rule"] for job in submitted} == {"tune_cell", "run"} and len(submitted) == 49 + 147
    for job in submitted:  # one GPU, the task's CPUs and memory, the partition of the profile
        assert job["resources"]["cpus_per_task"] == 8 and "--cpus-per-task=8" in job["sbatch"]
        assert "--gpus=1" in job["sbatch"] and "-p gpu" in job["sbatch"] and "--mem 16000" in job["sbatch"]

    runtime = {(job["rule"], *job["wildcards"].values()): job["resources"]["runtime"] for job in submitted}
    runs = {runtime["run", f"{cell}_s{seed}"] for cell in ("choco-sign_ring8", "dcd-sign_ring8") for seed in (0, 1, 2)}
    assert runs == {24 * 60, 10}  # a run of cifar10-resnet20 without a plan: the task's runtime; the planned one
    budget = tune["budget"]
    shares = [budget, 0.5, 1.0]  # rungs: the budget's share of the schedule, then half, then all of it
    sizes = {knob: len(values) for knob, values in tune["grid"].items()}
    for cell, knobs in (("choco-qsgd4_ring8", ["lr", "weight_decay", "gamma"]),
                        ("dcd-qsgd4_ring8", ["lr", "weight_decay"])):
        trials = math.prod(sizes[k] for k in knobs)  # 40 for Choco (γ tuned too), 8 for DCD
        extension = sum(sizes[k] >= 3 for k in knobs)  # at most one full run per knob of 3+ values
        work = _halving_work(trials, shares) + extension
        assert runtime["tune_cell", cell] == pytest.approx(runtime["run", f"{cell}_s0"] * work, abs=1), cell
        assert runtime["tune_cell", cell] > runtime["run", f"{cell}_s0"] * trials * budget
    assert runtime["tune_cell", planned] == 2 * 60 * 2 and runtime["run", f"{planned}_s0"] == 10  # the plan

    # a plan timed on the CPU is not used, and said so; by default (max_runtime=2880) the days a tuning job
    # would ask are cut to 48 h, and said so
    plan.write_text("study,scale,rule,job,runs,shape,device,gradient_path,steps,evaluations,hours\n"
                    "table1,gpu,run,x,1,s,cpu,vmap,3,1,37\n")
    jobs, said = slurm_jobs(tmp_path, ROOT / "config/table1.yaml", "scale=gpu")
    warning = "WARNING: results/table1/plan.csv was timed on cpu, but these jobs run on cuda: its times are NOT used"
    assert warning in said
    assert max(job["resources"]["runtime"] for job in jobs) == 2880
    assert "would ask for more than max_runtime=2880 min" in said


def test_a_dist_run_asks_slurm_for_one_cpu_per_process(tmp_path):
    # 16 processes: more than the 8 CPUs the profile once gave every job
    study = yaml.safe_load((ROOT / "config/test-dist.yaml").read_text())
    study["study"] = "dist16"
    study["defaults"]["procs"] = 16
    study["blocks"]["methods"]["nodes"] = [16]
    (tmp_path / "dist16.yaml").write_text(yaml.safe_dump(study))
    runs = [job for job in slurm_jobs(tmp_path, tmp_path / "dist16.yaml")[0] if job["rule"] == "run"]
    assert len(runs) == 2
    for job in runs:
        assert not job["local"]
        assert job["resources"]["cpus_per_task"] == job["threads"] == 16
        assert "--cpus-per-task=16" in job["sbatch"] and "--gpus" not in job["sbatch"]  # lsq: a CPU task


def test_a_bad_study_or_setting_is_one_line_naming_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: bad\ntask: mnist1d-mlp\nblocks:\n  b:\n    method: [choco/sign]\n    topology: [ring]\n"
                   "    nodes: [8]\ndefaults: {learning_rate: 0.1}\n")
    for args, words in (
            (["--configfile", str(bad)], "learning_rate"),
            (["--configfile", str(ROOT / "config/test.yaml"), "--config", "epochz=1"],
             "error: the study's config: Additional properties are not allowed ('epochz'")):
        status, said = cli("-n", "--directory", str(tmp_path), *args, check=False)
        assert status != 0 and words in said, said
        assert len(said.splitlines()) < 8 and "properties:" not in said, said  # one line, not the schema


def test_the_locks_of_a_killed_driver_go_with_the_next_driver_and_a_live_drivers_stay(tmp_path):
    """Snakemake's locks of a driver killed outright stopped the next `make reproduce` until `--unlock` by hand."""
    from bench.pipeline import driver

    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").touch()
    hold = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print(flush=True); time.sleep(60)")
    live = subprocess.Popen([sys.executable, "-c", hold, str(tmp_path / ".snakemake" / driver.LOCK)],
                            stdout=subprocess.PIPE)
    try:
        live.stdout.readline()  # it holds the driver lock: a driver runs
        assert driver.claim(tmp_path) == ("", []) and (locks / "0.input.lock").exists()
    finally:
        live.kill()
        live.wait()
    words, stale = driver.claim(tmp_path)
    assert stale == ["0.input.lock"] and not any(locks.iterdir()) and words.startswith("export CHOCO_DRIVER=")


def test_the_test_study_survives_an_interruption_and_finishes_end_to_end(interrupted_study):
    """The driver killed part-way, the same command again (no --unlock), then the HTML report, all with nothing
    activated: no `python` on PATH (tests/shared_studies.py: the study is built once and the report's browser tests
    open the same one)."""
    where, seen = interrupted_study
    study = where / "results" / "test"
    at_signal, finished, after = seen["at_signal"], seen["finished"], seen["after"]
    assert 4 <= at_signal <= len(finished) < 14, f"the interruption should land part-way ({at_signal} at the signal)"
    assert not seen["summary_before_rerun"]
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
    assert (study / "consensus" / "summary.csv").stat().st_size > 0  # analysis.consensus ran
    assert {p.parent.name for p in (study / "consensus").glob("*/traces.csv")} == {"exact", "sign"}  # bench consensus
    # the HTML report has every figure with its own caption
    html = (where / "snakemake-report.html").read_text(errors="replace")
    captions = json.loads((study / "figures" / "index.json").read_text())
    assert "accuracy_curves.png" in html
    for name in ("consensus", "accuracy_curves"):  # the caption drawn for these runs, not a fixed text
        assert captions[name][:60] in html, name
    # every job's log says what the job did (no rule passes --quiet); a run's log is its progress lines
    logs = sorted((where / "logs" / "test").rglob("*.log"))
    assert logs and [str(p) for p in logs if p.stat().st_size == 0] == []
    run_logs = [p.read_text() for p in (where / "logs" / "test" / "runs").glob("*.log")]
    assert any("step " in text and " ETA " in text and "completed at step" in text for text in run_logs)


def test_run_settings_on_the_command_line_replace_the_studys_defaults_and_no_job_is_quiet(tmp_path):
    _, said = cli("-n", "-p", "--configfile", str(ROOT / "config/test.yaml"), "--directory", str(tmp_path),
                  "--config", "epochs=1", "lr=0.05")
    assert re.search(r"^total\s+\d+", said, flags=re.M), said[-2000:]  # the command line's dry run lists the jobs
    commands = [shlex.split(line) for line in said.splitlines() if "-m bench run" in line]
    settings = [json.loads(words[words.index("--settings") + 1]) for words in commands]
    assert settings and all(s["epochs"] == 1 for s in settings)  # config/test.yaml says 3
    # the diverging block sets its own lr (500), the others take the command line's
    assert {s["lr"] for s in settings} == {500, 0.05}
    # no rule passes --quiet (what a job's log then holds: the interrupted study's test above)
    shells = [line for line in said.splitlines() if "bench run" in line or "bench consensus" in line]
    assert shells and not any("--quiet" in line for line in shells), shells[:2]
    assert "runtime of the training jobs" not in said  # the SLURM request's line: only for a cluster's GPU study


def test_make_reproduce_takes_a_study_and_snakemake_arguments():
    make = ["make", "--no-print-directory", "-o", ".venv/.installed"]  # never (re)install from a test
    proc = subprocess.run([*make, "-n", "reproduce", "STUDY=noniid", "SNAKEMAKE_ARGS=--config epochs=3"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    (line,) = [line for line in proc.stdout.splitlines() if "/snakemake " in line]
    assert line.endswith("--rerun-incomplete --configfile config/noniid.yaml --config epochs=3")
    assert "the report is results/noniid/report.html" in proc.stdout
    default = subprocess.run([*make, "-n", "reproduce"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "--configfile" not in default.stdout and "results/smoke/report.html" in default.stdout
    bad = subprocess.run([*make, "reproduce", "STUDY=nope"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "error: STUDY=nope: no config/nope.yaml; studies: " in bad.stdout + bad.stderr
    assert " noniid " in bad.stdout + bad.stderr
