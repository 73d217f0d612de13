"""Bad input to `bench` and to a study, as tables: a row is a command line, a file, a method's knob or a study,
with the fragments its refusal must hold. Every refusal is exit status 2 (BenchError at DAG build) and ONE line,
no traceback, nothing written. The rows were found by review; a method's knobs are generated from its options."""
import dataclasses
import json
import math

import pytest

from analysis.cli import main as analysis_main
from bench.algorithms import ALGORITHMS, parse_options
from bench.cli import main
from bench.errors import BenchError
from bench.pipeline import Study
from test_keeping_the_average import takes
from hostile import CHILD, LSQ, ROOT, assert_refused, bomb, fifo, refused, run_bench, run_cli
from shared_studies import snakemake

RUN = ["run", *LSQ]
DPSGD = ["--algorithm", "dpsgd", "--compressor", "none"]
TINY = [*RUN, "--epochs", "0.25", "--batch-size", "8", "--set", "task_options.dim=8"]
NOTES = "TMP/notes.txt"  # a file of the user's, which no refusal may change
TRACK = ["--parts", "study", "--out", "TMP/out"]
UNBIASED = "rand:0.01,unbiased=true"  # d/k times the kept values: every γ of the grid diverges with it


def sizes(command):
    extra = ["--compressor", "sign"] if command == "tune-gamma" else []
    return [([command, *args, *extra], words) for args, words in [
        (["--dim", "99999999999"], ["--dim", "16777216"]), (["--steps", "10000000"], ["--steps", "1000000"]),
        (["--nodes", "4096", "--dim", "100000"], ["--nodes 4096 x --dim 100000", "2 GiB"])]]


