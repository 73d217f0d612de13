"""The entry points' promise, as properties (issue 13): for random settings, specs, studies and edge files,
`bench run` and a study at DAG build end in exit 0 with a result, or exit 2 with ONE line on stderr: never a
traceback, a hang, or a file written outside the output given. What these found once is a row of
tests/test_bad_input.py's tables, where the finds of their properties for `bench topology`, `consensus` and
`tune-gamma` are too (those of `python -m analysis` on damaged results: tests/test_analysis_damaged_files.py's).

Each example runs in this process under a wall-clock alarm, in a fresh folder as its working folder (a relative
path written by mistake lands there) with $HOME an empty folder. Values are drawn from one pool of words a person
might type, right for some setting and wrong for most, so an example is a valid command changed in a few places.
The examples are derandomized (CI sees the same ones); ENTRY_PROPERTY_SCALE=20 ENTRY_PROPERTY_RANDOM=1 hunts for more.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import signal
import sys
import tempfile
import warnings
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import bench.run
import bench.run.launch
from bench.algorithms import ALGORITHMS
from bench.cli import main as bench_main
from bench.errors import BenchError
from bench.files import is_temporary
from bench.pipeline import Study
from bench.pipeline.study import BLOCK_AXES, NOT_IN_BLOCKS
from bench.run.config import KEYS
from bench.tasks import task_option_names
from hostile import ROOT, assert_refused

IN = "{IN}"  # the example's folder of input files, in generated arguments
LIMIT_S = 60  # wall-clock bound of one example
SCALE = float(os.environ.get("ENTRY_PROPERTY_SCALE", "1"))
RANDOM = os.environ.get("ENTRY_PROPERTY_RANDOM") == "1"


def _profile(examples: int):
    return settings(max_examples=max(1, round(examples * SCALE)), deadline=None, derandomize=not RANDOM,
                    database=None, print_blob=RANDOM, suppress_health_check=list(HealthCheck))


class _Hang(BaseException):
    """Raised by the alarm inside the code under test; not an Exception, so nothing there swallows it."""


def _call(entry, argv: list[str]):
    """(status, stdout, stderr) of ``entry(argv)`` as a person would see them: argparse's SystemExit is a status,
    the warnings a plain `python -m bench` prints are lines of stderr. An escaping exception or a run past LIMIT_S
    fails the example."""
    out, err = io.StringIO(), io.StringIO()

    def alarm(_signum, _frame):
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            warnings.resetwarnings()
            warnings.simplefilter("ignore", DeprecationWarning)  # Python's default filters, less __main__'s
            for quiet in (PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", quiet)
            try:
                status = entry(argv)
            except SystemExit as stop:  # argparse
                status = stop.code
    except _Hang:
        raise AssertionError(f"still running after {LIMIT_S} s: {shlex.join(argv)}") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    stderr = err.getvalue() + "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
    event(f"exit {status}")  # --hypothesis-show-statistics counts the outcomes
    note(f"status {status}\nstdout: {out.getvalue()[-2000:]}\nstderr: {stderr[-2000:]}")
    return status, out.getvalue(), stderr


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


class Sandbox:
    """A fresh working folder per example: ``in/`` the input files (never changed), ``out/`` the output given,
    ``data/`` a data root; nothing else may appear."""

    def __init__(self, base: Path, files: dict[str, bytes | None] | None = None):
        self.root = Path(tempfile.mkdtemp(dir=base))
        self.inputs, self.out = self.root / "in", self.root / "out"
        self.inputs.mkdir()
        for name, content in (files or {}).items():  # None: a directory where a file is expected
            (self.inputs / name).mkdir() if content is None else (self.inputs / name).write_bytes(content)
        self.before = _files(self.inputs)

    def fill(self, words: list[str]) -> list[str]:
        return [w.replace(IN, str(self.inputs)) for w in words]

    def call(self, entry, argv: list[str], allowed=("out", "data")):
        cwd = os.getcwd()
        os.chdir(self.root)
        try:
            status, out, err = _call(entry, self.fill(argv))
        finally:
            os.chdir(cwd)
        outside = sorted(str(p.relative_to(self.root)) for p in self.root.iterdir()
                         if p.name not in ("in", *allowed))
        assert not outside, f"written outside the output: {outside}"
        assert _files(self.inputs) == self.before, "an input file was changed"
        leftovers = [p.name for p in self.root.rglob("*") if p.name == ".bench.lock" or is_temporary(p.name)]
        assert not leftovers, leftovers
        assert status in (0, 2), (status, err)
        if status == 2:  # bench's or argparse's own form: `bench: error: ...`, `bench run: error: ...`
            line = assert_refused(status, err)
            assert line.split(":")[0].split()[0] in ("bench", "analysis", "error"), line
        return status, out, err


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.mktemp("entry")


def _outputs_in_repository() -> set[str]:
    """What an entry point writes, found in the repository (results/ and logs/ are the pipeline's)."""
    names = {"run.json", "metrics.parquet", "checkpoint.pt", ".bench.lock", "traces.csv", "summary.csv", "b.json"}
    found = set()
    for here, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in {".venv", ".git", "__pycache__", ".hypothesis", "results", "logs"}]
        found.update(os.path.join(here, n) for n in files if n in names or is_temporary(n))
    return found


