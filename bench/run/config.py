"""The resolved settings of one training run: defaults ← YAML file ← flags ← ``--set key=value``.

Every key is a field of ``RunConfig`` (commented once, here); an unknown key is one clear line
listing the known ones. ``task_options.KEY=VALUE`` reaches the task (model and data sizes);
``algorithm_options.KEY=VALUE`` (or a mapping ``algorithm_options: {KEY: VALUE}``) reaches the algorithm's
options: a KEY that is also a setting of its own (gamma, order) is that setting, any other is kept in
``algorithm_options`` and checked by the algorithm's class (e.g. PowerSGD's rank).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .. import yamlio
from ..errors import BenchError
from ..limits import DEVICES, MAX_NODES, MAX_SEED, is_device


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
    lr: float = 0.1  # learning rate η (peak value under warm-up)
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
    momentum: float = 0.9  # μ of the shared local step; 0: plain SGD (and nesterov off unless set)
    nesterov: bool = True
    weight_decay: float = 1e-4  # not applied to BatchNorm parameters
    grad_clip: float | None = None  # clip each worker's gradient to this norm (the LSTM's 0.4)
    # Choco consensus step; auto: tuned on the consensus problem (cached)
    gamma: float | str = field(default="auto", metadata={"words": ("auto",)})
    gamma_tune_steps: int = 1000  # Choco-Gossip rounds per γ of the grid when gamma=auto
    order: str = "paper"  # choco/dpsgd: paper or the authors' code order
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
    # the algorithm's own knobs that are not settings above (e.g. rank=4), checked by its Options class
    algorithm_options: dict[str, Any] = field(
        default_factory=dict, metadata={"expects": "a mapping of option names to values, e.g. {rank: 4}"})
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
        """Hash of everything that changes the numbers (not quiet/device/paths of output)."""
        d = self.to_dict()
        for key in ("quiet", "stop_at"):  # how far to train now is not what the run is
            d.pop(key)
        for key, default in _LATER_KEYS.items():  # runs made before a key existed keep their id
            if d.get(key) == default:
                d.pop(key)
        if self.graph_digest is not None:  # file:PATH names a place; the run is on the edges it held
            d["graph_digest"] = self.graph_digest
        if ALGORITHM_REVISIONS.get(self.algorithm):  # the method's maths changed: earlier runs are not this one
            d["algorithm_revision"] = ALGORITHM_REVISIONS[self.algorithm]
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:10]

    @functools.cached_property
    def graph_digest(self) -> str | None:
        """Digest of the edges of a graph read from a file (None for built-in graphs), read once so
        that a run keeps one identity even if the file is edited while it trains."""
        from ..topology import graph_digest

        return graph_digest(self.topology, self.nodes, self.weights, self.seed)

    def run_id(self) -> str:
        return (f"{self.task}_{self.algorithm}_{self.compressor}_{self.topology}{self.nodes}_s{self.seed}"
                .replace(":", "").replace(",", "-").replace("/", "-") + f"_{self.fingerprint()}")


KEYS = {f.name: f for f in fields(RunConfig)}
# keys added after runs were first written, and the default that reproduces those runs
_LATER_KEYS = {"val_fraction": 0.0, "recipe": "none", "algorithm_options": {}, "faults": {}}
# a method whose update changed after runs of it were written: its runs get new ids, so a finished
# directory of the old maths is not taken for the new one (ecd 1: sparsifiers move only sent coordinates)
ALGORITHM_REVISIONS = {"ecd": 1}
RECIPES = Path(__file__).with_name("recipes.yaml")  # tuned settings per task and method (see its header)


def recipe_values(task: str, algorithm: str, compressor: str) -> dict[str, Any]:
    """The tuned settings of ``algorithm/compressor`` on ``task`` from recipes.yaml; one clear line
    naming what exists when there is no such entry."""
    recipes = _yaml(RECIPES.read_text(), str(RECIPES)) or {}
    methods = recipes.get(task)
    if not methods:
        raise BenchError(f"recipe=tuned: no tuned settings for task {task!r}; tuned tasks: {', '.join(sorted(recipes))}"
                         " (tune one with the pipeline's tune: stage, see config/tuning.yaml)")
    method = f"{algorithm}/{compressor}"
    if method not in methods:
        raise BenchError(f"recipe=tuned: no tuned settings for {method} on {task}; tuned: {', '.join(sorted(methods))}")
    return dict(methods[method])


NONE_WORDS = ("none", "null", "")  # what a None-able field reads as None (any case)


def _kinds(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """A field's annotation as (origin, accepted types): tuple/dict with their item types, else None
    and the members of the union (``float | None`` -> (None, (float, NoneType)))."""
    origin = typing.get_origin(hint)
    if origin in (tuple, dict):
        return origin, typing.get_args(hint)
    return None, typing.get_args(hint) if origin in (typing.Union, types.UnionType) else (hint,)


KINDS = {name: _kinds(hint) for name, hint in typing.get_type_hints(RunConfig).items() if name in KEYS}


def _coerce(key: str, value: Any) -> Any:
    """Values from YAML or ``--set`` into the field's type, as its annotation says; one line naming the
    key on failure. A None-able field takes none/null/'' as None; a number field that also takes ``str``
    takes only the words of its metadata; ``int | float`` keeps whole numbers ints (run ids stay)."""
    meta = KEYS[key].metadata
    origin, kinds = KINDS[key]
    if origin is tuple:
        return _sequence(key, value, kinds[0], meta.get("expects", "a list of numbers"))
    if origin is dict:
        return _mapping(key, value, meta.get("expects", "a mapping of names to values"))
    if type(None) in kinds and (value is None or (isinstance(value, str) and value.lower() in NONE_WORDS)):
        return None
    if isinstance(value, str) and value in meta.get("words", ()):
        return value
    try:
        if bool in kinds:
            return _boolean(key, value)
        if float in kinds:
            number = _number(key, value, float)
            return int(number) if int in kinds and number.is_integer() else number
        if int in kinds:
            return _number(key, value, int)
    except BenchError:
        if "expects" not in meta:
            raise
        raise BenchError(f"{key}={value!r} must be {meta['expects']}") from None
    return str(value)


def _sequence(key: str, value: Any, kind: type, expects: str) -> tuple:
    """A number, a list, or a comma/space separated string as a tuple of ``kind``."""
    if isinstance(value, (int, float)):
        value = [value]
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split()]
    try:
        return tuple(kind(v) for v in value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond float's range
        raise BenchError(f"{key}={value!r} must be {expects}") from None


def _mapping(key: str, value: Any, expects: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BenchError(f"{key}={value!r} must be {expects}")
    named = [k for k in value if not isinstance(k, str)]
    if named:
        raise BenchError(f"{key} key {named[0]!r} must be an option name (a string)")
    return dict(value)


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "1", "yes"):
        return True
    if str(value).lower() in ("false", "0", "no"):
        return False
    raise BenchError(f"{key}={value!r} must be true or false")


def _number(key: str, value: Any, kind):
    what = "an integer" if kind is int else "a number"
    if isinstance(value, bool):  # int(True) is 1: `batch_size=true` must not become a batch of one
        raise BenchError(f"{key}={value!r} must be {what}, not true/false")
    try:
        out = kind(value)
        if kind is int and isinstance(value, float) and value != out:
            raise ValueError
        return out
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        raise BenchError(f"{key}={value!r} must be {what}") from None


def check_keys(values: dict[str, Any], where: str) -> None:
    """One line naming ``where`` and the first key of ``values`` that is not a setting."""
    _check_keys(_flatten(values), where)


ALIAS = "algorithm_options"  # `algorithm_options: {gamma: 0.3}` / `--set algorithm_options.gamma=0.3` set gamma


def _alias_options(value: Any) -> dict[str, Any]:
    return _mapping(ALIAS, value, "a mapping of option names to values, e.g. {gamma: 0.3}")


def _flatten(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the keys of an ``algorithm_options`` mapping that are settings (gamma, order) spread
    into their place (later wins); the algorithm's other options stay in ``algorithm_options``."""
    if ALIAS not in values:
        return values
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key != ALIAS:
            out[key] = value
            continue
        options = _alias_options(value)
        own = {k: v for k, v in options.items() if k not in KEYS or k in (ALIAS, "task_options", "faults")}
        out.update({k: v for k, v in options.items() if k not in own})
        if own:
            out[ALIAS] = {**out.get(ALIAS, {}), **own}
    return out


