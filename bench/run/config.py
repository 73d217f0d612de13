"""The settings of one training run, resolved: defaults ← YAML file ← flags ← ``--set key=value``, and their checks.

Every key is a field of ``RunConfig`` (commented once, here); an unknown key is one clear line listing the
known ones. ``task_options.KEY=VALUE`` reaches the task (model and data sizes); ``algorithm_options.KEY=VALUE``
(or a mapping ``algorithm_options: {KEY: VALUE}``) reaches the algorithm's options class, which owns and checks
every knob of the method (γ, order, PowerSGD's rank, ...). A few knobs keep a run-level word as a shortcut
(``gamma=0.3`` is ``algorithm_options.gamma=0.3``; the algorithm classes name them, ``bench.algorithms.shortcuts``).
How text becomes values is bench/run/parsing.py; a run's identity is bench/run/identity.py; the settings checked
against each other (and parsed into a run's parts) is bench/run/resolved.py.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..algorithms import shortcuts
from ..errors import BenchError
from ..limits import DEVICES, MAX_NODES, MAX_SEED, is_device
from . import identity, parsing
from .parsing import load_yaml, parse_sets  # noqa: F401  (the command line's, from here as before)


# A field's annotation says what `_coerce` accepts for it (None-able, a number, a list, a mapping); its
# metadata names the literal words a number field also takes ("words") and what an error asks for ("expects").
@dataclass(frozen=True)
class RunConfig:
    task: str = "mnist1d-mlp"  # registry name, see `bench run --help`
    algorithm: str = "choco"  # allreduce | dpsgd | dcd | ecd | choco
    compressor: str = "none"  # none | sign | top:F | rand:F | qsgd:B (+ options)
    topology: str = "ring"  # ring | torus | complete | star | exponential | social | expander | margulis | one-peer-exp | ...
    nodes: int = 8  # number of workers n
    weights: str | None = None  # mixing weights: uniform | metropolis | maxdeg (None: the paper's default)
    epochs: int | float = 10  # passes over the training data (fractions allowed; whole numbers stay ints)
    seed: int = 0  # seeds data order, initial model, compression randomness
    lr: float = field(default=0.1, metadata={"tune": True})  # learning rate η (peak value under warm-up)
    lr_schedule: str = "constant"  # constant | warmup-multistep | exp
    warmup_epochs: float = 0.0  # linear warm-up from lr/10 (warmup-multistep)
    milestones: tuple[float, ...] = field(  # epochs at which lr is multiplied by lr_decay (warmup-multistep)
        default=(), metadata={"expects": "a list of epochs, e.g. [150, 225]"})
    lr_decay: float = 0.1  # factor at each milestone; per-epoch factor under exp
    batch_size: int = 32  # per worker
    data: str = "shuffle"  # shuffle | split | sorted | dirichlet:α
    val_fraction: float = 0.0  # share of the training set held out as a validation set (tuning); 0: none
    # momentum 0.9 as in the paper; Nesterov and weight decay 1e-4 as in the authors' CIFAR-10 scripts (the paper tunes
    # weight decay), never on BatchNorm parameters
    # μ of the shared local step; 0: plain SGD (and nesterov off unless set)
    momentum: float = field(default=0.9, metadata={"tune": True})
    nesterov: bool = True
    weight_decay: float = field(default=1e-4, metadata={"tune": True})  # not applied to BatchNorm parameters
    grad_clip: float | None = None  # clip each worker's gradient to this norm (the LSTM's 0.4)
    per_layer: bool = True  # compress each parameter tensor separately (as the paper)
    network: str = "datacenter-10g"  # α–β preset (+ overrides) for the modelled communication time
    # measured, or seconds per step to model a target device
    compute_time: float | str = field(default="measured", metadata={"words": ("measured",)})
    eval_every: float = 1.0  # epochs between evaluations (fractions allowed)
    # local models scored at each evaluation: all (the paper's metric), or an evenly spaced sample of k
    # (0: none); the final evaluation always scores all n
    eval_local_workers: int | str = field(default="all", metadata={"words": ("all",),
                                                                   "expects": "'all' or a count >= 0"})
    checkpoint_every: float = 1.0  # epochs between checkpoints (also on SIGTERM/SIGINT)
    # pause after this many epochs (status paused, checkpoint kept); the same run with a larger stop_at,
    # or none, continues it: the run's identity is its full schedule (successive halving's rungs)
    stop_at: float | None = None
    divergence_loss: float = 1e3  # training loss above this (or NaN) marks the run diverged
    device: str = "cpu"  # cpu | cuda
    backend: str = "sim"  # sim: all workers in one process; dist: torch.distributed processes
    procs: int | None = None  # dist: processes (workers split evenly); default one per worker or torchrun's
    dist_timeout: float = 60.0  # dist: seconds a process waits for a dead peer before the run fails
    data_root: str | None = None  # directory of CIFAR-10 / WikiText-2 / ImageNet (or a cache dir)
    quiet: bool = False  # no progress output
    recipe: str = "none"  # none | tuned: take lr, momentum, weight decay, γ, batch size from recipes.yaml
    # the algorithm's knobs (gamma, order, rank=4, ...), owned and checked by its Options class
    algorithm_options: dict[str, Any] = field(
        default_factory=dict, metadata={"expects": "a mapping of option names to values, e.g. {gamma: 0.3}"})
    task_options: dict[str, Any] = field(  # per-task knobs, e.g. hidden=[100, 100]
        default_factory=dict, metadata={"expects": "a mapping of option names to values, e.g. {hidden: [64, 64]}"})
    # an unreliable network (bench/faults/spec.py): lost messages per directed link and round, seeded by seed
    faults: dict[str, Any] = field(
        default_factory=dict, metadata={"expects": "a mapping of fault settings, e.g. {drop: 0.05}"})

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["milestones"] = list(self.milestones)
        return out

    def fingerprint(self) -> str:
        """Hash of everything that changes the numbers (bench/run/identity.py)."""
        return identity.fingerprint(self)

    @functools.cached_property
    def graph_digest(self) -> str | None:
        """Digest of the edges of a graph read from a file (None for built-in graphs), read once so
        that a run keeps one identity even if the file is edited while it trains."""
        from ..topology import graph_digest

        return graph_digest(self.topology, self.nodes, self.weights, self.seed)

    def run_id(self) -> str:
        return identity.run_id(self)


KEYS = {f.name: f for f in fields(RunConfig)}
KINDS = {name: parsing.kinds(hint) for name, hint in typing.get_type_hints(RunConfig).items() if name in KEYS}
ALIAS = "algorithm_options"
_LATER_KEYS = identity.LATER_KEYS  # as before, for readers
RECIPES = Path(__file__).with_name("recipes.yaml")  # tuned settings per task and method (see its header)
NONE_WORDS = parsing.NONE_WORDS


def _coerce(key: str, value: Any) -> Any:
    """A value from YAML or ``--set`` into the type of setting ``key`` (bench/run/parsing.py)."""
    return parsing.coerce(KEYS[key], KINDS[key], value)


def recipe_values(task: str, algorithm: str, compressor: str) -> dict[str, Any]:
    """The tuned settings of ``algorithm/compressor`` on ``task`` from recipes.yaml; one clear line
    naming what exists when there is no such entry."""
    recipes = parsing.load_yaml_text(RECIPES.read_text(), str(RECIPES)) or {}
    methods = recipes.get(task)
    if not methods:
        raise BenchError(f"recipe=tuned: no tuned settings for task {task!r}; tuned tasks: {', '.join(sorted(recipes))}"
                         " (tune one with the pipeline's tune: stage, see config/tuning.yaml)")
    method = f"{algorithm}/{identity.canonical_compressor(compressor, algorithm)}"  # recipes.yaml's spelling
    if method not in methods:
        raise BenchError(f"recipe=tuned: no tuned settings for {method} on {task}; tuned: {', '.join(sorted(methods))}")
    return dict(methods[method])


def check_keys(values: dict[str, Any], where: str) -> None:
    """One line naming ``where`` and the first key of ``values`` that is not a setting (nor a knob's shortcut)."""
    _check_keys(values, where)


def _check_keys(values: dict[str, Any], where: str) -> None:
    known = {**KEYS, **shortcuts()}
    unknown = sorted((k for k in values if k not in known), key=str)
    if unknown:
        raise BenchError(f"unknown setting {unknown[0]!r} in {where}; known: {', '.join(known)}")


def tunable_words() -> list[str]:
    """What a study's ``tune.grid`` may search: the run settings declared tunable (lr, momentum, weight decay) and
    every knob a registered method declares tunable, by its run-level word."""
    knobs = [name for name, f in shortcuts().items() if f.metadata.get("tune")]
    return [name for name, f in KEYS.items() if f.metadata.get("tune")] + sorted(knobs)


def check_tune_grid(grid: dict[str, Any]) -> None:
    """One line for a grid key that names nothing tunable or a value outside its knob's range."""
    words = tunable_words()
    named = shortcuts()
    for key, values in grid.items():
        if key not in words:
            raise BenchError(f"tune.grid: {key!r} is not a tunable knob; tunable: {', '.join(words)}")
        for value in values:
            try:
                if key in named:
                    named[key].metadata["read"](key, value)
                else:
                    resolve({}, {}, {key: value})
            except BenchError as err:
                raise BenchError(f"tune.grid: {err}") from None


def check_method_grid(name: str, grid: dict[str, Any]) -> None:
    """One line for a method's own grid (``tune.methods.NAME``) that names no registered method or variant, or a
    knob the method does not declare tunable, or a value outside the knob's range."""
    from ..algorithms import ALGORITHMS

    method = name.split("+")[0]  # a variant is named METHOD+WHAT (choco+adagossip)
    if method not in ALGORITHMS:
        raise BenchError(f"tune.methods: {name!r} is not a method; known: {', '.join(ALGORITHMS.names())}")
    own = [f.name for f in fields(ALGORITHMS.get(method).Options) if f.metadata.get("tune")]
    for key in grid:
        if key not in own and key not in KEYS:
            raise BenchError(f"tune.methods.{name}: {key!r} is not a knob {method} tunes; it tunes: "
                             f"{', '.join(own) or 'none of its own'}")
    check_tune_grid(grid)


def _knobs_inside(values: dict[str, Any]) -> dict[str, Any]:
    """One layer's values with each knob's shortcut word moved into ``algorithm_options`` (within the layer the
    later of ``gamma: …`` and ``algorithm_options: {gamma: …}`` wins)."""
    named = shortcuts()
    if not any(k in named for k in values) and ALIAS not in values:
        return values
    out: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for key, value in values.items():
        if key in named:
            options[key] = value
        elif key == ALIAS:
            options.update(_coerce(ALIAS, value))
        else:
            out[key] = value
    out[ALIAS] = options
    return out


def _read_knobs(options: dict[str, Any]) -> dict[str, Any]:
    """The shortcut knobs of ``options`` read by their own field's reader (γ as a float or auto, rounds as an
    int): one form per value, so a run's identity does not depend on how it was spelled."""
    named = shortcuts()
    return {k: named[k].metadata["read"](k, v) if k in named else v for k, v in options.items()}


def resolve(file_values: dict[str, Any], flag_values: dict[str, Any], set_values: dict[str, Any]) -> RunConfig:
    merged: dict[str, Any] = {}
    for values, where in ((file_values, "the config file"), (flag_values, "the flags"), (set_values, "--set")):
        _check_keys(values, where)
        for key, value in _knobs_inside(values).items():
            if key in parsing.GROUPS:
                value = _coerce(key, value)  # a mapping, before it is merged with another
            if key in parsing.GROUPS and key in merged:
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    recipe = str(merged.get("recipe", KEYS["recipe"].default))
    if recipe not in ("none", "tuned"):
        raise BenchError(f"recipe={recipe!r}; allowed: none, tuned")
    if recipe == "tuned":  # beneath everything given explicitly
        base = {k: merged.get(k, KEYS[k].default) for k in ("task", "algorithm", "compressor")}
        tuned = _knobs_inside(recipe_values(**base))
        options = {**tuned.get(ALIAS, {}), **merged.get(ALIAS, {})}
        merged = {**tuned, **merged, **({ALIAS: options} if options else {})}
    if ALIAS in merged:
        merged[ALIAS] = _read_knobs(merged[ALIAS])
    if "nesterov" not in merged and "momentum" in merged and _coerce("momentum", merged["momentum"]) == 0:
        merged["nesterov"] = False  # momentum 0 asks for plain SGD: Nesterov's look-ahead needs momentum
    cfg = identity.canonical(RunConfig(**{k: _coerce(k, v) for k, v in merged.items()}))
    validate(cfg)
    return cfg


def validate(cfg: RunConfig) -> None:
    """Range checks of single settings; names are checked where they are looked up, and the settings against
    each other (the method's options, faults, graph, backend, ...) by bench/run/resolved.py."""
    for f in fields(cfg):  # NaN passes every `not (x < 0)` and inf overflows step counts: refuse both first
        value = getattr(cfg, f.name)
        if any(isinstance(v, float) and not math.isfinite(v) for v in (value if f.name == "milestones" else [value])):
            if f.name == "milestones":
                raise BenchError(f"milestones={list(value)} must be finite numbers (epochs)")
            raise BenchError(f"{f.name}={value} must be a finite number")
    checks = [
        (cfg.nodes >= 1, f"nodes={cfg.nodes} must be >= 1"),
        (cfg.nodes <= MAX_NODES, f"nodes={cfg.nodes} must be <= {MAX_NODES} (W is a dense n x n matrix)"),
        (0 <= cfg.seed <= MAX_SEED, f"seed={cfg.seed} must be >= 0 and <= {MAX_SEED}"),
        (cfg.epochs > 0, f"epochs={cfg.epochs} must be > 0"),
        (cfg.lr >= 0, f"lr={cfg.lr} must be >= 0 (a negative learning rate climbs the loss)"),
        (cfg.batch_size >= 1, f"batch_size={cfg.batch_size} must be >= 1"),
        (not cfg.nesterov or cfg.momentum > 0, "nesterov=true needs momentum > 0 (or set nesterov=false)"),
        (0 <= cfg.val_fraction < 1, f"val_fraction={cfg.val_fraction} must be in [0, 1)"),
        (cfg.lr_schedule in ("constant", "warmup-multistep", "exp"),
         f"lr_schedule={cfg.lr_schedule!r}; allowed: constant, warmup-multistep, exp"),
        (cfg.lr_decay > 0, f"lr_decay={cfg.lr_decay} must be > 0"),
        (cfg.warmup_epochs >= 0, f"warmup_epochs={cfg.warmup_epochs} must be >= 0"),
        (cfg.eval_every > 0, f"eval_every={cfg.eval_every} must be > 0"),
        (cfg.checkpoint_every > 0, f"checkpoint_every={cfg.checkpoint_every} must be > 0"),
        (cfg.eval_local_workers == "all" or cfg.eval_local_workers >= 0,
         f"eval_local_workers={cfg.eval_local_workers} must be 'all' or a count >= 0"),
        (cfg.grad_clip is None or cfg.grad_clip > 0, f"grad_clip={cfg.grad_clip} must be > 0"),
        (cfg.stop_at is None or cfg.stop_at > 0, f"stop_at={cfg.stop_at} must be > 0 (epochs to train before pausing)"),
        (cfg.divergence_loss > 0, f"divergence_loss={cfg.divergence_loss} must be > 0 (a training loss above it "
                                  "marks the run diverged)"),
        (is_device(cfg.device), f"device={cfg.device!r}; allowed: {DEVICES}"),
        (cfg.compute_time == "measured" or float(cfg.compute_time) >= 0,
         f"compute_time={cfg.compute_time!r} must be 'measured' or seconds >= 0"),
    ]
    for ok, message in checks:
        if not ok:
            raise BenchError(message)
    if cfg.backend not in ("sim", "dist"):
        raise BenchError(f"backend={cfg.backend!r}; allowed: sim, dist")
    if cfg.dist_timeout <= 0:
        raise BenchError(f"dist_timeout={cfg.dist_timeout} must be > 0")
    if _peak_lr_log10(cfg) > math.log10(FLOAT32_MAX):  # torch refused such a step with a traceback mid-run
        grows = f" (x lr_decay={cfg.lr_decay:g} over the {cfg.lr_schedule} schedule)" if cfg.lr_decay > 1 else ""
        raise BenchError(f"lr={cfg.lr:g}{grows} exceeds {FLOAT32_MAX:.4g}, the largest step float32 parameters take")


FLOAT32_MAX = 3.4028234663852886e38


def _peak_lr_log10(cfg: RunConfig) -> float:
    """log10 of the largest learning rate of the run's schedule (the peak, or the last under a growing one)."""
    if cfg.lr == 0:
        return -math.inf
    rises = 0.0
    if cfg.lr_decay > 1 and cfg.lr_schedule == "exp":
        rises = float(cfg.epochs)
    elif cfg.lr_decay > 1 and cfg.lr_schedule == "warmup-multistep":
        rises = sum(1 for m in cfg.milestones if m <= cfg.epochs)
    return math.log10(cfg.lr) + rises * math.log10(cfg.lr_decay)