# (argv of `bench`, fragments of its line); bytes in argv: a file holding them (TMP/bad.yaml); TMP: a fresh folder
REFUSED = [
    ([*RUN, "--config", b"lr: [1,\n"], ["bad.yaml", "YAML"]),
    ([*RUN, "--config", bytes(range(256)) * 4], ["bad.yaml", "UTF-8"]),
    ([*RUN, "--config", b"1: 2\nlr: 0.1\n"], ["bad.yaml", "1"]),
    ([*RUN, "--config", b"base: &b {lr: 0.1}\n<<: *b\n"], ["bad.yaml", "alias"]),
    ([CHILD, *RUN, "--config", f"network: {bomb()}\n".encode()], ["bad.yaml", "alias"]),
    ([*RUN, "--config", "TMP"], ["TMP", "directory"]),
    ([*RUN, "--config", "TMP/no.yaml"], ["no.yaml", "does not exist"]),
    ([*RUN, "--set", "lr=[1,"], ["lr=[1,", "YAML"]),
    ([*RUN, "--set", "task_options.hidden=[&a 1, *a]"], ["task_options.hidden", "alias"]),
    ([*RUN, "--set", "lr=!!python/name:os.system"], ["--set 'lr=", "tag !!python/name:os.system"]),
    (["plan", "--configfile", b"study: y\ndefaults: {epochs: 1, lr: !!binary aGk=}\n"],
     ["bad.yaml' uses the YAML tag !!binary"]),  # the studies' reader is the same
    pytest.param([CHILD, *RUN, "--set", f"network={bomb()}"], ["network", "alias"], marks=pytest.mark.slow),
    # infinite or NaN lengths and cadences ended in an OverflowError traceback; dist_timeout=nan was accepted
    *[([*RUN, "--set", f"{key}={value}"], [f"{key}={value.strip('.')}", "finite"]) for key, value in [
        ("epochs", ".nan"), ("eval_every", ".inf"), ("eval_every", "nan"), ("checkpoint_every", ".inf"),
        ("warmup_epochs", ".inf"), ("dist_timeout", ".nan"), ("lr", "nan")]],
    ([*RUN, "--set", "milestones=[1, .nan]"], ["milestones", "finite"]),
    ([*RUN, "--set", "nodes=.inf"], ["nodes=inf", "integer"]),
    ([*RUN, "--set", "gamma=.nan"], ["gamma=nan"]),
    ([*RUN, "--seed", "-1"], ["seed=-1", ">= 0"]),  # numpy takes 0 .. 2^32 - 1 only
    ([*RUN, "--set", "seed=4294967296"], ["seed=4294967296", "<="]),
    ([*RUN, "--device", "cuda:x"], ["cuda:x", "cuda:N"]),
    ([*RUN, "--nodes", "10000000"], ["nodes=10000000", "4096"]),
    # flags are text typed by the settings: what --set refuses, a flag refuses with the same line
    ([*RUN, "--nodes", "four"], ["nodes='four'", "integer"]),
    ([*RUN, "--batch-size", "0.5"], ["batch_size='0.5'", "integer"]),
    ([*RUN, "--epochs", "ten"], ["epochs='ten'", "number"]),
    # accepted and wrong: a loss bound <= 0, lr=nan "negative" (true as a batch of 1 or an lr: test_start.py's rows)
    ([*RUN, "--set", "divergence_loss=0"], ["divergence_loss=0", "> 0"]),
    # (an unknown task, option, compressor, graph, deal or backend: each reader's own table, e.g. tests/test_tasks.py,
    # test_topology.py, test_data.py, test_start.py, test_run_config_types.py; here what no such table holds)
    ([*RUN, "--set", "colour=blue"], ["colour"]),
    ([*RUN, "--set", "algorithm_options.ada_beta=2"], ["choco ada_beta=2"]),  # a method's knob: every range below
    ([*RUN, "--set", "lr_schedule=cosine"], ["cosine"]),
    ([*RUN, "--backend", "dist", "--set", "procs=3"], ["procs=3"]),
    *[([*RUN, "--set", f"val_fraction={bad}"], ["val_fraction"]) for bad in ("1", "-0.1")],
    # a graph that cannot be built under dist: found by the launcher, not by each rank after a failed launch
    ([*RUN, *DPSGD, "--backend", "dist", "--set", "nodes=2"], ["bench: error: ring needs n >= 3; got n=2"]),
    # faults: what a method lacks is named with the methods that have it (its rule's declared facts)
    ([*RUN, "--algorithm", "dcd", "--compressor", "sign", "--set", "faults.drop=0.1"],
     ["faults: algorithm 'dcd' has no rule for a lost message yet", "take faults: ", "beer", "choco", "deepsqueeze"]),
    ([*RUN, "--algorithm", "allreduce", "--set", "faults.drop=0.1"], ["a collective has no partial form"]),
    ([*RUN, "--algorithm", "beer", "--compressor", "sign", "--set", "faults.active=0.5"],
     ["faults.active/absent: algorithm 'beer' cannot sit a worker out yet", "take workers away: ", "deepsqueeze"]),
    ([*RUN, "--algorithm", "choco", "--compressor", "sign", "--set", "faults.pairwise=true"], ["faults.pairwise"]),
    # a collective cannot ride a broadcast medium; unknown media and send orders
    ([*RUN, "--algorithm", "allreduce", "--compressor", "none", "--set", "network=edge-10m,medium=broadcast"],
     ["medium=broadcast", "allreduce", "medium=links"]),
    ([*RUN, "--set", "network=edge-10m,medium=wifi"], ["medium='wifi'", "links, broadcast"]),
    ([*RUN, "--set", "network=edge-10m,sends=burst"], ["sends='burst'", "serial, parallel"]),
    # found by tests/test_entry_properties.py: each was a traceback (or a MemoryError, or run.json left running)
    ([*TINY, "--set", "task_options.eval_batch=0"], ["task_options.eval_batch=0", ">= 1"]),  # range(0, n, 0)
    ([*TINY, "--set", "task_options.eval_batch=.inf"], ["task_options.eval_batch=inf", ">= 1"]),
    ([*TINY, "--set", "task_options.dim=x"], ["task_options.dim='x'"]),
    ([*RUN, "--task", "consensus"], ["consensus", "bench consensus", "bench tune-gamma"]),  # retired from `bench run`
    ([*TINY, "--set", "task_options=0", "--set", "task_options.bptt=4"], ["task_options=0", "mapping"]),
    ([*TINY, "--set", "lerning_rate=!!float ;"], ["lerning_rate", "YAML"]),  # a ValueError (lr=!!float: an IndexError)
    ([*TINY, "--set", "lr=" + "[" * 3000 + "]" * 3000], ["64 levels"]),  # a RecursionError
    ([*TINY, "--lr", "1e300"], ["lr=1e+300", "float32"]),  # torch could not convert it; run.json left running
    ([*TINY, "--set", "lr_schedule=exp", "--set", "lr_decay=1e300"], ["lr_decay=1e+300", "float32"]),
    ([*TINY, "--set", f"task_options.n_train={10**15}"], ["n_train", "2 GiB"]),  # numpy's MemoryError
    ([*TINY, "--out", ""], ["--out", "empty path"]),  # wrote into the working folder
    (["consensus", "--nodes", "1", "--topology", "complete", "--dim", "2", "--steps", "2", "--methods", "exact"],
     ["n >= 2", "n=1"]),  # a ZeroDivisionError: a single worker's error is 0/0
    (["tune-gamma", "--nodes", "1", "--topology", "complete", "--dim", "1", "--steps", "1", "--compressor", "none"],
     ["n >= 2", "n=1"]),
    (["tune-gamma", "--nodes", "4", "--dim", "1", "--steps", "1", "--compressor", "sign", "--grid=--"],
     ["--grid", "'--'"]),  # argparse made it an empty grid: min() of nothing
    # `bench compare` (a dry run: it would write the study's files in the working folder)
    # (what a bad name says: its reader's table, as for `bench run`; here the flag compare names with it)
    *[(["compare", *args, "--dry-run"], [word]) for args, word in [
        (["nosuch/sign"], "nosuch"), (["dpsgd/sign"], "dpsgd"),  # exact gossip takes no compressor
        (["choco/sign", "--task", "nope"], "--task: unknown task 'nope'"),
        (["choco/sign", "--data", "bogus"], "--data: unknown partition scheme 'bogus'"),
        (["choco/sign", "--against", ","], "--against"), (["choco/sign", "--seeds", "0,x"], "0,x"),
        (["choco/sign", "--seeds", "1,1"], "twice"), (["choco/sign", "--nodes", "0"], "0"),
        (["choco/sign", "--epochs", "-1"], "-1"), (["choco/sign", "--name", "../x"], "../x"),
        (["choco/sign", "--snakemake-args", "--config 'x"], "quotation")]],
    # a named pipe or a device where a file is read (each waited for a writer forever, or read without end)
    *[(argv, ["TMP/fifo", "a named pipe, not a plain file"]) for argv in [
        ["topology", "--topology", "file:TMP/fifo", "--nodes", "4"], [*RUN, "--topology", "file:TMP/fifo"],
        ["compare", "choco/sign", "--topology", "file:TMP/fifo", "--nodes", "4", "--dry-run"],
        [*RUN, "--config", "TMP/fifo"], [*RUN, "--settings", "TMP/fifo"],
        ["plan", "--configfile", "TMP/fifo"], ["track", "--config", "TMP/fifo", *TRACK]]],
    ([*RUN, "--config", "/dev/zero"], ["/dev/zero", "a character device, not a plain file"]),
    # a search where every γ diverged took the grid's last value as tuned (1, "relative error inf") and trained on
    *[([*RUN, "--algorithm", name, "--compressor", UNBIASED, "--set", "gamma_tune_steps=100"],
       ["every γ of the grid (20 values, 0.001 to 1) diverges", UNBIASED]) for name in ALGORITHMS.names()
      if "gamma_tune_steps" in ALGORITHMS.get(name).knobs() and takes(ALGORITHMS.get(name), UNBIASED)],
    (["tune-gamma", "--compressor", UNBIASED, "--nodes", "8", "--steps", "100", "--dim", "200", "--quiet"],
     ["every γ of the grid", "diverges in Choco-Gossip"]),
    # --out a file or under one (every command's --out is bench/cli/common.py's output_dir)
    ([*RUN, "--out", NOTES], [NOTES, "not a directory"]),
    ([*RUN, "--out", f"{NOTES}/sub"], [NOTES, "not a directory"]),
    # other commands: 10^7 nodes built for minutes; an empty log grid silently became the default one
    ([CHILD, "topology", "--topology", "ring", "--nodes", "10000000"], ["10000000", "4096"]),
    ([CHILD, "tune-gamma", "--compressor", "sign", "--nodes", "10000000"], ["10000000", "4096"]),
    ([CHILD, "consensus", "--methods", "exact", "--nodes", "10000000"], ["10000000", "4096"]),
    (["topology", "--topology", "random-regular:3", "--nodes", "8", "--seed", "-1"], ["-1", ">= 0"]),
    (["tune-gamma", "--compressor", "sign", "--seed", "-3"], ["-3", ">= 0"]),
    (["tune-gamma", "--compressor", "sign", "--grid", "0:1:0"], ["0:1:0", "COUNT", ">= 1"]),
    (["tune-gamma", "--compressor", "sign", "--grid=-3:0:2.5"], ["-3:0:2.5"]),
    (["tune-gamma", "--compressor", "sign", "--grid=-3:inf:4"], ["-3:inf:4", "finite"]),
    (["tune-gamma", "--compressor", "sign", "--grid", "0.1,,0.5"], ["0.1,,0.5"]),
    (["tune-gamma", "--compressor", "sign", "--grid", "0.5,2"], ["'0.5,2'", "gamma=2 is outside (0, 1]"]),
    (["topology", "--topology", "one-peer-exp", "--nodes", "24"], ["16 or 32"]),
    *[(["topology", "--topology", spec, "--nodes", "10"], words) for spec, words in [  # the base-(k+1) graph's k
        ("base:0", ["K=0", ">= 1"]), ("base:1.5", ["'1.5'", "not an integer"]), ("base", ["base:1", "K >= 1"]),
        ("base:1,k=2", ["unknown option 'k'"])]],
    (["topology", "--topology", "base:2", "--nodes", "10", "--weights", "uniform"],
     ["base:2", "fixes its own weights"]),
    (["tune-gamma", "--compressor", "zip:3", "--steps", "5"], ["zip"]),
    (["tune-gamma", "--compressor", "sign", "--nodes", "0"], ["0"]),
    (["perf", "--device", "tpu", "--quick"], ["tpu", "cpu"]),
    *[(["perf", "--quick", "--only", "c", "--name", name, "--out-dir", "TMP/out"],  # the file's name: one name
       [f"--name {name!r}", "plain file name", "allowed"])
      for name in ["../escaped", "a/b", "..", ".", "", "/tmp/abs"]],
    (["perf", "--quick", "--only", "c,z", "--out-dir", "TMP/out"], ["'z'", "allowed"]),  # an unknown group
    *[(["perf", "--out-dir", "TMP/out", *args], [words]) for args, words in [  # group h: a peer, NAME=PYTHON
        (["--only", "h"], "group h compares with peer libraries: name one with --peer"),
        (["--peer", "decent-bench"], "expected NAME=PYTHON"), (["--peer", "nobody=/bin/sh"], "unknown peer 'nobody'"),
        (["--peer", "decent-bench=/no/such/python"], "is not an executable interpreter")]],
    (["plan", "--configfile", str(ROOT / "config" / "smoke.yaml"), "--device", "cuda:x"], ["cuda:x", "auto"]),
    (["plan", "--configfile", str(ROOT / "config" / "nope.yaml")], ["nope.yaml"]),
    *[(["plan", "--configfile", str(ROOT / "config" / "test.yaml"), flag, value], [value]) for flag, value in [
        ("--steps", "0"), ("--steps", "many"), ("--safety", "0.5"), ("--scale", "tpu"), ("--device", "gpu")]],
    *sizes("consensus"), *sizes("tune-gamma"),
    # `python -m analysis`'s own flags (found by tests/test_entry_properties.py when it fuzzed analysis too)
    (["analysis", "summarize", "TMP", "--target-acc=--"], ["--target-acc", "'--' is not a value"]),  # an empty list
    (["analysis", "summarize", "TMP", "--target-rel=nan"], ["--target-rel", "'nan' must be finite"]),
    # tune, figures and report printed argparse's usage before the error: two lines (issue 56)
    (["analysis", "tune", "rank", "TMP", "--at", "abc"], ["analysis tune: error", "--at", "'abc'"]),
    (["analysis", "tune", "rank", "TMP", "--at", "nan"], ["--at nan", "finite"]),
    (["analysis", "figures", "TMP", "--only", "nope"], ["analysis figures: error", "'nope'"]),
    (["analysis", "report", "TMP", "--bogus"], ["analysis report: error", "--bogus"]),
    (["analysis", "docs", "--from", "TMP"], ["analysis docs: error", "TMP: no summary.csv", "not a finished study"]),
    # `bench track --config` reads with the same loader: an alias bomb took 3 GB and 23 s before a MemoryError
    ([CHILD, "track", "--config", f"defaults: {{network: {bomb()}}}\n".encode(), *TRACK],
     ["--config TMP/bad.yaml uses the YAML anchor &a0", "aliases are not read"]),
    (["track", "--config", b"\xc8\xff\x00" * 100, *TRACK], ["--config TMP/bad.yaml is not text (not UTF-8)"]),
    (["track", "--config", "TMP", *TRACK], ["--config TMP is a directory"]),
    (["track", "--config", "TMP/no.yaml", *TRACK], ["--config TMP/no.yaml does not exist"]),
    # exact models (D-PSGD) or its own scheme (PowerSGD's low rank): --compressor none, as the method's facts say
    *[([*RUN, "--algorithm", name, "--compressor", "sign"], [f"'{name}'", "--compressor none"])
      for name in ALGORITHMS.names() if ALGORITHMS.get(name).own_compression or not ALGORITHMS.get(name).compresses],
]


