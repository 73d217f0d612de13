"""The entry points' promise, as properties (issue 13): for random specs, keys, values and files,
`bench run`, `bench topology`, `bench consensus`, `bench tune-gamma`, a study file at DAG build and
`python -m analysis` end in exit 0 with a valid result, or exit 2 with ONE line on stderr - never a
traceback, never a hang, never a file written outside the output they were given.

Every example runs in-process (a child process costs seconds of imports; one property runs a few
there) under a wall-clock alarm, with its working folder set to a fresh temporary folder, so a relative
path written by mistake shows up there, and $HOME set to an empty one. The strategies mix valid values
(kept tiny, so a valid run takes well under a second) with invalid ones. The examples are derandomized:
CI sees the same ones every time, and a failure prints the falsifying example, which reruns as it is.
The alarm interrupts Python code only: a single native call that never returns is caught by the child
process's timeout alone.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, assume, event, example, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

import bench.run
import bench.run.launch
from analysis import cli as analysis_cli
from analysis_fixtures import make_cell
from bench.cli import main as bench_main
from bench.errors import BenchError
from bench.files import is_temporary
from bench.pipeline import Study
from bench.pipeline.study import BLOCK_AXES, NOT_IN_BLOCKS
from bench.run.config import KEYS
from bench.tasks import TASKS, task_option_names
from hostile import assert_refused

ROOT = Path(__file__).resolve().parents[1]
IN = "{IN}"  # stands for the example's folder of input files in generated arguments
LIMIT_S = 60  # wall-clock bound of one example (a valid one takes about a second)


# CI runs the same examples every time; to hunt for more, ENTRY_PROPERTY_SCALE=20 ENTRY_PROPERTY_RANDOM=1
# (new random examples, 20 times as many); ENTRY_DEBUG=1 with --hypothesis-show-statistics counts the outcomes
# by the start of their stderr
SCALE = float(os.environ.get("ENTRY_PROPERTY_SCALE", "1"))
RANDOM = os.environ.get("ENTRY_PROPERTY_RANDOM") == "1"


def _profile(examples: int):
    return settings(max_examples=max(1, round(examples * SCALE)), deadline=None, derandomize=not RANDOM,
                    database=None, print_blob=RANDOM, suppress_health_check=list(HealthCheck))


# ---- running an entry point and judging its outcome ---------------------------------------------------
class _Hang(BaseException):
    """Raised by the alarm inside the code under test; not an Exception, so nothing there swallows it."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    def alarm(_signum, _frame):
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# the warning filters of a plain `python -m bench` (no -W, no dev mode): what a user would see on stderr
_DEFAULT_FILTERS = [("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, ""),
                    ("ignore", PendingDeprecationWarning, ""), ("ignore", ImportWarning, ""),
                    ("ignore", ResourceWarning, "")]


def _call(entry, argv: list[str], limit: float = LIMIT_S):
    """(status, stdout, stderr) of ``entry(argv)`` in this process, as a person would see them: argparse's
    SystemExit is a status, the warnings Python would print are lines of stderr. An exception that escapes
    fails the example (a traceback); so does running past ``limit`` seconds (a hang)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err), _time_limit(limit):
            warnings.resetwarnings()
            for action, category, module in reversed(_DEFAULT_FILTERS):
                warnings.filterwarnings(action, category=category, module=module)
            try:
                status = entry(argv)
            except SystemExit as stop:  # argparse
                status = stop.code
    except _Hang:
        raise AssertionError(f"still running after {limit} s: {shlex.join(argv)}") from None
    stderr = err.getvalue() + "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
    if currently_in_test_context():  # a Hypothesis example, not one of the fixed cases
        event(f"exit {status}" + (" " + err.getvalue()[:50] if os.environ.get("ENTRY_DEBUG") else ""))
        note(f"status {status}\nstdout: {out.getvalue()[-2000:]}\nstderr: {stderr[-2000:]}")
    return status, out.getvalue(), stderr


def _refused(status, err: str, prog: str) -> str:
    """Exit 2 and one line of the program's own form (``bench: error: ...``, argparse's ``bench run: error:
    ...``), no traceback."""
    line = assert_refused(status, err)
    assert re.match(rf"{prog}( [a-z-]+)?: error: \S", line), line
    return line


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _paths(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


class Sandbox:
    """A fresh folder per example, the working folder while the entry point runs: ``in/`` holds the input
    files (never to be changed), ``out/`` is the output given, ``data/`` a data root; nothing else may appear."""

    def __init__(self, base: Path, files: dict[str, bytes] | None = None):
        self.root = Path(tempfile.mkdtemp(dir=base))
        self.inputs, self.out, self.data = self.root / "in", self.root / "out", self.root / "data"
        self.inputs.mkdir()
        for name, content in (files or {}).items():
            if content is None:  # a directory where a file is expected
                (self.inputs / name).mkdir()
            else:
                (self.inputs / name).write_bytes(content)
        self.before = _files(self.inputs)

    def fill(self, words: list[str]) -> list[str]:
        return [w.replace(IN, str(self.inputs)) for w in words]

    def call(self, entry, argv: list[str], allowed=("out", "data"), limit: float = LIMIT_S):
        cwd = os.getcwd()
        os.chdir(self.root)
        try:
            result = _call(entry, argv, limit)
        finally:
            os.chdir(cwd)
        outside = sorted(p for p in _paths(self.root)
                         if Path(p).parts[0] not in ("in", *allowed))
        assert not outside, f"written outside the output: {outside}"
        assert _files(self.inputs) == self.before, "an input file was changed"
        return result


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.mktemp("entry")


# what the entry points write: a new file of such a name in the repository is theirs (other files may be another
# process's work in a shared checkout; results/ and logs/ are the pipeline's, which may be running meanwhile)
OUTPUT_NAMES = {"run.json", "metrics.parquet", "checkpoint.pt", ".bench.lock", "traces.csv", "summary.csv",
                "summary.parquet", "cells.csv", "gamma.json", "b.json", "config.yaml", "e0.txt", "e1.txt"}


def _outputs_in_repository() -> set[str]:
    skip = {".venv", ".git", "__pycache__", ".pytest_cache", ".hypothesis", ".snakemake", "results", "logs"}
    out = set()
    for here, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip]
        out.update(os.path.join(here, n) for n in names if n in OUTPUT_NAMES or is_temporary(n))
    return out


@pytest.fixture(autouse=True)
def nothing_new_in_the_repository_or_home(tmp_path_factory, monkeypatch):
    """No example writes into the repository (relative paths land in the sandbox) nor under $HOME: the γ cache
    and generated data go to $CHOCO_BENCH_CACHE, a temporary folder in the tests. $HOME is an empty folder
    meanwhile, so that anything written there is seen."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    before = _outputs_in_repository()
    yield
    assert _outputs_in_repository() - before == set()
    # matplotlib (imported by the mnist1d package) keeps its font cache and config folder there: not the suite's
    theirs = {".cache", ".config", ".cache/matplotlib", ".config/matplotlib"}
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert [p for p in written if p not in theirs and not p.startswith((".cache/matplotlib/", ".config/matplotlib/"))] \
        == [], written


