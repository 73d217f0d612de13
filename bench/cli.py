"""The ``bench`` command line. Bad input ends with one line on stderr and exit status 2."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from .errors import BenchError, out_of_memory
from .limits import DEVICES, MAX_CONSENSUS_ENTRIES, MAX_DIM, MAX_NODES, MAX_ROUNDS, MAX_SEED, is_device


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, status 2, no usage dump
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)

    def parse_known_args(self, args=None, namespace=None):
        # argparse drops "--" from an option's value: `--grid=--` became an empty list no type check saw
        for word in sys.argv[1:] if args is None else args:
            flag, eq, value = word.partition("=")
            if word.startswith("-") and eq and value == "--":
                self.error(f"argument {flag}: '--' is not a value")
        return super().parse_known_args(args, namespace)


def _int_between(low: int, high: int | None = None, why: str = ""):
    """An argparse type: an integer >= low (and <= high when given; `why` explains that bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} must be >= {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{value} must be <= {high}{why}")
        return value

    return parse


_positive_int = _int_between(1)
_non_negative_int = _int_between(0)
_node_count = _int_between(1, MAX_NODES, " (W is a dense n x n matrix)")
_seed = _int_between(0, MAX_SEED)
MAX_GRID = 1000  # γ values of one tune-gamma grid, each a full consensus run


def _device(*extra: str):
    """An argparse type: a torch device string the suite runs on, or one of ``extra`` (e.g. auto)."""

    def parse(text: str) -> str:
        if text in extra or is_device(text):
            return text
        raise argparse.ArgumentTypeError(f"{text!r}; allowed: {', '.join([*extra, DEVICES])}")

    return parse


def _output_dir(text: str) -> str:
    """A directory to write into (made when missing): refused when it or a folder above it is a file,
    or when it cannot be written, before anything runs."""
    if not text.strip():  # Path("") is the working folder: `--out ""` wrote there, or (consensus) nowhere
        raise argparse.ArgumentTypeError(f"{text!r} is an empty path; give a directory")
    path = Path(text)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None:
        return text
    if not existing.is_dir():
        where = f"{text!r} is" if existing == path else f"{text!r}: {existing} is"
        raise argparse.ArgumentTypeError(f"{where} a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: {existing} is not writable")
    return text


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
    return value


def _safety(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 1:
        raise argparse.ArgumentTypeError(f"{text} must be >= 1 (a factor on the planned time)")
    return value


def _vectorize(text: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise argparse.ArgumentTypeError(f"{text!r}; allowed: true, false")


def _gamma_grid(text: str) -> list[float]:
    """``LO:HI:COUNT`` (COUNT values log-spaced from 10^LO to 10^HI) or a comma list of values."""
    import numpy as np

    try:
        if ":" in text:
            lo, hi, count = text.split(":")
            lo, hi, count = float(lo), float(hi), int(count)
        else:
            grid = [float(g) for g in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not LO:HI:COUNT (log10 bounds, a whole COUNT) "
                                         "nor a comma list of numbers") from None
    if ":" in text:
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise argparse.ArgumentTypeError(f"{text!r}: LO and HI must be finite (log10 of the smallest and "
                                             "largest gamma)")
        if not 1 <= count <= MAX_GRID:  # an empty grid used to fall back to the default one
            raise argparse.ArgumentTypeError(f"{text!r}: COUNT={count} must be >= 1 and <= {MAX_GRID}")
        grid = [float(g) for g in np.logspace(lo, hi, count)]
    outside = [g for g in grid if not 0 < g <= 1]
    if outside:
        raise argparse.ArgumentTypeError(f"{text!r}: gamma={outside[0]:g} is outside (0, 1]")
    return grid


# The training tasks of bench.tasks.TASKS, written out so that `bench run --help` needs no torch
# (tests/test_logs.py keeps them equal to the registry); the algorithms are the catalog's.
TASK_NAMES = ("mnist1d-mlp", "mnist1d-cnn", "digits-mlp", "cifar10-resnet20", "cifar10-resnet8",
              "imagenet-resnet50", "wikitext2-lstm", "lsq", "logreg")


def algorithm_names() -> list[str]:
    """The names of bench.algorithms.ALGORITHMS without importing it (and torch): the catalog's
    (bench/catalog/algorithms.py), which every algorithm class builds on."""
    from .catalog.algorithms import METHODS

    return sorted(METHODS.names())


# (flag, type, metavar, help) of the `bench run` flags that set one setting each; the default of the setting
# of the same name (dashes as underscores) is added to the help when it is shown.
_RUN_FLAGS = [
    ("task", str, "NAME", f"the training task, model and data set: {', '.join(TASK_NAMES)}"),
    ("algorithm", str, "NAME", "the training algorithm: @algorithms@"),  # listed when the help is shown
    ("compressor", str, "SPEC", "the compression operator Q: none, sign, top:F or rand:F (a fraction F of the "
     "coordinates, e.g. top:0.01), qsgd:B (B bits, e.g. qsgd:4); options after commas, e.g. rand:0.01,unbiased=true "
     "or qsgd:4,biased=true"),
    ("topology", str, "SPEC", "the communication graph: ring, torus, complete, star, exponential, social, "
     "random-regular:K, erdos-renyi:P, expander (n prime), margulis (n a square), one-peer-exp (time-varying, "
     "n a power of 2) or file:PATH (an edge list), e.g. random-regular:4"),
    ("nodes", int, "N", "the number of workers n"),
    ("epochs", float, "E", "passes over the training data (fractions allowed)"),
    ("seed", int, "S", "seeds the data order, initial model and compression randomness"),
    ("lr", float, "LR", "learning rate (its peak under warm-up; schedule: --set lr_schedule=...)"),
    ("batch-size", int, "B", "minibatch size per worker"),
    ("data", str, "SCHEME", "how the training set is dealt to the workers: shuffle (reshuffled every epoch), "
     "split (one fixed i.i.d. deal), sorted (by label), dirichlet:ALPHA (label skew, e.g. dirichlet:0.5)"),
    ("gamma", str, "GAMMA", "Choco's consensus step size in (0, 1], or auto: tuned on the consensus problem "
     "over 20 values (gamma_tune_steps rounds each; cached per graph, n and compressor)"),
    ("backend", str, "NAME", "sim (all workers in one process) or dist (torch.distributed processes; "
     "--set procs=P)"),
    ("device", str, "DEVICE", f"where to train: {DEVICES}"),
    ("weights", str, "SCHEME", "the mixing weights: uniform, metropolis or maxdeg (default: the paper's choice "
     "for the topology)"),
    ("network", str, "PRESET", "the α–β model of the simulated communication time: datacenter-100g, "
     "datacenter-10g, p2p-100m, edge-10m, with overrides e.g. p2p-100m,latency=0.001,bandwidth=1e8"),
]
_RUN_EPILOG = "@settings@"  # replaced by the list of settings when the help is shown (`_RunHelp`)


def _setting_default(key: str) -> str:
    from dataclasses import MISSING

    from .run.config import KEYS

    field = KEYS[key]
    value = field.default_factory() if field.default is MISSING else field.default
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return json.dumps(list(value))
    if value is None:
        return "null"
    return str(value)


def _settings_text() -> str:
    """The epilog of `bench run --help`: every setting that has no flag of its own, with its default."""
    import textwrap

    from .run.config import KEYS

    flagged = {flag.replace("-", "_") for flag, *_ in _RUN_FLAGS} | {"quiet"}
    items = [f"{key}={_setting_default(key)}" for key in KEYS if key not in flagged]
    return "\n".join([
        "every other setting: --set KEY=VALUE (or KEY: VALUE in a --config file); with its default:",
        textwrap.fill("  ".join(items), width=100, initial_indent="  ", subsequent_indent="  ",
                      break_on_hyphens=False, break_long_words=False),
        "  task_options.KEY=VALUE: the task's own (model and data sizes), e.g. task_options.n_train=800",
        "  algorithm_options.KEY=VALUE: the algorithm's own, e.g. algorithm_options.rank=4 (powersgd)",
        "  recipe=tuned takes lr, momentum, weight decay, gamma and batch size from bench/run/recipes.yaml",
        "(null: unset; bench/run/config.py says what each one does)",
    ])


class _RunHelp(argparse.RawDescriptionHelpFormatter):
    """`bench run --help`: each setting flag shows its default, read from RunConfig only when the help is
    shown (building the parser stays free of it), and the epilog lists the settings without a flag."""

    def _get_help_string(self, action):
        text = action.help or ""
        key = action.dest
        if "(default" not in text and action.option_strings and key not in ("out", "sets"):
            from .run.config import KEYS

            if key in KEYS:
                text += f" (default: {_setting_default(key)})"
        if "@algorithms@" in text:
            text = text.replace("@algorithms@", ", ".join(algorithm_names()))
        return text.replace("%", "%%")

    def add_text(self, text):
        if text == _RUN_EPILOG:
            text = _settings_text()
        super().add_text(text)

    def _fill_text(self, text, width, indent):
        if "\n" not in text:  # the description: wrapped; the epilog keeps its lines
            return argparse.HelpFormatter._fill_text(self, text, width, indent)
        return super()._fill_text(text, width, indent)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bench", description="Decentralized SGD with compressed communication: runs and measurements.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="one training run: writes run.json and metrics.parquet to --out",
                       description="One training run of decentralized SGD: run.json (settings, status, final "
                       "numbers) and metrics.parquet (one row per evaluation) in --out. Settings are layered: "
                       "defaults < --config file < the flags below < --set KEY=VALUE.",
                       epilog=_RUN_EPILOG, formatter_class=_RunHelp)
    r.add_argument("--out", required=True, type=_output_dir, metavar="DIR",
                   help="run directory (created; an unfinished run of the same settings there is resumed, a "
                   "finished one is left as it is, one of other settings is refused: see --replace-stale)")
    r.add_argument("--config", default=None, metavar="FILE",
                   help="YAML file of settings, keys as in --set (default: none)")
    r.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="any setting, VALUE in YAML, repeatable: e.g. --set lr_schedule=warmup-multistep "
                   "--set milestones=[150,225] --set task_options.hidden=[64,64] (the keys are listed below)")
    for flag, kind, metavar, text in _RUN_FLAGS:
        r.add_argument(f"--{flag}", type=kind, default=None, metavar=metavar, help=text)
    r.add_argument("--quiet", action="store_true", default=None,
                   help="no progress output: no bar on a terminal, no per-evaluation lines in a log, no closing "
                   "line (errors are still one line on stderr) (default: off)")
    r.add_argument("--replace-stale", action="store_true", default=None,
                   help="when --out holds a run of other settings (or results no run.json describes), move its "
                   "files to .stale/<name>-<fingerprint>/ beside --out (kept, never deleted) and start this run "
                   "there, instead of refusing (default: off)")

    t = sub.add_parser("topology", help="describe a topology and its mixing matrix")
    t.add_argument("--topology", required=True, help="ring, torus, complete, star, exponential, social, "
                   "random-regular:K, erdos-renyi:P, expander, margulis, one-peer-exp, file:PATH")
    t.add_argument("--nodes", type=_node_count, required=True)
    t.add_argument("--weights", default=None, help="uniform | metropolis | maxdeg (default: as in the paper)")
    t.add_argument("--seed", type=_seed, default=0, help="seed of the random graphs")
    t.add_argument("--json", action="store_true", help="print one JSON object")

    g = sub.add_parser("tune-gamma", help="grid search of Choco's γ on the consensus problem")
    _consensus_args(g)
    g.add_argument("--compressor", required=True)
    g.add_argument("--grid", type=_gamma_grid, default=None, help="LO:HI:COUNT in log10 (default -3:0:20) or a list")
    g.add_argument("--json", action="store_true")

    c = sub.add_parser("consensus", help="Choco-Gossip vs exact gossip, γ tuned per compressor")
    _consensus_args(c)
    c.add_argument("--methods", nargs="+", default=["exact", "sign", "top:0.01", "rand:0.01", "qsgd:2"],
                   help="'exact' (exact gossip) and compressor specs for Choco-Gossip")
    c.add_argument("--gamma", type=float, default=None, help="Choco's γ for every compressor (default: tuned)")
    c.add_argument("--tune-steps", type=_int_between(1, MAX_ROUNDS, " (gossip rounds)"), default=None, help="rounds per γ trial (default: --steps)")
    c.add_argument("--out", type=_output_dir, default=None, help="directory for traces.csv and summary.csv")
    f = sub.add_parser("perf", help="performance benchmarks: results/perf/<name>.json and a table")
    f.add_argument("--name", default="latest", help="file name under --out-dir (default: latest)")
    f.add_argument("--out-dir", type=_output_dir, default="results/perf")
    f.add_argument("--device", type=_device(), default="cpu")
    f.add_argument("--only", default=None, help="comma list of benchmark groups a,b,c,d,e (default: a-d, and e on CUDA)")
    f.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test of the benchmark itself)")
    f.add_argument("--quiet", action="store_true")

    n = sub.add_parser("plan", help="every job of a study timed on synthetic data: results/<study>/plan.csv, "
                       "steps and GPU-hours per job, shape and rule")
    n.add_argument("--configfile", action="append", required=True, metavar="FILE",
                   help="the study's YAML (repeat to merge several, as snakemake does)")
    n.add_argument("--scale", default=None, help="cpu | gpu (default: the study file's, else cpu)")
    n.add_argument("--steps", type=_positive_int, default=3, help="timed training steps per shape (median; default 3)")
    n.add_argument("--warmup", type=_non_negative_int, default=1, help="untimed steps first (default 1)")
    n.add_argument("--device", type=_device("auto"), default="auto",
                   help="auto (cuda when a GPU is here, else cpu) | cpu | cuda")
    n.add_argument("--safety", type=_safety, default=None,
                   help="runtime asked of SLURM = planned time x this (default: the study's plan_safety, 1.5)")
    n.add_argument("--max-workers", type=_positive_int, default=None,
                   help="time at most this many workers and scale s/step by n (an extrapolation, said so)")
    n.add_argument("--vectorize", type=_vectorize, default=None,
                   help="true | false: impose the gradient path (default: the run's rule, vectorised where it runs)")
    n.add_argument("--out", default=None, help="CSV to write (default results/<study>/plan.csv)")
    n.add_argument("--quiet", action="store_true")

    k = sub.add_parser("track", help="the quick set (perf --quick and config/track.yaml) of one commit, appended to "
                       "results/history/<machine>/<commit>/ (docs/tracking.md)")
    from .track import add_arguments as track_arguments  # no torch at import

    track_arguments(k, _output_dir, _positive_float, _device())

    m = sub.add_parser("compare", help="your method against the baselines: writes a study to "
                       "results/compare-NAME/study.yaml and runs the pipeline on it (report.html, report.md)")
    from .pipeline.compare import add_arguments as compare_arguments  # no torch at import

    compare_arguments(m, _positive_int, _positive_float, _node_count)

    b = sub.add_parser("bits", help="MiB per iteration of each compressor for a model's per-layer shapes")
    b.add_argument("--model", default="resnet20", help="resnet20, resnet8, ... (CIFAR ResNet-(6k+2))")
    b.add_argument("--compressors", nargs="+", default=["none", "qsgd:16", "qsgd:8", "qsgd:4", "qsgd:2", "top:0.5",
                   "top:0.1", "top:0.01", "rand:0.5", "rand:0.1", "rand:0.01", "sign"])
    return p


