"""`bench run`: one training run. The flags are settings of bench.run.config like any --set: plain text here,
coerced and range-checked by `resolve` (validate), which refuses in one line."""
from __future__ import annotations

import argparse
import json

from ..limits import DEVICES
from .common import output_dir

NAME = "run"
HELP = "one training run: writes run.json and metrics.parquet to --out"


def algorithm_names() -> list[str]:
    """The names of bench.algorithms.ALGORITHMS (every module of the package, a person's own too)."""
    from ..algorithms import ALGORITHMS

    return sorted(ALGORITHMS.names())


def task_names() -> list[str]:
    """The training tasks, as bench/tasks registers them."""
    from ..tasks import TASKS

    return list(TASKS.names())


def _compressors() -> str:
    from ..compressors import help_text  # each operator's own usage, summary and examples

    return help_text()


def _topologies() -> str:
    from ..topology import help_text  # each graph kind's own usage and note

    return help_text()


# what a placeholder of the flags' help stands for: read from the registries only when the help is shown
_FILLED = {"@algorithms@": lambda: ", ".join(algorithm_names()), "@tasks@": lambda: ", ".join(task_names()),
           "@compressors@": _compressors, "@topologies@": _topologies}


# (flag, metavar, help) of the flags that set one setting each (the setting of the same name, dashes as
# underscores); its default is added to the help when the help is shown.
RUN_FLAGS = [
    ("task", "NAME", "the training task, model and data set: @tasks@"),
    ("algorithm", "NAME", "the training algorithm: @algorithms@"),  # listed when the help is shown
    ("compressor", "SPEC", "@compressors@"),
    ("topology", "SPEC", "@topologies@"),
    ("nodes", "N", "the number of workers n"),
    ("epochs", "E", "passes over the training data (fractions allowed)"),
    ("seed", "S", "seeds the data order, initial model and compression randomness"),
    ("lr", "LR", "learning rate (its peak under warm-up; schedule: --set lr_schedule=...)"),
    ("batch-size", "B", "minibatch size per worker"),
    ("data", "SCHEME", "how the training set is dealt to the workers: shuffle (reshuffled every epoch), "
     "split (one fixed i.i.d. deal), sorted (by label), dirichlet:ALPHA (label skew, e.g. dirichlet:0.5)"),
    ("gamma", "GAMMA", "the consensus step γ of the methods that have one (algorithm_options.gamma), in (0, 1], "
     "or auto: each method tunes it on its own gossip over 20 values (gamma_tune_steps rounds each; cached per "
     "graph, n and compressor)"),
    ("backend", "NAME", "sim (all workers in one process) or dist (torch.distributed processes; "
     "--set procs=P)"),
    ("device", "DEVICE", f"where to train: {DEVICES}"),
    ("weights", "SCHEME", "the mixing weights: uniform, metropolis or maxdeg (default: the paper's choice "
     "for the topology)"),
    ("network", "PRESET", "the α–β model of the simulated communication time: datacenter-100g, "
     "datacenter-10g, p2p-100m, edge-10m, with overrides e.g. p2p-100m,latency=0.001,bandwidth=1e8"),
]
SETTING_FLAGS = (*(flag.replace("-", "_") for flag, *_ in RUN_FLAGS), "quiet")  # what reaches resolve()
_EPILOG = "@settings@"  # replaced by the list of settings when the help is shown (`_RunHelp`)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = ("One training run of decentralized SGD: run.json (settings, status, final numbers) and "
                     "metrics.parquet (one row per evaluation) in --out. Settings are layered: defaults < --config "
                     "file < --settings < the flags below < --set KEY=VALUE.")
    p.epilog, p.formatter_class = _EPILOG, _RunHelp
    p.add_argument("--out", required=True, type=output_dir, metavar="DIR",
                   help="run directory (created; an unfinished run of the same settings there is resumed, a "
                   "finished one is left as it is, one of other settings is refused: see --replace-stale)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="YAML file of settings, keys as in --set (default: none)")
    p.add_argument("--settings", default=None, metavar="JSON",
                   help="settings as one JSON object, or the path of a file holding one, as the pipeline hands "
                   "its jobs (bench/run/settings_file.py): above --config, beneath the flags (default: none)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="any setting, VALUE in YAML, repeatable: e.g. --set lr_schedule=warmup-multistep "
                   "--set milestones=[150,225] --set task_options.hidden=[64,64] (the keys are listed below)")
    for flag, metavar, text in RUN_FLAGS:
        p.add_argument(f"--{flag}", default=None, metavar=metavar, help=text)
    p.add_argument("--quiet", action="store_true", default=None,
                   help="no progress output: no bar on a terminal, no per-evaluation lines in a log, no closing "
                   "line (errors are still one line on stderr) (default: off)")
    p.add_argument("--replace-stale", action="store_true", default=None,
                   help="when --out holds a run of other settings (or results no run.json describes), move its "
                   "files to .stale/<name>-<fingerprint>/ beside --out (kept, never deleted) and start this run "
                   "there, instead of refusing (default: off)")


def run(args) -> int:
    from ..run import start  # the library's one way into a run
    from ..run.config import load_yaml, parse_sets, resolve
    from ..run.settings_file import read_settings

    flags = {key: getattr(args, key) for key in SETTING_FLAGS if getattr(args, key) is not None}
    if args.settings is not None:  # the flags' layer, the flags given beside it above it
        flags = {**read_settings(args.settings), **flags}
    cfg = resolve(load_yaml(args.config) if args.config else {}, flags, parse_sets(args.sets))
    return start(cfg, args.out, argv=args.argv, replace_stale=bool(args.replace_stale))


# -- the help -------------------------------------------------------------------------------------------
def _settings() -> dict:
    """Every setting of a run by name: RunConfig's fields, and the knobs of the algorithms that a run-level
    word names (gamma, order: bench.algorithms.shortcuts), each with its default."""
    from ..algorithms import shortcuts
    from ..run.config import KEYS

    return {**KEYS, **{name: f for name, f in shortcuts().items() if name not in KEYS}}


def _setting_default(key: str) -> str:
    from dataclasses import MISSING

    field = _settings()[key]
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

    items = [f"{key}={_setting_default(key)}" for key in _settings() if key not in SETTING_FLAGS]
    return "\n".join([
        "every other setting: --set KEY=VALUE (or KEY: VALUE in a --config file); with its default:",
        textwrap.fill("  ".join(items), width=100, initial_indent="  ", subsequent_indent="  ",
                      break_on_hyphens=False, break_long_words=False),
        "  task_options.KEY=VALUE: the task's own (model and data sizes), e.g. task_options.n_train=800",
        "  algorithm_options.KEY=VALUE: the algorithm's own knobs, e.g. algorithm_options.rank=4 (powersgd); gamma,",
        "    gamma_tune_steps and order are knobs of the methods that have them (bench/algorithms/knobs.py)",
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
            if key in _settings():
                text += f" (default: {_setting_default(key)})"
        for word, fill in _FILLED.items():
            if word in text:
                text = text.replace(word, fill())
        return text.replace("%", "%%")

    def add_text(self, text):
        if text == _EPILOG:
            text = _settings_text()
        super().add_text(text)

    def _fill_text(self, text, width, indent):
        if "\n" not in text:  # the description: wrapped; the epilog keeps its lines
            return argparse.HelpFormatter._fill_text(self, text, width, indent)
        return super()._fill_text(text, width, indent)