# ---- strategies: specs, values, files -------------------------------------------------------------------
def mostly(valid, invalid, odds: int = 3):
    """``valid`` ``odds`` times for each ``invalid``: every part of an example is drawn this way, so that a fair
    share of the examples is a whole valid command (whose result is checked) and the rest is wrong in a few
    places. (``st.one_of(valid, valid, valid, invalid)`` would draw each half as often.)"""
    return st.sampled_from([0] * odds + [1]).flatmap(lambda k: (valid, invalid)[k])


JUNK_WORDS = ["", " ", "x", "none", "null", "?", "-", ":", ",", "a,b=c", "ring:", "\x00", "é", "💥", "--",
              "-1", "0", "1e400", "nan", "inf", "[1, 2]", "{a: 1}", "'quoted'", "a" * 300]
junk = st.one_of(st.sampled_from(JUNK_WORDS), st.text(max_size=10))
fraction_text = mostly(st.sampled_from(["0.5", "1", "0.01", "1.0", "0.25", "1e-3"]),
                       st.one_of(st.sampled_from(["0", "-0.5", "2", "nan", "inf", "1e-300", "x", ""]),
                                 st.floats(allow_nan=True, allow_infinity=True).map(repr)))
compressor_spec = mostly(
    st.one_of(st.sampled_from(["none", "sign", "top:0.5", "rand:0.5", "qsgd:4", "qsgd:2,biased=false",
                               "rand:0.25,unbiased=true", "qsgd:8,biased=true", "top:1.0"]),
              st.builds("{}:{}".format, st.sampled_from(["top", "rand"]), fraction_text),
              st.builds("qsgd:{}".format, st.integers(1, 16))),
    st.one_of(
        st.builds("qsgd:{}".format, st.one_of(st.integers(-2, 40).map(str), st.sampled_from(["x", "2.5", "", "1e9"]))),
        st.builds("{},{}={}".format, st.sampled_from(["sign", "top:0.5", "rand:0.5", "qsgd:4", "none"]),
                  st.sampled_from(["unbiased", "biased", "k", ""]), st.sampled_from(["true", "false", "maybe", ""])),
        st.sampled_from(["zip:3", "top", "rand", "qsgd", "sign:1", "none:0", "top:0.5:0.5", "TOP:0.5"]),
        junk))
node_text = mostly(st.integers(3, 12).map(str),
                   st.one_of(st.integers(-2, 2).map(str), st.sampled_from(["0", "1", "32", "10000000", str(2**70),
                                                                           "1.5", "x", "", "4097", "0x10"])))


@st.composite
def edge_file(draw, n: int | None = None) -> bytes:
    """An edge list: a ring on n nodes written in a random way (comments, both directions, duplicates), or
    one damaged: an edge out of range, a self-loop, a lone node, a bad line, binary."""
    n = draw(st.integers(2, 8)) if n is None else max(n, 2)
    edges = [(i, (i + 1) % n) for i in range(n)]
    lines = [f"{j} {i}" if draw(st.booleans()) else f"{i} {j}" for i, j in edges]
    kind = draw(st.sampled_from(["good", "good", "good", "out-of-range", "self-loop", "cut", "junk-line", "empty",
                                 "binary", "three-fields", "negative", "float", "huge"]))
    if kind == "out-of-range":
        lines.append(f"0 {n + draw(st.integers(0, 3))}")
    elif kind == "self-loop":
        lines.append("1 1")
    elif kind == "cut":
        lines = lines[:-1] + [f"{n - 1} {n - 1}"] if n > 3 else lines[:1]
    elif kind == "junk-line":
        lines.insert(draw(st.integers(0, len(lines))), draw(st.text(max_size=12)))
    elif kind == "empty":
        lines = ["# nothing"]
    elif kind == "binary":
        return draw(st.binary(min_size=1, max_size=64))
    elif kind == "three-fields":
        lines.append("0 1 2")
    elif kind == "negative":
        lines.append("-1 0")
    elif kind == "float":
        lines.append("0.5 1")
    elif kind == "huge":
        lines.append(f"0 {2**70}")
    if draw(st.booleans()):
        lines.insert(0, "# a comment")
    return ("\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n"]))).encode()


def topology_spec(files: list[str]):
    return mostly(
        st.one_of(st.sampled_from(["ring", "torus", "complete", "star", "exponential"]),
                  st.builds("random-regular:{}".format, st.integers(2, 4)),
                  st.builds("erdos-renyi:{}".format, st.sampled_from(["0.5", "0.9", "1"])),
                  st.sampled_from([f"file:{IN}/{f}" for f in files])),
        st.one_of(
            st.sampled_from(["social", "file:", f"file:{IN}/missing.txt", f"file:{IN}/adir", f"file:{IN}/e0.txt,x=1",
                             "ring:3", "ring,x=1", "hypercube", "torus:3x3", "RING", "random-regular", "erdos-renyi"]),
            st.builds("random-regular:{}".format, st.one_of(st.integers(-1, 13).map(str), st.sampled_from(["x", ""]))),
            st.builds("erdos-renyi:{}".format, fraction_text),
            junk))


weights_text = mostly(st.sampled_from(["uniform", "metropolis", "maxdeg"]),
                      st.sampled_from(["optimal", "", "none", "Uniform", "x,y=1"]))