def _name(argv) -> str:
    words = [w if isinstance(w, str) else w[:16].decode("ascii", "replace") for w in argv]
    child, words = words[0] == CHILD, words[words[0] == CHILD:]
    return ("child " if child else "") + " ".join(words[len(RUN):] if words[:len(RUN)] == RUN else words)[:60]


@pytest.mark.parametrize("argv,fragments", REFUSED, ids=[_name(getattr(r, "values", r)[0])
                                                         for r in REFUSED])
def test_bad_input_to_bench_is_one_line_and_writes_nothing(argv, fragments, tmp_path, capsys, monkeypatch, request):
    """Nothing on stdout, nothing written: not --out, not the user's file, nothing in the working folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("keep me\n")
    if any("TMP/fifo" in str(word) for word in argv):
        fifo(tmp_path / "fifo", request)
    words = []
    for word in argv:
        if isinstance(word, bytes):
            (tmp_path / "bad.yaml").write_bytes(word)
            word = str(tmp_path / "bad.yaml")
        words.append(word.replace("TMP", str(tmp_path)))
    if words[words[0] == CHILD] in ("run", "consensus") and "--out" not in words:
        words += ["--out", str(tmp_path / "out")]
    status, out, err = run_cli(analysis_main, words[1:], capsys) if words[0] == "analysis" else run_bench(words, capsys)
    line = assert_refused(status, err, *[f.replace("TMP", str(tmp_path)) for f in fragments])
    assert "nan" not in line or "negative" not in line  # lr=nan was called a negative learning rate
    assert out == "" and {p.name for p in tmp_path.iterdir()} <= {"notes.txt", "bad.yaml", "fifo"}
    assert (tmp_path / "notes.txt").read_text() == "keep me\n"


def test_a_permission_error_is_one_line_naming_the_path(tmp_path, capsys, monkeypatch):
    import bench.run

    def refuse(*_args, **_kwargs):  # root ignores file modes: the OS's refusal a user would meet, by hand
        raise PermissionError(13, "Permission denied", str(tmp_path / "run.json"))

    monkeypatch.setattr(bench.run, "start", refuse)  # what `bench run` calls
    status, _, err = run_bench([*RUN, "--out", str(tmp_path)], capsys)
    assert_refused(status, err, str(tmp_path / "run.json"), "Permission denied")


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", bytes(range(256)), b'{"ring|4": "fast"}'])
def test_a_corrupt_gamma_cache_names_the_file_and_is_kept(content, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CHOCO_BENCH_CACHE", str(tmp_path))  # never the session's shared cache
    (tmp_path / "gamma.json").write_bytes(content)
    argv = [*RUN, "--compressor", "top:0.5", "--set", "gamma_tune_steps=5", "--out", str(tmp_path / "run")]
    assert_refused(*run_bench(argv, capsys)[::2], str(tmp_path / "gamma.json"), "remove")
    assert (tmp_path / "gamma.json").read_bytes() == content and not (tmp_path / "run" / "run.json").exists()


# ---- a method's knobs: bad values generated from each option field's default and declared range ------------
def _knobs(cls) -> list:
    """The fields a user sets (not the run settings the method is handed by name)."""
    return [f for f in dataclasses.fields(cls.Options) if f.name not in getattr(cls, "settings", ())]


def bad_values(field) -> list:
    """Values of another kind than the knob's default, and numbers outside its declared ``low``..``high``."""
    default, meta = field.default, field.metadata
    if isinstance(default, bool):
        bad = ["yes", 1, None]
    elif isinstance(default, int):
        bad = ["x", "auto", True, 2.5, -1, [1]]  # a count: whole and not negative
    elif isinstance(default, float):
        bad = ["x", "auto", True, math.nan, math.inf, -math.inf, [1]]
    elif isinstance(default, tuple):  # a list of epochs: increasing, finite, not negative
        bad = ["x", True, [-1], [2, 1], [math.inf]]
    else:
        bad = ["x", True, [1]]
    if "low" in meta:
        bad += [meta["low"] - 1, math.nan]
    if "high" in meta:
        bad += [meta["high"] + 1, math.inf]
    return bad