def _check_keys(values: dict[str, Any], where: str) -> None:
    unknown = sorted((k for k in values if k not in KEYS), key=str)
    if unknown:
        raise BenchError(f"unknown setting {unknown[0]!r} in {where}; known: {', '.join(KEYS)}")


def _yaml(text: str, where: str) -> Any:
    """YAML ``text`` as plain data (bench/yamlio.py: no aliases, tags or deep nesting); one line naming ``where``."""
    return yamlio.load_yaml(text, where)


def load_yaml(path: str) -> dict[str, Any]:
    where = f"config file {path!r}"
    loaded = yamlio.read_yaml(path, where, "a YAML file of settings")
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise BenchError(f"{where} must hold a mapping of settings")
    named = [k for k in loaded if not isinstance(k, str)]
    if named:
        raise BenchError(f"{where} has the key {named[0]!r}; settings are names, e.g. lr or nodes")
    return loaded


def parse_sets(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key:
            raise BenchError(f"--set {item!r} is not key=value")
        shown = item if len(item) <= 60 else item[:57] + "..."
        value = _yaml(raw, f"--set {shown!r}") if raw else ""
        if key.startswith(ALIAS + "."):  # algorithm_options.gamma=0.3 is gamma=0.3; .rank=4 stays the algorithm's
            name = key.split(".", 1)[1]
            if name in KEYS and name not in (ALIAS, "task_options", "faults"):
                key = name
            else:
                options = out.setdefault(ALIAS, {})
                if not isinstance(options, dict):  # an earlier `--set algorithm_options=0`
                    _alias_options(options)
                options[name] = value
                continue
        if key == ALIAS:
            flat = _flatten({ALIAS: value})
            mine = flat.pop(ALIAS, {})
            out.update(flat)
            if mine:
                out[ALIAS] = {**(out.get(ALIAS) if isinstance(out.get(ALIAS), dict) else {}), **mine}
        elif key.startswith(("task_options.", "faults.")):
            group, name = key.split(".", 1)
            options = out.setdefault(group, {})
            if not isinstance(options, dict):  # an earlier `--set task_options=0`
                _coerce(group, options)
            options[name] = value
        else:
            out[key] = value
    return out


def resolve(file_values: dict[str, Any], flag_values: dict[str, Any], set_values: dict[str, Any]) -> RunConfig:
    merged: dict[str, Any] = {}
    for values, where in ((file_values, "the config file"), (flag_values, "the flags"), (set_values, "--set")):
        values = _flatten(values)
        _check_keys(values, where)
        for key, value in values.items():
            if key in ("task_options", ALIAS, "faults"):
                value = _coerce(key, value)  # a mapping, before it is merged with another
            if key in ("task_options", ALIAS, "faults") and key in merged:
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    recipe = str(merged.get("recipe", KEYS["recipe"].default))
    if recipe not in ("none", "tuned"):
        raise BenchError(f"recipe={recipe!r}; allowed: none, tuned")
    if recipe == "tuned":  # beneath everything given explicitly
        base = {k: merged.get(k, KEYS[k].default) for k in ("task", "algorithm", "compressor")}
        merged = {**recipe_values(**base), **merged}
    if "nesterov" not in merged and "momentum" in merged and _coerce("momentum", merged["momentum"]) == 0:
        merged["nesterov"] = False  # momentum 0 asks for plain SGD: Nesterov's look-ahead needs momentum
    cfg = RunConfig(**{k: _coerce(k, v) for k, v in merged.items()})
    validate(cfg)
    return cfg


def validate(cfg: RunConfig) -> None:
    """Range checks that need no registry; names are checked where they are looked up."""
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
        (cfg.gamma_tune_steps >= 1, f"gamma_tune_steps={cfg.gamma_tune_steps} must be >= 1"),
        (cfg.checkpoint_every > 0, f"checkpoint_every={cfg.checkpoint_every} must be > 0"),
        (cfg.eval_local_workers == "all" or cfg.eval_local_workers >= 0,
         f"eval_local_workers={cfg.eval_local_workers} must be 'all' or a count >= 0"),
        (cfg.grad_clip is None or cfg.grad_clip > 0, f"grad_clip={cfg.grad_clip} must be > 0"),
        (cfg.stop_at is None or cfg.stop_at > 0, f"stop_at={cfg.stop_at} must be > 0 (epochs to train before pausing)"),
        (cfg.divergence_loss > 0, f"divergence_loss={cfg.divergence_loss} must be > 0 (a training loss above it "
                                  "marks the run diverged)"),
        (is_device(cfg.device), f"device={cfg.device!r}; allowed: {DEVICES}"),
        (cfg.order in ("paper", "code"), f"order={cfg.order!r}; allowed: paper, code"),
        (cfg.compute_time == "measured" or float(cfg.compute_time) >= 0,
         f"compute_time={cfg.compute_time!r} must be 'measured' or seconds >= 0"),
        (cfg.gamma == "auto" or 0 < float(cfg.gamma) <= 1, f"gamma={cfg.gamma!r} must be 'auto' or in (0, 1]"),
    ]
    for ok, message in checks:
        if not ok:
            raise BenchError(message)
    if cfg.backend not in ("sim", "dist"):
        raise BenchError(f"backend={cfg.backend!r}; allowed: sim, dist")
    from ..catalog.algorithms import METHODS
    from ..faults import parse_faults

    if cfg.algorithm in METHODS.names():  # before anything is written or launched
        METHODS.get(cfg.algorithm).check_backend(cfg.backend)
    faults = parse_faults(cfg.faults, cfg.nodes)
    if faults.loses:  # before anything is written: a method without a rule for lost messages is refused
        METHODS.get(cfg.algorithm).check_faults(faults)

    if cfg.procs is not None and (cfg.procs < 1 or cfg.nodes % cfg.procs):
        raise BenchError(f"procs={cfg.procs} must divide nodes={cfg.nodes}")
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