number_text = st.one_of(
    st.sampled_from(["0", "1", "-1", "0.5", "2", "1e400", "-1e400", ".nan", "nan", ".inf", "-.inf", "inf", "1e-300",
                     "4294967296", "2147483648", str(2**64), "0x10", "1_000", "true", "false", "null", "x"]),
    st.integers(-10, 10).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
yaml_text = st.one_of(  # any value --set reads as YAML, including broken YAML, aliases and tags
    number_text, junk,
    st.sampled_from(["[1,", "{a: 1", "[1, 2]", "{a: 1}", "[&a 1, *a]", "*a", "&a x", "!!python/object:os.system ls",
                     "!!binary aGVsbG8=", "!!float x", "2026-01-01", "a: b: c", "- 1", "---", "...", "%YAML 1.1",
                     "|", ">", "'", '"', "[" * 40 + "1" + "]" * 40, "[" * 3000 + "]" * 3000, "!!float ;", "!!int",
                     "!!bool x", "!!timestamp x", "!!timestamp 2026-01-01", "!!set {a}", "!!str", "? a"]),
)


def _bounded(valid: list[str]):
    """Values of a key whose size is the run's work: small valid ones, and invalid ones never large."""
    return mostly(st.sampled_from(valid), st.sampled_from(["0", "-1", ".nan", ".inf", "-.inf", "true", "x", "", "[1]",
                                                           "{a: 1}", "1.5e-300", "[1,", "1.5"]))


def _either(valid: list[str], invalid=()):
    """Mostly one of ``valid``; else one of ``invalid`` or any number or YAML a person might type."""
    return mostly(st.sampled_from(valid), st.one_of(yaml_text, *([st.sampled_from(list(invalid))] if invalid else [])))


TASK_NAMES = TASKS.names()
# a value of each setting a run reads: what a person would write, right or wrong; the keys whose size is
# the run's work (epochs, data sizes, steps...) get small values only, so that every valid run is short
SET_VALUES = {
    "task": mostly(st.sampled_from(["lsq", "logreg"]), st.one_of(st.sampled_from([*TASK_NAMES, "consensus"]), junk)),
    "algorithm": _either(["choco", "dpsgd", "dcd", "ecd", "allreduce"], ["local", "Choco"]),
    "compressor": compressor_spec,
    "topology": topology_spec(["e0.txt", "e1.txt"]),
    "nodes": node_text,
    "weights": st.one_of(weights_text, st.just("null")),
    "epochs": _bounded(["0.25", "0.5", "1", "0.1", "1e-9", "0.05"]),
    "seed": _either(["0", "1", "2", "7", "2147483647"], ["-1", "2147483648", "4294967296", "1.5"]),
    "lr": _either(["0.1", "0.01", "0", "1", "1e3", "1e-300", "1e38"], ["-0.1", "1e39", "1e300"]),
    "lr_schedule": _either(["constant", "warmup-multistep", "exp"], ["cosine", "", "null"]),
    "warmup_epochs": _either(["0", "0.1", "1", "5"], ["-1"]),
    "milestones": _either(["[]", "[0.5]", "[0.2, 0.6]", "0.5", "0.2,0.4", "[5]"], ["[x]", "[.nan]", "[-1]", "[[1]]"]),
    "lr_decay": _either(["0.1", "0.5", "1", "2", "1e300"], ["0", "-1"]),
    "batch_size": _bounded(["1", "2", "8", "32", "64", "1000000", str(2**70)]),
    "data": _either(["shuffle", "split", "sorted", "dirichlet:0.5", "dirichlet:100", "dirichlet:0.01"],
                    ["dirichlet:0", "dirichlet:x", "dirichlet", "dirichlet:-1", "dirichlet:nan", "dirichlet:0.5,k=1",
                     "iid", "dirichlet:inf", "dirichlet:1e-300"]),
    "val_fraction": _either(["0", "0.1", "0.5", "0.99"], ["1", "-0.1"]),
    "momentum": _either(["0", "0.9", "0.5", "0.99"], ["1", "-0.5", "5"]),
    "nesterov": _either(["true", "false", "yes", "1", "0"], ["maybe"]),
    "weight_decay": _either(["0", "1e-4", "0.1"], ["-1"]),
    "grad_clip": _either(["null", "none", "0.4", "10"], ["0", "-1"]),
    "gamma": _either(["auto", "0.5", "1", "0.01"], ["0", "1.5", "-0.5", "Auto"]),
    "gamma_tune_steps": _bounded(["1", "5", "20"]),
    "order": _either(["paper", "code"], ["other", ""]),
    "per_layer": _either(["true", "false"], ["no", "2", "[1]"]),
    "network": _either(["datacenter-10g", "datacenter-100g", "p2p-100m", "edge-10m", "datacenter-10g,latency=0",
                        "edge-10m,bandwidth=1e3"],
                       ["lan-1g", "", "datacenter-10g,latency=-1", "datacenter-10g,bandwidth=0",
                        "datacenter-10g,bandwidth=nan", "datacenter-10g,latency=inf", "datacenter-10g:1",
                        "datacenter-10g,mtu=9000", "datacenter-10g,bandwidth=inf"]),
    "compute_time": _either(["measured", "0", "0.001", "1e-9"], ["-1", "fast"]),
    "eval_every": _bounded(["0.05", "0.1", "0.5", "1", "2", "1000"]),
    "eval_local_workers": _either(["0", "1", "2", "4", "12", "all"], ["-1", "1.5", str(2**70), "All", "none"]),
    "checkpoint_every": _bounded(["0.05", "0.5", "1", "1000"]),
    "stop_at": _either(["null", "0.1", "0.5", "2"], ["0", "-1", "x"]),
    "divergence_loss": _either(["1000", "1e-9", "1e300", "10"], ["0", "-1"]),
    "device": _either(["cpu"], ["cuda", "cuda:0", "cuda:x", "cuda:-1", "tpu", "CPU", "", "cpu:0", "meta"]),
    # dist spawns a process per worker (seconds of imports each): its launch is tests/test_dist.py's
    "backend": _either(["sim"], ["gloo", "", "SIM", "mpi"]),
    "procs": _either(["null", "1", "2"], ["-1", "0", "3", "x"]),
    "dist_timeout": _either(["60", "0.5", "1e9"], ["0", "-1"]),
    "data_root": _either(["null", "data", "data/sub"], ["", "data/../data"]),  # relative: the sandbox's data/
    "quiet": _either(["true", "false"], ["x"]),
    "recipe": _either(["none", "tuned"], ["best", ""]),
    "task_options": _either(["{}", "{dim: 4}", "{n_train: 64, n_test: 16}", "{hidden: [8]}"],
                            ["[1, 2]", "{1: 2}", "x", "null", "{dim: x}"]),
}
SET_VALUES.update({key: yaml_text for key in KEYS if key not in SET_VALUES})  # a key added since: any value
ABSURD = str(10**15)  # a size no machine holds: refused at once (a merely large one would run for hours)
OPTION_VALUES = {  # task_options.NAME: sizes kept small, or absurd
    "dim": _bounded(["1", "4", "16", ABSURD]), "n_train": _bounded(["10", "64", "100", "200", ABSURD]),
    "n_test": _bounded(["0", "10", "16", "50"]), "steps_per_epoch": _bounded(["1", "5", "10"]),
    "eval_batch": _bounded(["1", "7", "1000", str(2**40)]),
    "hidden": _bounded(["[8]", "[4, 4]", "[]", "8", "[0]", f"[{ABSURD}]"]), "channels": _bounded(["2", "4", ABSURD]),
    "vectorize": st.sampled_from(["true", "false", "auto", "x", "1"]),
    "size": _bounded(["8", "16", "4"]), "emb": _bounded(["4"]), "bptt": _bounded(["4"]), "num_layers": _bounded(["1"]),
    "dropout": st.sampled_from(["0", "0.5", "1", "-1", "x"]), "tie_weights": st.sampled_from(["true", "false", "x"]),
    "train_eval_tokens": _bounded(["16"]), "nonsense": yaml_text,
}


def setting(task: str = "lsq"):
    """(key, value as text) of one setting: a run setting, an option of ``task`` (or of another task), or a key
    that does not exist."""
    options = [k for k in OPTION_VALUES if k in (task_option_names(task) if task in TASK_NAMES else [])]
    option = st.sampled_from(options or sorted(OPTION_VALUES))
    return mostly(
        st.one_of(st.sampled_from(sorted(SET_VALUES)).flatmap(lambda k: st.tuples(st.just(k), SET_VALUES[k])),
                  mostly(option, st.sampled_from(sorted(OPTION_VALUES))).flatmap(
                      lambda k: st.tuples(st.just(f"task_options.{k}"), OPTION_VALUES[k]))),
        st.tuples(st.sampled_from(["lerning_rate", "", "task_options", "task_options.", "lr.x", "LR", "nodes "]),
                  yaml_text), odds=8)


def set_item(task: str = "lsq"):
    return mostly(setting(task).map(lambda kv: f"{kv[0]}={kv[1]}"), st.sampled_from(["lr", "=1", "lr:0.1", ""]), odds=8)


FLAGS = {  # `bench run` flag -> its value; the flags are parsed by argparse (int, float or str)
    "--task": SET_VALUES["task"], "--algorithm": SET_VALUES["algorithm"], "--compressor": compressor_spec,
    "--nodes": node_text, "--epochs": SET_VALUES["epochs"], "--seed": SET_VALUES["seed"], "--lr": SET_VALUES["lr"],
    "--batch-size": SET_VALUES["batch_size"], "--data": SET_VALUES["data"], "--gamma": SET_VALUES["gamma"],
    "--backend": SET_VALUES["backend"], "--device": SET_VALUES["device"], "--weights": weights_text,
    "--network": SET_VALUES["network"],
}


@st.composite
def config_file(draw, task: str) -> bytes | None:
    """A `--config` file: settings as YAML lines (right or wrong), other YAML, text, bytes; None: a directory."""
    kind = draw(mostly(st.just("settings"), st.sampled_from(["yaml", "text", "binary", "directory"])))
    if kind == "settings":
        pairs = draw(st.lists(setting(task), max_size=4))
        lines = [f"{k}: {v}" if not k.startswith("task_options.") else f"task_options: {{{k[13:]}: {v}}}"
                 for k, v in pairs]
        return "\n".join(lines).encode()
    if kind == "yaml":
        return draw(yaml_text).encode()
    if kind == "text":
        return draw(st.text(max_size=40)).encode()
    if kind == "binary":
        return draw(st.binary(max_size=64))
    return None


@st.composite
def run_case(draw):
    """(argv after `run`, --out, files for in/) of a `bench run`: a tiny valid run with a few random changes."""
    nodes = draw(st.sampled_from([3, 4, 5, 6]))
    files = {f"e{k}.txt": draw(edge_file(nodes if draw(st.booleans()) else None)) for k in range(2)}
    files["adir"] = None  # a file of None is a directory
    task = draw(SET_VALUES["task"])
    # small sizes for every task, γ tuned in few rounds; a random change below may undo any of them
    argv = ["--task", task, "--nodes", str(nodes), "--epochs", draw(st.sampled_from(["0.25", "0.5", "1"])),
            "--batch-size", "8", "--set", "gamma_tune_steps=20", "--set", "eval_local_workers=1"]
    small = {"lsq": ["dim=8", "n_train=128", "n_test=32"], "logreg": ["dim=8", "n_train=128", "n_test=32"],
             "mnist1d-mlp": ["n_train=200", "n_test=50", "hidden=[16]"],
             "mnist1d-cnn": ["n_train=200", "n_test=50", "channels=4"], "digits-mlp": ["hidden=[16]"]}
    for option in small.get(task, []):
        argv += ["--set", f"task_options.{option}"]
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            flag = draw(st.sampled_from(sorted(FLAGS)))
            argv += [flag, draw(FLAGS[flag])]
        else:
            argv += ["--set", draw(set_item(task))]
    if draw(st.integers(0, 3)) == 0:
        argv += ["--topology", draw(topology_spec(["e0.txt", "e1.txt"]))]
    if draw(st.integers(0, 4)) == 0:
        files["config.yaml"] = draw(config_file(task))
        argv += ["--config", draw(mostly(st.just(f"{IN}/config.yaml"),
                                         st.sampled_from([f"{IN}/missing.yaml", f"{IN}/e0.txt", ""])))]
    if draw(st.booleans()):
        argv.append("--quiet")
    out = draw(mostly(st.sampled_from(["out", "out/a/b"]),
                      st.sampled_from(["", f"{IN}/e0.txt", f"{IN}/e0.txt/sub", f"{IN}/adir/../../out"]), odds=8))
    return argv, out, files


# the inputs that broke the promise once, run every time (each was a traceback unless said otherwise)
TINY = ["--task", "lsq", "--nodes", "4", "--epochs", "0.25", "--batch-size", "8", "--set", "task_options.dim=8",
        "--set", "task_options.n_train=128", "--set", "task_options.n_test=32"]
PLAIN_FILES = {"e0.txt": b"0 1\n1 2\n2 3\n3 0\n", "e1.txt": b"", "adir": None}
RUN_EXAMPLES = [
    [*TINY, "--set", "task_options.eval_batch=0"],  # range(0, n, 0) at the first evaluation
    [*TINY, "--set", "task_options.eval_batch=.inf"],
    ["--task", "lsq", "--nodes", "3", "--epochs", "0.5", "--set", "task_options.dim=x"],
    ["--task", "consensus", "--nodes", "3", "--epochs", "0.5"],  # retired from `bench run`: one line naming its path
    [*TINY, "--set", "task_options=0", "--set", "task_options.bptt=4"],  # 'int' does not support item assignment
    [*TINY, "--set", "lerning_rate=!!float ;"],  # PyYAML's ValueError, not a YAMLError
    [*TINY, "--set", "lr=!!float"],  # IndexError
    [*TINY, "--set", "lr=" + "[" * 3000 + "]" * 3000],  # RecursionError
    [*TINY, "--lr", "1e300"],  # torch: "value cannot be converted to type float", run.json left at running
    [*TINY, "--set", "lr_schedule=exp", "--set", "lr_decay=1e300"],
    [*TINY, "--set", f"task_options.n_train={10**15}"],  # numpy MemoryError
    ["--task", "lsq", "--nodes", "3", "--epochs", "0.5", "--set", f"task_options.dim={10**15}"],  # torch
]


# ---- bench run ---------------------------------------------------------------------------------------------
# Two levels. Most examples stop before the first training step: the promise up to there (command line,
# settings, --out, the run directory, the run's parts) is where nearly every refusal is made, at a fraction
# of a run's cost. A few examples, and the inputs that once broke it, train for real: what only a run shows
# (the training loop's own refusals, a finished run left as it is, another command on its --out).
class _NoTraining:
    """Stands for the runner's loop (bench/run/launch.py calls ``Loop(cfg, out, parts, device, previous,
    threads=...).run()`` once the run's parts are built): keeps what it was given and trains nothing."""

    made: list = []

    def __init__(self, cfg, out, parts, device, previous, threads=None):
        _NoTraining.made.append((cfg, Path(out), parts))

    def run(self) -> int:
        return 0


@_profile(examples=120)
@given(case=run_case())
@example(case=(TINY, "", PLAIN_FILES))  # `--out ""` wrote into the working folder
def test_bench_run_builds_the_run_it_was_given_or_says_why_not(case, base):
    """Up to the first training step: the real `bench run` (its parser, the settings' resolution and checks in
    bench.run.config, the --out checks, the run directory's lock, then the run's parts - graph, compressor, task
    and its data, γ tuned, algorithm) ends in exit 0 having built the run of the settings given, or in exit 2
    and one line, never a traceback nor status 1 (an error nobody turned into a line). Nothing is written
    outside --out and the data folder, no lock or temporary file is left, and the same command resolves to the
    same run (its fingerprint)."""
    argv, out, files = case
    box = Sandbox(base, files)
    argv = ["run", *box.fill(argv), "--out", *box.fill([out])]
    _NoTraining.made.clear()
    with mock.patch.object(bench.run.launch, "Loop", _NoTraining):
        status, _, err = box.call(bench_main, argv)
    assert status in (0, 2), (status, err)
    leftovers = _paths(box.out) if box.out.exists() else set()
    assert not any(Path(p).name == ".bench.lock" or is_temporary(Path(p).name) for p in leftovers), leftovers
    if status == 2:
        _refused(status, err, "bench")
        assert not _NoTraining.made
        return
    [(cfg, where, parts)] = _NoTraining.made
    assert isinstance(cfg, bench.run.RunConfig) and where == Path(box.fill([out])[0])  # relative: the sandbox's
    assert parts.topology.n == cfg.nodes and tuple(parts.algo.x.shape) == (cfg.nodes, parts.task.d)
    assert parts.algo.name == cfg.algorithm and parts.compressor.name == re.split("[:,]", cfg.compressor)[0]
    resolved = []  # the same command once more, up to the one way into a run
    with mock.patch.object(bench.run, "start", lambda settings, out, **kw: resolved.append(settings) or 0):
        assert box.call(bench_main, argv)[0] == 0
    assert resolved[0].fingerprint() == cfg.fingerprint()


@_profile(examples=10)
@given(case=run_case(), other=run_case())
@example(case=(TINY, "", PLAIN_FILES), other=(TINY, "out", PLAIN_FILES))  # `--out ""` wrote into the working folder
@example(case=(TINY, "out", PLAIN_FILES), other=(RUN_EXAMPLES[0], "out", PLAIN_FILES))
def test_bench_run_ends_in_a_finished_run_or_one_line(case, other, base):
    """A few examples trained for real (the property above builds many more): exit 0 with a finished (or paused)
    run, its run.json and metrics, or one line and exit 2 with no run.json left saying running. Then, on a
    finished run: the same command changes nothing; another command on the same --out is refused and changes
    nothing, or is the same run (or continues a paused one)."""
    _check_run(case, other, base)


@pytest.mark.parametrize("argv", RUN_EXAMPLES, ids=[" ".join(a[-2:])[:40] for a in RUN_EXAMPLES])
def test_bench_run_inputs_that_once_broke_the_promise(argv, base):
    _check_run((argv, "out", PLAIN_FILES), (TINY, "out", PLAIN_FILES), base)


def _check_run(case, other, base):
    argv, out, files = case
    box = Sandbox(base, files)
    argv = ["run", *box.fill(argv), "--out", *box.fill([out])]
    status, _, err = box.call(bench_main, argv)
    assert status in (0, 2), (status, err)
    leftovers = _paths(box.out) if box.out.exists() else set()
    assert not any(Path(p).name == ".bench.lock" or is_temporary(Path(p).name) for p in leftovers), leftovers
    if status == 2:
        _refused(status, err, "bench")
        for record in box.out.rglob("run.json"):  # refused after it started: marked, never left "running"
            assert json.loads(record.read_text())["status"] != "running", leftovers
        return
    run = Path(box.root, box.fill([out])[0])
    record = json.loads((run / "run.json").read_text())
    assert record["status"] in ("completed", "diverged", "paused"), record["status"]  # paused: at stop_at
    metrics = pd.read_parquet(run / "metrics.parquet")
    assert len(metrics) >= 1 and {"step", "epoch"} <= set(metrics.columns)
    # the same command again finds the run done and changes nothing
    kept = _files(box.out)
    again, _, err = box.call(bench_main, argv)
    assert again == 0, err
    assert _files(box.out) == kept
    # another command on that --out: refused, or the same run (it was done), or a paused run continued
    other_argv = ["run", *box.fill(other[0]), "--out", *box.fill([out])]
    status, _, err = box.call(bench_main, other_argv)
    assert status in (0, 2), (status, err)
    if status == 2:
        _refused(status, err, "bench")
    after = json.loads((run / "run.json").read_text())
    if status == 2 or record["status"] != "paused":
        assert _files(box.out) == kept
    assert after["fingerprint"] == record["fingerprint"] and after["status"] != "running"


@pytest.mark.slow
@_profile(examples=3)
@given(case=run_case())
def test_bench_run_in_a_child_process_keeps_the_same_promise(case, base):
    """A few of the same examples as `python -m bench` in a child process: what a person sees on the real
    stderr (import-time output, warnings, native libraries' messages) and a hang bounded by killing it."""
    argv, out, files = case
    box = Sandbox(base, files)
    argv = ["run", *box.fill(argv), "--out", *box.fill([out])]
    assume("\x00" not in "".join(argv))  # a command line cannot hold NUL
    try:
        proc = subprocess.run([sys.executable, "-m", "bench", *argv], cwd=box.root, capture_output=True, text=True,
                              timeout=LIMIT_S, env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after {LIMIT_S} s: {shlex.join(argv)}") from None
    note(f"status {proc.returncode}\nstderr: {proc.stderr[-2000:]}")
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 2:
        _refused(proc.returncode, proc.stderr, "bench")
    else:
        record = json.loads((box.root / box.fill([out])[0] / "run.json").read_text())
        assert record["status"] in ("completed", "diverged", "paused")
    assert not sorted(p for p in _paths(box.root) if Path(p).parts[0] not in ("in", "out", "data"))


# ---- bench topology ----------------------------------------------------------------------------------------
@st.composite
def topology_case(draw):
    nodes = draw(node_text)
    files = {"e0.txt": draw(edge_file(int(nodes) if nodes.isdigit() and int(nodes) <= 12 else None)),
             "e1.txt": draw(edge_file()), "adir": None}
    argv = ["topology", "--topology", draw(topology_spec(["e0.txt", "e1.txt"])), "--nodes", nodes]
    if draw(st.booleans()):
        argv += ["--weights", draw(weights_text)]
    if draw(st.booleans()):
        argv += ["--seed", draw(SET_VALUES["seed"])]
    if draw(st.booleans()):
        argv.append("--json")
    return argv, files


def _bench_accepted(case, base):
    """(argv, stdout) of a `bench` command that writes no file and exited 0; (None, None) once a refusal
    was checked to be exit 2 with one line."""
    argv, files = case
    box = Sandbox(base, files)
    argv = box.fill(argv)
    status, out, err = box.call(bench_main, argv, allowed=())
    assert status in (0, 2), (status, err)
    if status == 2:
        _refused(status, err, "bench")
        return None, None
    return argv, out


@_profile(examples=200)
@given(case=topology_case())
def test_bench_topology_describes_a_graph_or_says_why_not(case, base):
    argv, out = _bench_accepted(case, base)
    if argv is None:
        return
    nodes = int(argv[argv.index("--nodes") + 1])
    if "--json" in argv:
        info = json.loads(out)
        assert info["n"] == nodes and 0 < info["spectral_gap"] <= 1 + 1e-9 and info["num_edges"] >= nodes - 1
    else:
        assert ["n", str(nodes)] in [line.split() for line in out.splitlines()], out


# ---- bench consensus and bench tune-gamma ------------------------------------------------------------------
small_count = mostly(st.integers(1, 12).map(str), st.sampled_from(["0", "-1", "x", "1.5", "", "1e3"]), odds=6)


@st.composite
def consensus_common(draw):
    nodes = draw(mostly(st.sampled_from(["4", "5", "6", "9"]), node_text))
    files = {"e0.txt": draw(edge_file(int(nodes) if nodes.isdigit() and int(nodes) <= 12 else None)), "adir": None}
    dim = draw(mostly(small_count, st.just(ABSURD), odds=12))
    argv = ["--nodes", nodes, "--dim", dim, "--steps", draw(small_count)]
    if draw(st.integers(0, 2)) == 0:
        argv += ["--topology", draw(topology_spec(["e0.txt"]))]
    if draw(st.booleans()):
        argv += ["--weights", draw(weights_text)]
    if draw(st.booleans()):
        argv += ["--seed", draw(SET_VALUES["seed"])]
    argv.append("--quiet")  # the table is on stdout; progress bars are for people
    return argv, files


@st.composite
def consensus_case(draw):
    argv, files = draw(consensus_common())
    methods = draw(st.lists(st.one_of(st.just("exact"), compressor_spec), min_size=1, max_size=3))
    argv = ["consensus", *argv, "--methods", *methods]
    if draw(st.booleans()):
        argv += ["--gamma", draw(mostly(st.sampled_from(["0.5", "1", "0.01"]), number_text))]
    if draw(st.booleans()):
        argv += ["--tune-steps", draw(small_count)]
    if draw(st.booleans()):
        argv += ["--out", draw(mostly(st.sampled_from(["out", "out/sub"]), st.sampled_from([f"{IN}/e0.txt",
                                                                               f"{IN}/e0.txt/sub", ""])))]
    return argv, files


@_profile(examples=150)
@given(case=consensus_case())
@example(case=(["consensus", "--nodes", "4", "--dim", "1", "--steps", "1", "--quiet", "--methods", "exact",
                "--out", ""], PLAIN_FILES))  # exit 0 and traces.csv written nowhere
@example(case=(["consensus", "--nodes", "1", "--topology", "complete", "--dim", "2", "--steps", "2", "--quiet",
                "--methods", "exact"], PLAIN_FILES))  # ZeroDivisionError: a single worker's error is 0/0
def test_bench_consensus_writes_its_table_or_says_why_not(case, base):
    argv, files = case
    box = Sandbox(base, files)
    argv = box.fill(argv)
    # `--methods A B` takes every word after it: one that looks like a flag ends it, as argparse does
    status, out, err = box.call(bench_main, argv, allowed=("out",))
    assert status in (0, 2), (status, err)
    if status == 2:
        _refused(status, err, "bench")
        assert not box.out.exists() or not _paths(box.out) - {"sub"}
        return
    assert out.startswith("# consensus on ")
    if "--out" in argv:
        traces = pd.read_csv(Path(box.root, argv[argv.index("--out") + 1]) / "traces.csv")
        assert len(traces) and set(traces["method"]) and traces["rel_error"].notna().any()


@st.composite
def tune_case(draw):
    argv, files = draw(consensus_common())
    argv = ["tune-gamma", *argv, "--compressor", draw(compressor_spec)]
    if draw(st.integers(0, 2)) > 0:
        grid = draw(mostly(
            st.one_of(st.builds("{}:{}:{}".format, st.sampled_from(["-3", "-2", "-1"]), st.sampled_from(["0", "-1"]),
                                st.integers(1, 8)),
                      st.lists(st.sampled_from(["0.5", "1", "0.1", "0.01"]), min_size=1, max_size=4).map(",".join)),
            st.one_of(st.builds("{}:{}:{}".format, st.sampled_from(["-3", "-1", "0", "1", "-inf", "nan", "x"]),
                                st.sampled_from(["0", "-1", "-3", "2", "inf"]), small_count),
                      st.lists(fraction_text, min_size=1, max_size=4).map(",".join),
                      junk)))
        argv.append(f"--grid={grid}")
    if draw(st.booleans()):
        argv.append("--json")
    return argv, files


@_profile(examples=150)
@given(case=tune_case())
@example(case=(["tune-gamma", "--nodes", "1", "--dim", "1", "--steps", "1", "--topology", "complete", "--quiet",
                "--compressor", "none"], PLAIN_FILES))  # ZeroDivisionError
@example(case=(["tune-gamma", "--nodes", "4", "--dim", "1", "--steps", "1", "--quiet", "--compressor", "sign",
                "--grid=--"], PLAIN_FILES))  # argparse made it an empty grid: min() of nothing
def test_bench_tune_gamma_finds_a_gamma_or_says_why_not(case, base):
    argv, out = _bench_accepted(case, base)
    if argv is None:
        return
    if "--json" in argv:
        info = json.loads(out)
        assert 0 < info["best_gamma"] <= 1 and len(info["grid"]) >= 1
        assert info["best_gamma"] in [g["gamma"] for g in info["grid"]]
    else:
        assert "best gamma = " in out


# ---- study files at DAG build ------------------------------------------------------------------------------
plain = st.one_of(st.integers(-3, 40), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                  st.text(max_size=8), st.sampled_from(["ring", "sign", "auto", "0.1", "[1, 2]", "it's", "$(x)"]))
block_value = st.one_of(plain, st.lists(plain, max_size=3), st.dictionaries(st.text(max_size=5), plain, max_size=2))
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
# the settings a study's defaults and blocks may give: any `bench run` key but those the study owns
STUDY_SETTINGS = [k for k in KEYS if k not in NOT_IN_BLOCKS and k not in BLOCK_AXES]


def _value(key):
    """A study value of ``key``: what a `--set` would take (read as YAML), or any plain value."""
    return mostly(SET_VALUES.get(key, yaml_text).map(_yaml_or_text), block_value, odds=6)


def _yaml_or_text(text: str):
    """``text`` read as YAML when that gives plain data (what a study file holds), else the text itself."""
    try:
        value = yaml.safe_load(text)
        json.dumps(value, allow_nan=True)
        return value
    except Exception:  # noqa: BLE001 - PyYAML raises more than YAMLError on bad tags; bytes, dates are not JSON
        return text


@st.composite
def study_case(draw):
    """(a study, files for in/): a small study of one block, mostly valid, as its YAML file would give it."""
    # every cell of a block must be valid for the study to build: its parts are drawn valid more often
    method = mostly(st.one_of(st.builds("{}/{}".format, st.just("choco"), compressor_spec),
                              st.sampled_from(["allreduce/none", "dpsgd/none", "choco/sign", "choco", "dpsgd",
                                               "dcd/qsgd:4", "ecd/rand:0.5"])),
                    st.builds("{}/{}".format, st.sampled_from(["choco", "dpsgd", "dcd", "ecd", "allreduce"]), junk),
                    odds=6)
    topology = mostly(st.sampled_from(["ring", "complete", "star", "exponential"]), topology_spec(["e0.txt"]), odds=6)
    block = {"method": draw(st.lists(method, min_size=1, max_size=2)),
             "topology": draw(st.lists(topology, min_size=1, max_size=2)),
             "nodes": draw(st.lists(mostly(st.sampled_from([3, 4, 6, 9]), st.sampled_from([1, 2, 32]), odds=6),
                                    min_size=1, max_size=2))}
    for key in draw(st.lists(mostly(st.sampled_from(STUDY_SETTINGS),
                                    st.sampled_from(["seed", "task", "algorithm", "quiet", "lerning_rate"]), odds=6),
                             max_size=2, unique=True)):
        block[key] = draw(st.lists(_value(key), min_size=1, max_size=2))
    config = {"study": "p", "task": draw(mostly(st.sampled_from(["lsq", "logreg"]), SET_VALUES["task"], odds=6)),
              "seeds": draw(st.lists(st.integers(0, 3), min_size=1, max_size=2)),
              "defaults": {"epochs": 1, **{k: draw(_value(k)) for k in draw(st.lists(
                  mostly(st.sampled_from(STUDY_SETTINGS), st.sampled_from(["seed", "lerning_rate", "nodes"]), odds=8),
                  max_size=2, unique=True))}},
              "blocks": {draw(st.sampled_from(["b", "it's", "a b", "$(x)"])): block}}
    if draw(st.integers(0, 3)) == 0:
        config["tune"] = {"grid": {draw(st.sampled_from(["lr", "gamma", "momentum"])): [0.1, 0.5]}, "seeds": [0]}
    if draw(st.integers(0, 3)) == 0:
        config["consensus"] = {"topology": draw(topology), "nodes": draw(st.integers(3, 9)),
                               "dim": 4, "steps": 4, "seed": 0,
                               "methods": draw(st.lists(st.one_of(st.just("exact"), compressor_spec), min_size=1,
                                                        max_size=2))}
    if draw(st.integers(0, 4)) == 0:
        config["scale"] = "gpu"
        config["gpu"] = {"defaults": {k: draw(_value(k)) for k in draw(st.lists(st.sampled_from(STUDY_SETTINGS),
                                                                                 max_size=2, unique=True))}}
    return config, {"e0.txt": draw(edge_file())}


def _schema_refuses(config) -> bool:
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    try:
        validate(config, str(SCHEMA))
    except WorkflowError:
        return True
    return False


@_profile(examples=100)
@given(case=study_case())
@example(case=({"study": "p", "task": "lsq", "seeds": [0], "defaults": {"epochs": 1},
                "blocks": {"b": {"method": ["allreduce/none"], "topology": ["ring"], "nodes": [3]}},
                "scale": "gpu", "gpu": {"defaults": {"task_options": 0}}}, {}))  # 'int' object is not iterable
def test_a_study_builds_runs_bench_accepts_or_one_line(case, base):
    """As workflow/rules/common.smk: the schema, then the study's cells; a study accepted at DAG build gives
    command lines that `bench run` accepts as they are, with the settings the study asked for."""
    config, files = case
    config = json.loads(json.dumps(config, allow_nan=True))  # what snakemake reads from YAML: plain data
    box = Sandbox(base, files)
    if _schema_refuses(config):  # snakemake's own refusal of the file's shape
        event("refused by the schema")
        return
    for key in ("topology",):
        config["blocks"] = {name: {**b, key: [t.replace(IN, str(box.inputs)) for t in b[key]]}
                            for name, b in config["blocks"].items()}
    if "consensus" in config:
        config["consensus"]["topology"] = config["consensus"]["topology"].replace(IN, str(box.inputs))

    built = []

    def build(_argv):  # as common.smk: one line and a failed DAG build
        try:
            built.append(Study(config))
        except BenchError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0

    status, _, err = box.call(build, [], allowed=())
    if status == 2:
        line = assert_refused(status, err)
        assert line.startswith("error: study 'p' at scale="), line
        return
    study = built[0]
    seen = []
    with mock.patch.object(bench.run, "start", lambda cfg, out, **kw: seen.append(cfg) or 0):  # what `bench run` calls
        for job in study.jobs():
            for asked in job.runs:
                tuned = study.tuned_cells.get(job.cell, ()) if job.rule != "tune_cell" else ()
                words = shlex.split(study.command(asked, "out", tuned))
                start = words.index("run")
                status, _, err = box.call(bench_main, words[start:], allowed=())
                assert status == 0, err
                if not tuned:  # the settings the study asked for (the pipeline adds --quiet)
                    assert {**seen[-1].to_dict(), "quiet": None} == {**study.run_config(asked).to_dict(),
                                                                     "quiet": None}


# ---- python -m analysis ------------------------------------------------------------------------------------
json_value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(),
                                    st.text(max_size=6)),
                          lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                          max_leaves=6)
