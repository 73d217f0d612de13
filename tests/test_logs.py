"""What a run says where nobody watches a terminal (a SLURM job's log, a pipeline's log file), and what
`bench run --help` and a refused run directory tell a person."""
import json
import re
import time

from analysis.load import load_runs
from bench.algorithms import ALGORITHMS
from bench.cli import main
from bench.compressors import COMPRESSORS
from bench.pipeline import Study
from bench.pipeline.status import FRESH_S, study_status
from bench.tasks import TASKS
from bench.topology.kinds import TOPOLOGIES
from hostile import assert_refused, run_cli
from test_run import SMALL as QUIET

# a small, fast run, not quiet; the step lines are written off a terminal (pytest's capture is not one)
SMALL = [word for word in QUIET if word != "--quiet"]
STEP_LINE = re.compile(r"^step (\d+)/(\d+) epoch \d+\.\d\d train_loss \S+ test_acc \S+ consensus \S+ "
                       r"Mbit/worker \S+ elapsed \d+:\d\d:\d\d ETA (\d+:\d\d:\d\d|\?)$")


# ---- progress lines ----------------------------------------------------------------------------------
def test_a_run_off_a_terminal_writes_a_line_per_evaluation_and_its_status_and_quiet_writes_nothing(tmp_path,
                                                                                                 capsys):
    data = tmp_path / "data"  # a fresh data folder: the data set is generated, and says so
    status, out, err = run_cli(main, ["run", *SMALL, "--set", f"data_root={data}", "--out", str(tmp_path / "a")],
                               capsys)
    assert status == 0 and out == ""
    lines = err.splitlines()
    steps = [line for line in lines if line.startswith("step ")]  # step 0 and every half epoch (below)
    matches = [STEP_LINE.match(line) for line in steps]
    assert all(matches), steps
    total = json.loads((tmp_path / "a" / "run.json").read_text())["total_steps"]
    assert [int(m.group(2)) for m in matches] == [total] * 5
    assert [int(m.group(1)) for m in matches] == [0, total // 4, total // 2, 3 * total // 4, total]
    assert matches[0].group(3) == "?" and matches[-1].group(3) == "0:00:00"  # no pace yet; nothing left
    assert "completed at step" in lines[-1] and "test_acc=" in lines[-1]  # the closing line, with the status
    generating = [i for i, line in enumerate(lines) if line.startswith("generating mnist1d")]
    assert generating and generating[0] < lines.index(steps[0]) and str(data) in lines[generating[0]]
    assert any(line.startswith("generated mnist1d in") for line in lines)

    quiet = ["run", *SMALL, "--set", f"data_root={tmp_path / 'data2'}", "--quiet", "--out", str(tmp_path / "b")]
    assert run_cli(main, quiet, capsys) == (0, "", "") and (tmp_path / "data2").is_dir()  # generated, silently


def test_the_plain_line_counts_elapsed_time_and_an_eta_from_this_process_pace():
    from bench.run.progress import Progress, clock

    assert clock(0) == "0:00:00" and clock(3723.4) == "1:02:03" and clock(90000) == "25:00:00"
    progress = Progress(total=100, done=40, steps_per_epoch=10)  # a resumed run: 40 steps were done before
    progress.started -= 6.0  # six seconds spent on 20 steps: the 40 left take 12 s
    row = {"step": 60, "epoch": 6.0, "train_loss": 0.5, "test_acc": 0.75, "consensus_distance": 1e-3,
           "bits_per_worker": 2e6, "wall_s": 125.0}
    line = progress.line(row)
    assert line.startswith("step 60/100 epoch 6.00 train_loss 0.5 test_acc 0.7500 consensus 0.001 ")
    assert line.endswith("elapsed 0:02:05 ETA 0:00:12")


# ---- γ tuning -----------------------------------------------------------------------------------------
GAMMA_AUTO = ["--task", "lsq", "--algorithm", "choco", "--topology", "ring", "--nodes", "4", "--epochs", "1",
              "--set", "gamma=auto", "--set", "compute_time=0.01"]


def test_gamma_tuning_says_what_it_does_and_how_long_it_took_unless_quiet(tmp_path, capsys):
    from bench.cache import cache_path

    argv = ["run", *GAMMA_AUTO, "--compressor", "rand:0.3", "--set", "gamma_tune_steps=7"]
    status, _, err = run_cli(main, [*argv, "--out", str(tmp_path / "a")], capsys)
    lines = err.splitlines()
    assert status == 0, err
    spec = r"rand:0\.3(,unbiased=false)?"  # the compressor as it names itself
    before = [i for i, line in enumerate(lines) if re.match(rf"tuning γ for {spec} on ring n=4: 20 values × 7 rounds", line)]
    after = [i for i, line in enumerate(lines) if re.match(rf"tuned γ = \S+ for {spec} on ring n=4 in \d+\.\d s$", line)]
    assert len(before) == 1 and len(after) == 1 and before[0] < after[0] < min(
        i for i, line in enumerate(lines) if line.startswith("step ")), err
    # tuned once: the next run of the same graph and compressor reads the cache, and says nothing of it
    _, _, err = run_cli(main, [*argv, "--seed", "1", "--out", str(tmp_path / "b")], capsys)
    assert "tuning γ" not in err and "step " in err

    quiet = [*argv[:-1], "gamma_tune_steps=6", "--quiet", "--out", str(tmp_path / "c")]
    assert run_cli(main, quiet, capsys) == (0, "", "")
    assert any("|rand:0.3" in key and key.endswith("|6|2000") for key in json.loads(cache_path("gamma.json").read_text()))  # it did tune


# ---- bench run --help ----------------------------------------------------------------------------------------
def test_run_help_gives_every_flag_a_text_with_its_choices_or_format_and_default(capsys):
    status, out, _ = run_cli(main, ["run", "--help"], capsys)
    assert status == 0
    text = " ".join(out.split())  # argparse wraps lines
    for name in [*ALGORITHMS.names(), *TASKS.names(), *COMPRESSORS.names(), *TOPOLOGIES.names()]:
        assert name in text, name  # every registered name, and the registries' own examples of specs
    for phrase in ["--lr LR learning rate", "(default: 0.1)", "(default: choco)", "(default: auto)", "(default: 8)",
                   "(default: datacenter-10g)", "top:0.1", "random-regular:3", "dirichlet:0.5", "--set KEY=VALUE",
                   "gamma_tune_steps=1000", "lr_schedule=constant", "task_options.KEY=VALUE", ".stale/"]:
        assert phrase in text, phrase
    # every flag has a help text
    assert not re.search(r"^  --[a-z-]+( [A-Z=_]+)?\s*$", out, flags=re.M)  # no flag without a text beside or below


# ---- a refused run directory --------------------------------------------------------------------------------
FAST = ["--task", "lsq", "--nodes", "4", "--epochs", "1", "--seed", "1", "--set", "compute_time=0.01", "--quiet"]


def test_a_run_directory_is_not_redone_refused_to_other_settings_naming_five_and_replace_stale_sets_it_aside(tmp_path,
                                                                                                           capsys):
    out = tmp_path / "runs" / "cell_s0"
    assert run_cli(main, ["run", *FAST, "--lr", "0.05", "--out", str(out)], capsys)[0] == 0
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.iterdir()}
    assert run_cli(main, ["run", *FAST, "--lr", "0.05", "--out", str(out)], capsys)[0] == 0  # completed: not redone
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.iterdir()} == before  # not a file touched
    status, stdout, err = run_cli(main, ["run", *FAST, "--lr", "0.2", "--set", "task_options.dim=10",
                                  "--out", str(out)], capsys)
    line = assert_refused(status, err, "lr: 0.05 -> 0.2", "task_options.dim: (unset) -> 10", "--replace-stale",
                          "another --out")
    first = json.loads(before["run.json"][1])
    kept = tmp_path / "runs" / ".stale" / f"cell_s0-{first['fingerprint']}"
    assert stdout == "" and str(kept) in line  # where to
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.iterdir()} == before  # nothing written
    assert not (tmp_path / "runs" / ".stale").exists()
    other = ["--lr", "0.2", "--batch-size", "8", "--set", "momentum=0.5", "--set", "weight_decay=0",
             "--set", "eval_every=0.5", "--set", "grad_clip=1.0", "--set", "lr_decay=0.5"]
    line = assert_refused(*run_cli(main, ["run", *FAST, *other, "--out", str(out)], capsys)[::2], "and 2 more")
    assert line.count(" -> ") == 5
    # set aside, the old run is kept whole, the new one takes its place, and the analysis reads the new one alone
    status, _, err = run_cli(main, ["run", *FAST, "--lr", "0.2", "--replace-stale", "--out", str(out)], capsys)
    assert status == 0 and "moved to" in err and json.loads((out / "run.json").read_text())["config"]["lr"] == 0.2
    assert json.loads((kept / "run.json").read_text()) == first and (kept / "metrics.parquet").exists()
    loaded = load_runs(tmp_path / "runs")
    assert len(loaded) == 1 and loaded.runs["lr"].item() == 0.2