def _consensus_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", default="ring")
    p.add_argument("--nodes", type=_node_count, default=25)
    p.add_argument("--weights", default=None)
    p.add_argument("--dim", type=_int_between(1, MAX_DIM, " (coordinates per node)"), default=2000)
    p.add_argument("--steps", type=_int_between(1, MAX_ROUNDS, " (gossip rounds)"), default=1000)
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--quiet", action="store_true")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    try:
        if args.command in ("consensus", "tune-gamma") and args.nodes * args.dim > MAX_CONSENSUS_ENTRIES:
            raise BenchError(f"--nodes {args.nodes} x --dim {args.dim} = {args.nodes * args.dim} values per state; "
                             f"at most {MAX_CONSENSUS_ENTRIES} (2 GiB of float64)")
        if args.command == "topology":
            return _cmd_topology(args)
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "tune-gamma":
            from .commands import cmd_tune_gamma

            return cmd_tune_gamma(args)
        if args.command == "perf":
            from .perf import cmd_perf

            return cmd_perf(args)
        if args.command == "plan":
            from .plan import cmd_plan

            return cmd_plan(args)
        if args.command == "track":
            from .track import cmd_track

            return cmd_track(args)
        if args.command == "compare":
            from .pipeline.compare import cmd_compare

            return cmd_compare(args)
        if args.command == "bits":
            from .commands import cmd_bits

            return cmd_bits(args)
        if args.command == "consensus":
            from .commands import cmd_consensus

            return cmd_consensus(args)
    except BenchError as err:
        print(f"bench: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a path the system refused: not writable, a file where a folder must be
        if err.filename is None:
            raise
        print(f"bench: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as err:  # sizes (data, model, dim) beyond this machine, from numpy or torch
        if not out_of_memory(err):
            raise
        reason = next((line for line in str(err).splitlines() if "allocate" in line), type(err).__name__)
        print(f"bench: error: not enough memory for these sizes ({reason.strip()[:200]}); use smaller ones",
              file=sys.stderr)
        return 2
    raise AssertionError(args.command)


def _cmd_run(args) -> int:
    from .run import resolve, run
    from .run.config import load_yaml, parse_sets

    flags = {k: v for k, v in vars(args).items()
             if v is not None and k not in ("command", "out", "config", "sets", "argv", "replace_stale")}
    cfg = resolve(load_yaml(args.config) if args.config else {}, flags, parse_sets(args.sets))
    return run(cfg, args.out, argv=args.argv, replace_stale=bool(args.replace_stale))


def _cmd_topology(args) -> int:
    from .topology import make_topology

    topo = make_topology(args.topology, args.nodes, weights=args.weights, seed=args.seed)
    info = topo.describe()
    if args.json:
        print(json.dumps(info))
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            print(f"{key:<{width}}  {value}")
    return 0