RECORD_KEYS = ["run_id", "fingerprint", "status", "config", "topology", "compressor", "gamma", "task",
               "steps_per_epoch", "total_steps", "final", "start_time"]
CONFIG_KEYS = ["task", "algorithm", "compressor", "topology", "nodes", "weights", "epochs", "seed", "lr", "data",
               "gamma", "network", "val_fraction", "batch_size"]
METRIC_COLUMNS = ["step", "epoch", "test_acc", "test_loss", "train_loss", "consensus_distance", "bits_per_worker",
                  "time_s", "lr"]
column_values = st.sampled_from([["a", "b", "c"], [True, False, True], [None, None, None], [1e308, -1e308, 0.0],
                                 [float("nan")] * 3, [float("inf"), 0.0, 1.0], [-1, -2, -3], [0, 0, 0],
                                 [2**62, 2**62, 2**62], ["0.5", "x", ""]])


@st.composite
def damage(draw):
    """How one run directory is damaged: a key of run.json or of its config, a metrics column, or a file."""
    kind = draw(st.sampled_from(["record", "config", "metrics", "drop-column", "file"]))
    if kind == "record":
        return kind, draw(st.sampled_from(RECORD_KEYS)), draw(json_value)
    if kind == "config":
        return kind, draw(st.sampled_from(CONFIG_KEYS)), draw(json_value)
    if kind == "metrics":
        return kind, draw(st.sampled_from(METRIC_COLUMNS)), draw(column_values)
    if kind == "drop-column":
        return kind, draw(st.sampled_from(METRIC_COLUMNS)), None
    which = draw(st.sampled_from(["run.json", "metrics.parquet"]))
    return kind, which, draw(st.sampled_from([b"", b"{", b"[1, 2]", b"null", b"\xff\xfe\x00", b"PAR1", None]))