# the edges of ranges the metadata does not say are open (a step of 0 does nothing), and a knob read with another
EDGES = {"beer": {"gamma": 0.0}, "cedas": {"mix_step": 0.0, "decay_shift": 0}, "lead": {"dual_step": 0.0},
         "docom": {"beta": 0.0}, "motef": {"lam": 0.0}, "powersgd": {"rank": 0}, "powergossip": {"rank": 0},
         "choco": {"ada_beta": 1.0, "ada_eps": 0, "gamma_tune_steps": 0}}


@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_every_knob_refuses_values_outside_its_kind_and_range_in_one_line_naming_it(name):
    cls = ALGORITHMS.get(name)
    cases = [(f.name, value) for f in _knobs(cls) for value in bad_values(f)]
    for key, value in [*cases, *EDGES.get(name, {}).items(), (f"{name}_knob", 1)]:
        with pytest.raises(BenchError) as err:
            parse_options(cls, {key: value})
        line = str(err.value)
        assert "\n" not in line and line.startswith((f"{name} {key}=", f"unknown option '{key}' for algorithm")), line
    parse_options(cls, {f.name: f.default for f in _knobs(cls)})  # the defaults are values it takes


# ---- a study at DAG build ----------------------------------------------------------------------------------
BLOCK = {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4]}