@pytest.fixture(autouse=True)
def nothing_written_in_the_repository_or_home(tmp_path_factory, monkeypatch):
    """$HOME is an empty folder meanwhile, so that anything written there is seen (the γ cache and generated
    data belong in $CHOCO_BENCH_CACHE; matplotlib's font cache and config are not the suite's)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    before = _outputs_in_repository()
    yield
    assert _outputs_in_repository() - before == set()
    written = [str(p.relative_to(home)) for p in home.rglob("*")]
    assert not [p for p in written if not p.startswith((".cache", ".config"))], written


# ---- what a person might type ------------------------------------------------------------------------------
WORDS = ["0", "1", "2", "3", "4", "0.5", "0.25", "1e-9", "-1", "1.5", ".nan", ".inf", "-.inf", "1e400", str(2**70),
         "true", "false", "null", "x", "", " ", "é", "[1,", "[0.5]", "[1, 2]", "{}", "{a: 1}", "!!float ;", "*a",
         "auto", "ring", "torus", "complete", "star", "one-peer-exp", "random-regular:3", "erdos-renyi:0.5",
         f"file:{IN}/e0.txt", f"file:{IN}/adir", "file:", "sign", "top:0.5", "rand:0.25,unbiased=true", "qsgd:4",
         "qsgd:0", "top:2", "zip:3", "none", "choco", "dpsgd", "dcd", "allreduce", "lsq", "logreg", "shuffle",
         "sorted", "dirichlet:0.5", "dirichlet:0", "exp", "constant", "warmup-multistep", "paper", "code",
         "edge-10m", "datacenter-10g,latency=0", "edge-10m,medium=broadcast", "lan-1g", "measured", "cpu",
         "cuda:x", "sim", "all", "tuned", "metropolis", "uniform", "optimal", "{drop: 0.1}", "{late: 0.5}"]
word = st.one_of(*[st.sampled_from(WORDS)] * 3, st.text(max_size=8))  # one_of draws each branch alike
edge_file = st.sampled_from([b"0 1\n1 2\n2 3\n3 0\n", b"# a ring\n0 1\n2 1\n2 3\r\n3 0", b"0 1\n1 2\n2 3\n3 0\n0 9\n",
                             b"0 1\n1 1\n", b"0 1\n2 3\n", b"", b"0 1 2\n", b"-1 0\n", b"0.5 1\n", b"\xff\xfe\x00",
                             f"0 {2**70}\n".encode()])
FILES = st.builds(lambda e0: {"e0.txt": e0, "adir": None}, edge_file)
OUTS = st.sampled_from(["out"] * 8 + ["out/a", "", f"{IN}/e0.txt", f"{IN}/e0.txt/sub", f"{IN}/adir/../../out"])
TINY = ["--task", "lsq", "--nodes", "4", "--epochs", "0.25", "--batch-size", "8", "--set", "task_options.dim=8",
        "--set", "task_options.n_train=128", "--set", "task_options.n_test=32", "--set", "gamma_tune_steps=20"]


@st.composite
def run_case(draw):
    """(argv of a `bench run`, --out, files for in/): TINY with a few settings, flags or options changed."""
    argv = list(TINY)
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        key = draw(st.sampled_from([*KEYS, *[f"task_options.{o}" for o in task_option_names("lsq")],
                                    *[f"algorithm_options.{o}" for o in ("gamma", "rank", "beta", "order")],
                                    "lerning_rate", "task_options", "lr.x"]))
        value = draw(st.sampled_from(["null", "data", "data/sub", "", "data/../data"]) if key == "data_root" else word)
        argv += ["--set", f"{key}={value}"]
    if draw(st.integers(0, 3)) == 0:
        argv += [draw(st.sampled_from(["--algorithm", "--compressor", "--topology", "--lr", "--seed", "--data"])),
                 draw(word)]
    out = draw(OUTS)
    return argv, out, draw(FILES)


@_profile(examples=80)
@given(case=run_case())
def test_bench_run_builds_the_run_it_was_given_or_says_why_not(case, base):
    """Up to the first training step (the parser, the settings' checks, --out, the lock, the run's parts: graph,
    compressor, data, γ tuned, algorithm): exit 0 having built the run of the settings given, or one line."""
    argv, out, files = case
    box = Sandbox(base, files)
    with mock.patch.object(bench.run.launch, "Loop") as loop:  # the runner's loop: Loop(cfg, out, parts, ...).run()
        loop.return_value.run.return_value = 0
        status, _, _ = box.call(bench_main, ["run", *argv, "--out", out])
    if status == 2:
        assert not loop.called
        return
    loop.assert_called_once()
    cfg, _, parts = loop.call_args.args[:3]
    assert parts.topology.n == cfg.nodes and tuple(parts.algo.x.shape) == (cfg.nodes, parts.task.d)
    assert parts.algo.name == cfg.algorithm
    again = []  # the same command resolves to the same run
    with mock.patch.object(bench.run, "start", lambda settings, out, **kw: again.append(settings) or 0):
        assert box.call(bench_main, ["run", *argv, "--out", out])[0] == 0
    assert again[0].fingerprint() == cfg.fingerprint()


# ---- a study at DAG build ----------------------------------------------------------------------------------
STUDY_SETTINGS = [k for k in KEYS if k not in NOT_IN_BLOCKS and k not in BLOCK_AXES]
plain = st.one_of(st.sampled_from(WORDS), st.integers(-3, 40), st.floats(), st.booleans(), st.none())
method = st.builds("{}/{}".format, st.sampled_from(["choco", "dpsgd", "allreduce", "dcd", *ALGORITHMS.names()]),
                   st.sampled_from(["sign", "none", "top:0.5", "qsgd:4", "x"]))


@st.composite
def study_case(draw):
    block = {"method": draw(st.lists(method, min_size=1, max_size=2)),
             "topology": draw(st.lists(st.sampled_from(["ring", "complete", "star", f"file:{IN}/e0.txt", "torus",
                                                        "hypercube"]), min_size=1, max_size=2)),
             "nodes": draw(st.lists(st.sampled_from([3, 4, 9, 1, 32]), min_size=1, max_size=2))}
    for key in draw(st.lists(st.sampled_from([*STUDY_SETTINGS, "seed", "task", "lerning_rate"]), max_size=2,
                             unique=True)):
        block[key] = draw(st.lists(plain, min_size=1, max_size=2))
    config = {"study": "p", "task": draw(st.sampled_from(["lsq", "logreg", "x"])), "seeds": [0],
              "defaults": {"epochs": 1, **draw(st.dictionaries(st.sampled_from(STUDY_SETTINGS), plain, max_size=2))},
              "blocks": {draw(st.sampled_from(["b", "it's", "$(x)"])): block}}
    if draw(st.booleans()):
        config["tune"] = {"grid": {draw(st.sampled_from(["lr", "gamma", "momentum"])): [0.1, 0.5]}, "seeds": [0]}
    if draw(st.integers(0, 3)) == 0:
        config.update(scale="gpu", gpu={"defaults": draw(st.dictionaries(st.sampled_from(STUDY_SETTINGS), plain,
                                                                          max_size=2))})
    return config, draw(FILES)


def _schema_refuses(config) -> bool:
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    try:
        validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    except WorkflowError:
        return True
    return False


@_profile(examples=50)
@given(case=study_case())
def test_a_study_builds_and_bench_runs_its_commands_or_one_line(case, base):
    """As workflow/rules/common.smk: the schema, then the cells; every command line of a study accepted at DAG
    build is accepted by `bench run` as it is, with the settings the study asked for."""
    config, files = case
    box = Sandbox(base, files)
    config = json.loads(json.dumps(config, allow_nan=True).replace(IN, str(box.inputs)))  # plain data, as YAML
    if _schema_refuses(config):  # snakemake's own refusal of the file's shape
        return
    built = []

    def build(_argv):  # as common.smk: one line and a failed DAG build
        try:
            built.append(Study(config))
        except BenchError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0

    if box.call(build, [], allowed=())[0] == 2:
        return
    study, seen = built[0], []
    with mock.patch.object(bench.run, "start", lambda cfg, out, **kw: seen.append(cfg) or 0):
        for job in study.jobs():
            for asked in job.runs:
                tuned = study.tuned_cells.get(job.cell, ()) if job.rule != "tune_cell" else ()
                words = shlex.split(study.command(asked, "out", tuned))
                assert box.call(bench_main, words[words.index("run"):], allowed=())[0] == 0
                if not tuned:  # the settings the study asked for (the pipeline adds --quiet)
                    assert {**seen[-1].to_dict(), "quiet": None} == {**study.run_config(asked).to_dict(),
                                                                     "quiet": None}