def _damage(run: Path, how) -> None:
    """Apply one damage to ``run`` (a no-op where an earlier one left nothing to change)."""
    kind, key, value = how
    try:
        if kind in ("record", "config"):
            record = json.loads((run / "run.json").read_text())
            (record if kind == "record" else record["config"])[key] = value
            (run / "run.json").write_text(json.dumps(record))
        elif kind in ("metrics", "drop-column"):
            metrics = pd.read_parquet(run / "metrics.parquet")
            if kind == "drop-column":
                metrics = metrics.drop(columns=[key], errors="ignore")
            else:
                metrics[key] = value
            metrics.to_parquet(run / "metrics.parquet", index=False)
        elif value is None:
            (run / key).unlink(missing_ok=True)
        else:
            (run / key).write_bytes(value)
    except (OSError, ValueError, TypeError, KeyError, IndexError):  # already damaged past this change
        pass


target_text = st.one_of(st.sampled_from(["0.5", "0.9", "0", "-1", "nan", "inf", "x", "1e-300", "2"]), number_text)


@st.composite
def analysis_case(draw):
    accs = draw(st.lists(st.floats(0, 1), min_size=1, max_size=3))
    damages = draw(st.lists(damage(), max_size=3))
    command = draw(st.sampled_from(["summarize", "baseline", "regress", "regress"]))
    args = []
    if command != "regress" and draw(st.booleans()):
        args += [draw(st.sampled_from(["--target-acc", "--target-rel"])), draw(target_text)]
        if draw(st.integers(0, 3)) == 0:
            args += ["--target-rel", draw(target_text)]
    if command != "regress" and draw(st.integers(0, 2)) == 0:
        args += ["--metric", draw(st.sampled_from(["test_acc", "test_loss", "val_acc", "x", ""]))]
    if command != "summarize" and draw(st.booleans()):
        args += [draw(st.sampled_from(["--acc-tol", "--rel-tol"])), draw(target_text)]
    baseline = None
    if command == "regress":
        baseline = draw(st.one_of(st.none(), json_value, st.sampled_from(["perf", "garbage"]),
                                  st.tuples(st.sampled_from(["cells", "targets", "tolerances", "metric", "seeds",
                                                             "status", "final_test_acc", "bits_per_step"]),
                                            json_value)))
    return accs, damages, command, args, baseline