def study(block=None, **top):
    """A small lsq study of one block ``b`` (the block's keys over BLOCK's)."""
    return {"study": "v", "task": "lsq", "seeds": [0, 1], "defaults": {"epochs": 1, "gamma": 0.5},
            "blocks": {"b": {**BLOCK, **(block or {})}}, **top}


CONSENSUS = {"topology": "ring", "nodes": 8, "dim": 4, "steps": 4, "methods": ["exact"], "seed": 0}
# (a block "bad" beside a good one, changes at the top of the study, fragments of the line); what a value's own
# line says is its reader's table (tests/test_topology.py, test_start.py, ...): here, where a study's line names it
BAD_STUDIES = [
    ({"seed": [1, 2, 3]}, {}, ["block 'bad'", "seed", "seeds:"]),  # merged three cells into one, on the study's seeds
    ({"task": ["digits-mlp"]}, {}, ["block 'bad'", "task", "'lsq'"]),  # replaced by the study's, merged with b
    ({"algorithm": ["dcd"]}, {}, ["block 'bad'", "algorithm", "method"]),
    ({"compressor": ["dcd"]}, {}, ["block 'bad'", "compressor", "method"]),
    ({"lerning_rate": [0.1]}, {}, ["block 'bad'", "'lerning_rate'", "lr"]),
    ({"topology": ["torus"], "nodes": [37]}, {}, ["block 'bad'", "cell choco-sign_torus37", "n=37"]),
    ({"method": ["choco/top:2"]}, {}, ["cell choco-top2_ring4", "'top:2'"]),
    # one training listed twice, however spelt: its runs were trained (and reported) twice
    ({"method": ["choco/top:0.1", "choco/top:0.10"]}, {},
     ["block 'bad', cells choco-top0.1_ring4 and choco-top0.10_ring4 are one training", "lsq_choco_top0.1_ring4_s0"]),
    ({"data": ["dirichlet:0.1", "dirichlet:1e-1"]}, {}, ["cells choco-sign_ring4_data=dirichlet0.1 and "
                                                         "choco-sign_ring4_data=dirichlet1e-1 are one training"]),
    ({"topology": ["file:no-such-edges.txt"]}, {}, ["cell choco-sign_fileno-such-edges.txt4", "'no-such-edges.txt'"]),
    ({"method": ["powergossip/none"], "topology": ["one-peer-exp"]}, {},  # the published form on one-way links
     ["cell powergossip-none_one-peer-exp4", "warm_start=false"]),
    (None, {"defaults": {"epochs": 1, "network": "lan-1g"}}, ["block 'b'", "'lan-1g'"]),  # at the first cell
    (None, {"defaults": {"epochs": 1, "colour": "blue"}}, ["unknown setting 'colour' in the study's defaults"]),
    (None, {"gpu": {"defaults": {"network": "lan-1g"}}, "scale": "gpu"},  # the GPU cells, at scale=gpu
     ["at scale=gpu: block 'b', cell choco-sign_ring4", "'lan-1g'"]),
    (None, {"gpu": {"defaults": {"task_options": 0}}, "scale": "gpu"},  # was 'int' object is not iterable
     ["at scale=gpu: gpu.defaults.task_options=0 must be a mapping"]),  # (found by test_entry_properties)
    (None, {"consensus": {**CONSENSUS, "topology": "torus", "nodes": 37}}, ["consensus", "n=37"]),
    (None, {"consensus": {**CONSENSUS, "methods": ["exact", "top:2"]}}, ["consensus", "'top:2'"]),
]