def test_a_study_s_status_counts_its_runs_done_running_and_left_with_an_eta_from_their_pace(tmp_path):
    study = Study({"study": "s", "task": "mnist1d-mlp", "defaults": {"epochs": 4}, "seeds": [0],
                   "blocks": {"b": {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4, 8, 16, 32]}}})
    runs, times = list(study.runs), {"start_time": "2026-01-01T00:00:00", "end_time": "2026-01-01T00:00:10"}
    for run, status in zip(runs, ["completed", "completed", "running"]):  # the last run not started
        (folder := tmp_path / "runs" / run).mkdir(parents=True)
        (folder / "metrics.parquet").touch()
        (folder / "run.json").write_text(json.dumps({"status": status, "config": {"epochs": 4}, **times}))
    (tmp_path / f"{runs[2]}.log").write_text("data ready\nstep 20/40 epoch 2.00 train_loss 1.0\n")  # half done
    lines = [study_status(study, tmp_path, tmp_path, slots=2, now=time.time() + late).line() for late in (0, FRESH_S)]
    assert lines[0] == "s: 2/4 runs done, 1 running, 1 left; ETA 0:00:08"  # 2.5 s an epoch, 6 left, two at a time
    assert lines[1].startswith("s: 2/4 runs done, 0 running, 2 left")  # a run untouched that long was stopped