_BASELINES: dict[int, bytes] = {}


def _good_baseline(seeds: int, where: Path) -> bytes:
    """A baseline of one Choco cell of ``seeds`` seeds at accuracies 0.5 to 0.6, made by `analysis baseline` once
    per count (it checks the paper's claims: a second a call). Against it the examples' accuracies, drawn in [0, 1],
    regress and pass alike."""
    if seeds not in _BASELINES:
        make_cell(where, "choco", [0.5 + 0.05 * k for k in range(seeds)])
        with contextlib.redirect_stdout(io.StringIO()):
            assert analysis_cli.main(["baseline", str(where), "--out", str(where / "baseline.json")]) == 0
        _BASELINES[seeds] = (where / "baseline.json").read_bytes()
    where.parent.mkdir(parents=True, exist_ok=True)  # the example's data/, for its baseline.json
    return _BASELINES[seeds]


@_profile(examples=100)
@given(case=analysis_case())
@example(case=([0.0], [("record", "run_id", None), ("config", "task", None)], "summarize", [], None))  # KeyError
@example(case=([0.0], [("metrics", "step", ["a", "b", "c"]), ("drop-column", "epoch", None)], "summarize",
               ["--target-rel", "0.5"], None))  # KeyError: 'epoch'
@example(case=([0.5], [("file", "run.json", b"{")] * 2, "summarize", [], None))  # notes and the error: many lines
@example(case=([0.5], [], "summarize", ["--target-acc=--"], None))  # argparse made it an empty list
def test_analysis_summarizes_compares_or_says_why_not(case, base):
    accs, damages, command, args, baseline = case
    box = Sandbox(base)
    results = box.root / "out"
    make_cell(results, "choco", accs)
    make_cell(results, "ar", accs, algorithm="allreduce", compressor="none")
    runs = sorted(p.parent for p in results.rglob("run.json"))
    for k, how in enumerate(damages):
        _damage(runs[k % len(runs)], how)
    if command == "regress":
        path = box.root / "data" / "baseline.json"
        good = _good_baseline(len(accs), box.root / "data" / "base")
        path.write_bytes(good)
        if baseline == "perf":
            path.write_text(json.dumps({"figures": {"speedup": {"median": 2.0, "unit": "x", "kind": "ratio",
                                                                  "higher_is_better": True}}}))
        elif baseline == "garbage":
            path.write_bytes(b"\x00{")
        elif isinstance(baseline, tuple):
            document = json.loads(path.read_text())
            key, value = baseline
            if key in ("seeds", "status", "final_test_acc", "bits_per_step"):
                next(iter(document["cells"].values()))[key] = value
            else:
                document[key] = value
            path.write_text(json.dumps(document))
        elif baseline is not None:
            path.write_text(json.dumps(baseline))
        argv = ["regress", "--baseline", str(path), "--current", "out", *args]
    elif command == "baseline":
        argv = ["baseline", "out", "--out", "data/b.json", *args]
    else:
        argv = ["summarize", "out", *args]
    status, out, err = box.call(analysis_cli.main, argv, allowed=("out", "data"))
    if command == "regress" and status == 1:  # regressions found: one REGRESSION line each
        assert err.strip() and all(line.startswith(("REGRESSION ", "analysis: note: "))
                                   for line in err.splitlines() if line.strip()), err
        return
    assert status in (0, 2), (status, err)
    if status == 2:  # one line: the runs left out are noted only when the command succeeds
        _refused(status, err, "analysis")
        return
    assert "Traceback" not in err
    if command == "summarize":
        table = pd.read_csv(results / "summary.csv")
        assert len(table) >= 1 and len(pd.read_csv(results / "cells.csv")) >= 1
    elif command == "baseline":
        assert "cells" in json.loads((box.root / "data" / "b.json").read_text())