@pytest.mark.parametrize("block,top,fragments", BAD_STUDIES, ids=[" ".join(f) for *_, f in BAD_STUDIES])
def test_a_bad_study_is_one_line_at_dag_build_naming_block_cell_and_value(block, top, fragments, tmp_path,
                                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a file topology is looked for
    config = study({"method": ["choco/sign", "dpsgd/none"], "nodes": [4, 9]}, **top)
    if block is not None:
        config["blocks"]["bad"] = {**BLOCK, **block}
    with pytest.raises(BenchError) as err:
        Study(config)
    line = str(err.value)
    assert "\n" not in line and line.startswith("study 'v' at scale=") and "--set" not in line, line
    assert all(fragment in line for fragment in fragments), line


@pytest.mark.parametrize("block, cell", [
    ({"method": ["dcd/sign"], "faults": {"drop": 0.1}}, "dcd-sign_ring4_faults=drop0.1~"),
    ({"method": ["adpsgd/none"], "backend": "dist"}, "adpsgd-none_ring4_backend=dist"),
], ids=["faults-without-a-rule", "backend-refused"])
def test_a_cell_bench_run_would_refuse_is_refused_at_the_dag_build_with_its_line(block, cell, tmp_path, capsys):
    """The DAG build checks a cell as `bench run` does before it writes anything (bench/run/resolved.py): faults
    the method has no rule for, a backend it refuses; the same line, after the cell's name."""
    config = study()
    config["blocks"]["bad"] = {**BLOCK, **block}
    with pytest.raises(BenchError) as err:
        Study(config)
    message = str(err.value)
    settings = {**config["defaults"], **{k: v for k, v in block.items() if k != "method"}, "task": "lsq",
                "topology": "ring", "nodes": 4, "algorithm": block["method"][0].split("/")[0],
                "compressor": block["method"][0].split("/")[1]}
    line = refused(main, ["run", "--settings", json.dumps(settings), "--out", str(tmp_path / "r")], capsys)
    assert not (tmp_path / "r").exists() and line.startswith("bench: error: ")
    assert message.startswith(f"study 'v' at scale=cpu: block 'bad', cell {cell}")
    assert message.endswith(f": {line.removeprefix('bench: error: ')}")


@pytest.mark.slow
def test_a_real_run_with_shell_code_in_its_values_runs_none_of_it(tmp_path, monkeypatch):
    """A file topology and a data root whose names hold shell code, trained and gossiped for real."""
    monkeypatch.chdir(tmp_path)  # where the pipeline runs, so the edge file is found from here
    edges = "edges it's $(touch PWNED); touch PWNED `touch PWNED`.txt"
    (tmp_path / edges).write_text("0 1\n1 2\n2 3\n3 0\n")
    root = "it's $(touch PWNED); touch PWNED"
    config = study({"method": ["dpsgd/none"], "topology": [f"file:{edges}"]}, seeds=[0],
                   defaults={"epochs": 1, "batch_size": 8, "data_root": root,
                             "task_options": {"n_train": 64, "n_test": 16}},
                   consensus={**CONSENSUS, "topology": f"file:{edges}", "nodes": 4})
    (run,) = Study(config).runs
    targets = [f"results/v/runs/{run}/run.json", "results/v/consensus/exact/traces.csv"]
    (tmp_path / "v.yaml").write_text(json.dumps(config))  # JSON is YAML
    snakemake("--cores", "1", *targets, "--configfile", str(tmp_path / "v.yaml"), "--directory", str(tmp_path))
    assert not list(tmp_path.rglob("PWNED"))
    info = json.loads((tmp_path / targets[0]).read_text())
    assert info["status"] == "completed"
    assert info["config"]["data_root"] == root and info["config"]["topology"] == f"file:{edges}"
