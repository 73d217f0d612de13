"""`bench compare`: a method of one's own against the baselines, with no study to write by hand.

The command spells out a study (the default study's task and settings, one grid of the methods asked for
and their baselines on one graph), checks it with the suite's own registries and `Study` before anything
runs, writes it to results/compare-NAME/study.yaml, and hands it to the real pipeline: Snakemake trains
every run, then draws the figures and writes report.md and report.html beside it. The study file is an
ordinary one, so it can be edited and run again with `snakemake --configfile`.
"""
from __future__ import annotations

import argparse
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from ..errors import BenchError
from ..files import atomic_write_text
from ..yamlio import load_yaml, read_yaml
from .names import MAX_STUDY, digest

ROOT = Path(__file__).resolve().parents[2]  # the checkout: Snakefile, config/
DEFAULT_STUDY = ROOT / "config" / "config.yaml"  # task, settings and target come from here
TUNED_STUDY = ROOT / "config" / "methods.yaml"  # the tune: block of --tune (a grid for any method)
PREFIX = "compare-"
MAX_NAME = MAX_STUDY - len(PREFIX)
# What a comparison needs: the reference method (centralized SGD, which every gap and target is read against,
# bench.algorithms.reference_method) and exact gossip, both uncompressed; then Choco-SGD with each compressor the
# methods compared use.
EXACT_GOSSIP = "dpsgd"
COMPRESSED_BASELINE = "choco"
FIGURES = ["accuracy_curves", "time_to_accuracy", "methods"]  # each draws from any set of trained cells
TUNED_FIGURES = ["sensitivity"]  # needs a tune: grid that the cells search
_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_NAME}}}")


# -- the command line ------------------------------------------------------------------------------------
def _seeds(text: str) -> list[int]:
    """An argparse type: a comma list of distinct seeds, e.g. 0,1,2."""
    from ..limits import MAX_SEED

    try:
        seeds = [int(word) for word in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of whole numbers, e.g. 0,1,2") from None
    bad = next((s for s in seeds if not 0 <= s <= MAX_SEED), None)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"seed {bad} must be >= 0 and <= {MAX_SEED}")
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r} names a seed twice")
    return seeds


def _name(text: str) -> str:
    if not _NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 to {MAX_NAME} letters, digits, _ or - (it names "
                                         f"the folders results/{PREFIX}NAME/ and logs/{PREFIX}NAME/)")
    return text


def add_arguments(p, positive_int, positive_float, node_count) -> None:
    """The flags of `bench compare` (bench/cli/compare.py builds the parser and passes its own type checks in)."""
    p.add_argument("methods", nargs="+", metavar="METHOD",
                   help="algorithm/compressor as in a study's blocks, e.g. mine/sign or choco/top:0.01")
    p.add_argument("--against", default=None, metavar="LIST",
                   help="comma list of methods to compare with, or none (default: allreduce/none, dpsgd/none "
                   "and choco/C for each compressor C of the METHODs)")
    p.add_argument("--task", default=None, help="the training task (default: the default study's, mnist1d-mlp)")
    p.add_argument("--topology", default="ring", metavar="SPEC", help="the graph of every run (default: ring)")
    p.add_argument("--nodes", type=node_count, default=8, metavar="N", help="workers (default: 8)")
    p.add_argument("--data", default=None, metavar="PARTITION",
                   help="shuffle, split, sorted or dirichlet:ALPHA (default: bench run's, shuffle)")
    p.add_argument("--seeds", type=_seeds, default=[0, 1, 2], metavar="LIST", help="comma list (default: 0,1,2)")
    p.add_argument("--epochs", type=positive_float, default=None, metavar="E",
                   help="epochs of every run (default: the default study's, 15)")
    p.add_argument("--tune", action="store_true",
                   help="tune lr (and gamma where a method has a consensus step) per cell first, with the grid "
                   "of config/methods.yaml, and draw the sensitivity figure")
    p.add_argument("--cores", type=positive_int, default=2, metavar="C", help="snakemake --cores (default: 2)")
    p.add_argument("--name", type=_name, default=None,
                   help=f"results go to results/{PREFIX}NAME/ (default: spelt from the METHODs)")
    p.add_argument("--dry-run", action="store_true",
                   help="write the study file and show what would run (snakemake -n); train nothing")
    p.add_argument("--snakemake-args", default="", metavar="ARGS",
                   help="more snakemake arguments, one quoted string, e.g. '--config lr=0.05' or "
                   "--snakemake-args=-p (an = when it is a single option)")


# -- the study --------------------------------------------------------------------------------------------
def split_list(text: str) -> list[str]:
    """The methods of a comma list; a piece `key=value` without `/` belongs to the method before it
    (a compressor's options: choco/rand:0.01,unbiased=true)."""
    out: list[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if out and "=" in piece and "/" not in piece:
            out[-1] += f",{piece}"
        elif piece:
            out.append(piece)
    return out


def check_method(method: str) -> tuple[str, str]:
    """(algorithm, compressor) of ``method``, each looked up in its registry, or one line."""
    from ..algorithms import ALGORITHMS
    from ..compressors import parse_compressor

    algorithm, _, compressor = method.partition("/")
    try:
        cls = ALGORITHMS.get(algorithm)
        cls.check_compressor(parse_compressor(compressor or "none", contraction=cls.contraction))
    except BenchError as err:
        raise BenchError(f"method {method!r}: {err}") from None
    return algorithm, compressor or "none"


def baselines(methods: list[str]) -> list[str]:
    """The default --against: the reference method and exact gossip, uncompressed, then Choco-SGD with each
    compressor of ``methods`` that it takes; none of ``methods`` themselves."""
    from ..algorithms import ALGORITHMS, reference_method
    from ..compressors import parse_compressor

    out = [f"{reference_method()}/none", f"{EXACT_GOSSIP}/none"]
    for method in methods:
        compressor = method.partition("/")[2] or "none"
        try:
            baseline = ALGORITHMS.get(COMPRESSED_BASELINE)
            baseline.check_compressor(parse_compressor(compressor, contraction=baseline.contraction))
        except BenchError:
            continue
        if compressor != "none":
            out.append(f"{COMPRESSED_BASELINE}/{compressor}")
    return [m for m in dict.fromkeys(out) if m not in methods]


def default_name(methods: list[str]) -> str:
    """A study name from the methods: mine/top:0.01 -> mine-top001; a digest when it would be too long."""
    name = "_".join(re.sub(r"[^A-Za-z0-9-]", "", m.replace("/", "-")) for m in methods) or "methods"
    return name if len(name) <= MAX_NAME else f"{name[: MAX_NAME - 11]}-{digest(methods)}"


def _check_names(args) -> None:
    """Each name the study uses, from the registry or parser `bench run` uses, in one line when unknown."""
    from ..tasks import TASKS
    from ..topology import make_topology

    try:
        TASKS.get(args.task)
    except BenchError as err:
        raise BenchError(f"--task: {err}") from None
    try:
        make_topology(args.topology, args.nodes)
    except BenchError as err:
        raise BenchError(f"--topology {args.topology} at --nodes {args.nodes}: {err}") from None
    if args.data is not None:
        import torch

        from ..data.partition import WorkerBatches

        try:  # the scheme alone: labels enough for any deal, a batch of one
            WorkerBatches(torch.arange(64 * args.nodes) % 2, args.nodes, 1, args.data)
        except BenchError as err:
            raise BenchError(f"--data: {err}") from None


def build(args) -> tuple[dict[str, Any], list[str], list[str]]:
    """The study config of ``args`` (checked), the methods compared and their baselines."""
    default = read_yaml(DEFAULT_STUDY, "the default study")
    args.task = args.task or default["task"]
    methods = list(dict.fromkeys(args.methods))
    for method in methods:
        check_method(method)
    if args.against is None:
        against = baselines(methods)
    elif args.against.strip() == "none":
        against = []
    else:
        listed = split_list(args.against)
        if not listed:
            raise BenchError(f"--against {args.against!r} names no method: give a comma list, e.g. "
                             "allreduce/none,choco/sign, or none")
        against = [m for m in dict.fromkeys(listed) if m not in methods]
        for method in against:
            check_method(method)
    _check_names(args)
    defaults = dict(default.get("defaults") or {})
    if args.epochs is not None:
        defaults["epochs"] = int(args.epochs) if float(args.epochs).is_integer() else args.epochs
    if args.data is not None:
        defaults["data"] = args.data
    grid = {"topology": [args.topology], "nodes": [args.nodes]}
    blocks = {"methods": {"method": methods, **grid}}
    if against:
        blocks["baselines"] = {"method": against, **grid}
    config: dict[str, Any] = {"study": PREFIX + (args.name or default_name(methods)), "task": args.task,
                              "defaults": defaults, "seeds": list(args.seeds), "blocks": blocks,
                              "figures": FIGURES + (TUNED_FIGURES if args.tune else []),
                              "analysis": dict(default.get("analysis") or {"target_rel": 0.95})}
    if args.tune:
        config["tune"] = read_yaml(TUNED_STUDY, "the methods study")["tune"]
    return config, methods, against


def load(config: dict[str, Any]):
    """The `Study` of ``config``, as the pipeline builds it (every cell checked with bench's parsers)."""
    from . import Study

    return Study(config)


def write(config: dict[str, Any], path: Path, argv: list[str]) -> None:
    """Write the study file, unless its folder holds runs of another comparison (they would be refused one
    by one as the pipeline reaches them)."""
    runs = path.parent / "runs"
    if path.is_file() and runs.is_dir() and any(runs.iterdir()):
        old = read_yaml(path, "the earlier study file")
        old = old if isinstance(old, dict) else {}
        changed = [k for k in {**old, **config} if old.get(k) != config.get(k)]
        if changed:
            raise BenchError(f"{path.parent}/ holds the runs of another comparison (its study.yaml differs in "
                             f"{', '.join(changed)}); give this one its own --name, or remove that folder")
    snakefile = "" if Path.cwd().resolve() == ROOT else f" --snakefile {ROOT / 'Snakefile'}"
    head = (f"# Written by `python -m bench compare {shlex.join(argv[1:])}`.\n"
            f"# An ordinary study: `snakemake{snakefile} --cores 2 --configfile {path}` runs it again, edited "
            "or not.\n")
    text = head + yaml.dump(config, Dumper=_PlainDumper, sort_keys=False, default_flow_style=None, width=100)
    if load_yaml(text, "the study file written") != config:  # what the pipeline will read back
        raise AssertionError(f"the study file does not read back as written:\n{text}")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


class _PlainDumper(yaml.SafeDumper):
    """PyYAML's safe writer without anchors and aliases, which the suite's reader refuses."""

    def ignore_aliases(self, data) -> bool:
        return True


def snakemake_command(args, path: Path) -> list[str]:
    """The pipeline's command line: the snakemake beside this interpreter (python -m snakemake otherwise)."""
    try:
        extra = shlex.split(args.snakemake_args)
    except ValueError as err:
        raise BenchError(f"--snakemake-args {args.snakemake_args!r}: {err}") from None
    exe = Path(sys.executable).parent / "snakemake"
    head = [str(exe)] if exe.is_file() else [sys.executable, "-m", "snakemake"]
    return [*head, "--snakefile", str(ROOT / "Snakefile"), "--cores", str(args.cores), "--rerun-incomplete",
            "--configfile", str(path), *extra, *(["-n"] if args.dry_run else [])]


def _stream(command: list[str]) -> int:
    """Run ``command`` on this terminal and wait for its exit, whatever interrupts the wait: Ctrl-C reaches
    Snakemake itself (one process group; a second SIGINT from here would break its shutdown), and a SIGTERM
    sent to this process is passed on, so Snakemake stops its jobs and marks them incomplete either way."""
    proc = subprocess.Popen(command)
    before = signal.signal(signal.SIGTERM, lambda *_: proc.poll() is None and proc.send_signal(signal.SIGTERM))
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                continue
    finally:
        signal.signal(signal.SIGTERM, before)


def _count(number, word: str) -> str:
    return f"{number} {word}" if number == 1 else f"{number} {word}s"


def cmd_compare(args) -> int:
    """Build, check and write the study, then run the pipeline on it."""
    if not (ROOT / "Snakefile").is_file():
        raise BenchError(f"bench compare needs the pipeline beside the package ({ROOT}/Snakefile): run it from "
                         "a checkout installed with pip install -e")
    config, methods, against = build(args)
    study = load(config)
    path = Path("results") / study.name / "study.yaml"
    command = snakemake_command(args, path)
    write(config, path, args.argv)
    trials = sum(len(study.trials(cell)) for cell in study.tuned_cells)
    tuning = f", after {_count(trials, 'tuning trial')}" if trials else ""
    print(f"compare: {path}: {_count(len(study.cells), 'method')} x {_count(len(study.seeds), 'seed')} = "
          f"{_count(len(study.runs), 'run')}{tuning} ({study.task}, {args.topology} n = {args.nodes}, "
          f"{_count(study.defaults.get('epochs'), 'epoch')}); {', '.join(methods)} against "
          f"{', '.join(against) or 'nothing'}", flush=True)
    print(f"compare: {shlex.join(command)}", flush=True)
    status = _stream(command)
    out = path.parent
    if status != 0:
        print(f"compare: snakemake stopped (exit status {status}); its logs are in logs/{study.name}/ (after an "
              "interruption the same command carries on)", file=sys.stderr, flush=True)
        return status if status > 0 else 128 - status  # killed by a signal: the shell's 128 + its number
    if args.dry_run:
        print(f"compare: dry run: nothing trained; the study file is {path} ({_count(len(study.runs), 'run')})")
    else:
        print(f"compare: the report is {out}/report.html (and report.md); figures in {out}/figures/")
    return 0
