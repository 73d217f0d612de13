"""A study's grid expanded into cells, runs, tuning trials and the jobs that train them.

The Snakemake rules (workflow/rules/common.smk) and `bench plan` both read a study through this
class, so the jobs the plan times are the jobs the pipeline submits.
"""
from __future__ import annotations

import itertools
import json
import math
import re
import shlex
import sys
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import yaml

from ..errors import BenchError
from ..yamlio import load_yaml
from . import scale as scales
from . import size as sizes
from .names import MAX_STUDY, cell_name, collision, safe, trial_name  # safe: bench.pipeline's too

# The keys of a block: its grid's axes, then any run setting except those the study owns elsewhere (a block
# asking for one would otherwise be silently rewritten, and its cells merged or renamed).
BLOCK_AXES = ("method", "topology", "nodes")
NOT_IN_BLOCKS = {
    "task": "a study has one task, its `task:` ({task!r}); another task is another study",
    "seed": "seeds are the study's: every cell runs each of its `seeds:` ({seeds})",
    "algorithm": "a block names it in `method:` (algorithm/compressor)",
    "compressor": "a block names it in `method:` (algorithm/compressor)",
    "quiet": "the pipeline decides it: each job's log gets its progress lines",
}


SPECS = ("compressor", "topology", "data", "network")  # settings whose spelling the run settles (bench/run/identity.py)


def expand_block(block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """One (cell name, settings) per combination of the block's lists; `method` is `algorithm/compressor`."""
    keys = sorted(block)
    for values in itertools.product(*(block[k] if isinstance(block[k], list) else [block[k]] for k in keys)):
        settings = dict(zip(keys, values))
        algorithm, _, compressor = settings.pop("method").partition("/")
        settings.update(algorithm=algorithm, compressor=compressor or "none")
        yield cell_name(settings), settings


def set_value(value: Any) -> str:
    """``value`` as `bench run --set key=VALUE` reads it back (VALUE is parsed as YAML): plainly written when
    that gives the value back (lr=0.1, milestones=[150,225]), as YAML otherwise (data_root='0.10')."""
    if isinstance(value, tuple):
        value = list(value)
    text = "[" + ",".join(str(v) for v in value) + "]" if isinstance(value, list) else str(value)
    try:
        if load_yaml(text, "a value") == value:
            return text
    except BenchError:
        pass
    return yaml.safe_dump(value, default_flow_style=True, width=float("inf")).removesuffix("...\n").strip()


def _searched_by(algorithm: str, compressor: str, key: str, options: dict | None = None) -> bool:
    """Whether a tuning grid's ``key`` is searched for a cell of ``algorithm`` with ``compressor``: a run setting
    always; a knob of the algorithm's when its class says tuning it changes something (γ under compression)."""
    from ..algorithms import ALGORITHMS
    from ..run.config import KEYS

    return key in KEYS or key in ALGORITHMS.get(algorithm).tunable(compressor, options)


@dataclass(frozen=True, eq=False)  # hashed by identity: the runs hold dicts
class Job:
    """One job the pipeline submits: a rule, its wildcard value, and the `bench run`s it makes in turn."""

    rule: str  # run | run_cell | tune_cell
    name: str  # the wildcard value: the run's name, or the cell's for grouped seeds and tuning
    cell: str
    runs: tuple[dict[str, Any], ...]  # each run's own settings (cell, seed, trial), defaults not merged in


_STUDY_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_STUDY}}}")


class Study:
    """A validated study config (the schema's defaults filled in) at its scale."""

    def __init__(self, config: dict[str, Any]):
        self.name = config["study"]
        if not (isinstance(self.name, str) and _STUDY_NAME.fullmatch(self.name)):
            raise BenchError(f"study name {self.name!r} must be 1 to {MAX_STUDY} letters, digits, _ or - "
                             "(it names the folders results/<study>/ and logs/<study>/)")
        self.scale = str(config.get("scale", "cpu"))
        try:
            self._expand(config)
        except BenchError as err:
            raise BenchError(f"study {self.name!r} at scale={self.scale}: {err}") from None

    def _expand(self, config: dict[str, Any]) -> None:
        self.has_scale_block = self.scale == "cpu" or bool(config.get(self.scale))
        sized = scales.sized(config, self.scale)
        self.size = sizes.count(sized)  # before expanding: a grid of 10^6 cells is refused in no time
        warning = sizes.check(self.size, sizes.allows_large(config))
        if warning:
            print(f"warning: study {self.name!r} at scale={self.scale} spells out {warning}", file=sys.stderr,
                  flush=True)
        self.task = sized.get("task")
        self.defaults = dict(sized.get("defaults", {}))
        self.seeds = list(sized.get("seeds", [0]))
        self.group_seeds = bool(sized.get("group_seeds", False))
        self.tune = dict(sized.get("tune") or {})
        self.tune_grid = {key: list(values) for key, values in self.tune.get("grid", {}).items()}
        # a method's own grid (tune.methods: {name or variant: {knob: values}}), added to the shared one for its cells
        self.method_grids = {name: {key: list(values) for key, values in grid.items()}
                             for name, grid in (self.tune.get("methods") or {}).items()}
        from ..run.config import check_method_grid, check_tune_grid

        check_tune_grid(self.tune_grid)
        for name, grid in self.method_grids.items():
            check_method_grid(name, grid)
        if self.task is not None:
            scales.check_task_options(self.task, self.defaults.get("task_options", {}),
                                      scales.options_source(config, self.scale))
        from ..run.config import check_keys
        from .check import Checks  # what `bench run` checks before it writes anything

        check_keys({k: v for k, v in self.defaults.items() if k != "task_options"}, "the study's defaults")
        checks = Checks(seed=self.seeds[0])
        self.cells: dict[str, dict[str, Any]] = {}
        self.configs: dict[str, Any] = {}  # cell -> its resolved RunConfig (at seed 0): what the figures read
        seen: set[str] = set()  # the trainings (their resolved settings) of the cells so far
        block_of: dict[str, str] = {}  # a cell -> the block it came from
        for name, block in sized.get("blocks", {}).items():
            self._check_block_keys(name, block)
            listed: dict[str, str] = {}  # a training -> the cell of this block that lists it, as spelt
            for spelt, settings in expand_block(block):
                try:
                    if "task_options" in settings:
                        scales.check_task_options(self.task, settings["task_options"], f"blocks.{name}.task_options")
                    cfg = self.run_config({**settings, "seed": 0})
                    checks.run(cfg)
                except BenchError as err:
                    raise BenchError(f"block {name!r}, cell {spelt}: {err}") from None
                # its specs as the run spells them (top:0.10 is top:0.1): one training, one cell name
                settings = {**settings, **{k: getattr(cfg, k) for k in SPECS if k in settings}}
                cell = cell_name(settings)
                key = json.dumps(cfg.to_dict(), sort_keys=True, default=str)
                if key in listed:  # one block lists it twice, however spelt: a mistake
                    raise BenchError(f"block {name!r}, cells {listed[key]} and {spelt} are one training "
                                     f"(run {cfg.run_id()}); list it once")
                listed[key] = spelt
                if key in seen:  # blocks are slices of the study that may overlap (smoke's figures'): one cell
                    continue
                if cell in self.cells:  # names are one per training by construction (names.py): a last guard
                    raise collision("cells", cell, f"block {block_of[cell]!r}: {self.cells[cell]}",
                                    f"block {name!r}: {settings}")
                seen.add(key)
                block_of[cell] = name
                self.cells[cell], self.configs[cell] = settings, cfg
        self.consensus = dict(sized.get("consensus") or {})
        if self.consensus:
            checks.consensus(self.consensus)
        self.runs = {f"{cell}_s{seed}": {**settings, "seed": seed}
                     for cell, settings in self.cells.items() for seed in self.seeds}
        self.run_cell = {f"{cell}_s{seed}": cell for cell in self.cells for seed in self.seeds}
        # cell -> the knobs it searches, for the cells that search any (none without a grid)
        self.tuned_cells = {cell: keys for cell, settings in self.cells.items() if (keys := self.tuned_keys(settings))}

    def _check_block_keys(self, name: str, block: dict[str, Any]) -> None:
        """One line naming the block and the key it may not set (the run settings are bench's own)."""
        from ..run.config import KEYS

        allowed = [*BLOCK_AXES, *(k for k in KEYS if k not in NOT_IN_BLOCKS and k not in BLOCK_AXES)]
        for key in sorted(block):
            if key in NOT_IN_BLOCKS:
                why = NOT_IN_BLOCKS[key].format(task=self.task, seeds=", ".join(map(str, self.seeds)))
                raise BenchError(f"block {name!r} sets {key}: {why}")
            if key not in allowed:
                raise BenchError(f"block {name!r} has unknown key {key!r}; allowed: {', '.join(allowed)}")

    @property
    def metrics(self) -> tuple[str, ...]:
        """What each evaluation of the study's task records (none without a task)."""
        from ..tasks import TASKS

        return TASKS.get(self.task).metrics if self.task is not None else ()

    # -- settings of one run ---------------------------------------------------------------
    def merged(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The study's defaults under a run's own settings (task options merged key by key)."""
        out = {**self.defaults, **settings}
        if "task_options" in settings and "task_options" in self.defaults:
            out["task_options"] = {**self.defaults["task_options"], **settings["task_options"]}
        return out

    def run_config(self, settings: dict[str, Any]):
        """The resolved `RunConfig` of a run (bench's own defaults filled in and validated)."""
        from ..run.config import resolve

        return resolve({}, {}, {**self.merged(settings), "task": self.task})

    # -- tuning ------------------------------------------------------------------------------
    def tuned_keys(self, settings: dict[str, Any]) -> list[str]:
        """The grid's knobs a cell searches: those its block does not fix by hand, and an algorithm's knob only
        where its class tunes it (γ for a method with a consensus step under compression)."""
        keys = []
        for key in sorted(self.grid_for(settings)):
            if key in settings:
                continue
            options = self.merged(settings).get("algorithm_options")
            if not _searched_by(settings["algorithm"], settings["compressor"], key, options):
                continue
            keys.append(key)
        return keys

    def grid_for(self, settings: dict[str, Any]) -> dict[str, list]:
        """The grid a cell searches from: the shared ``tune.grid`` with its method's own (``tune.methods``, by the
        variant's name, e.g. choco+adagossip, or else the method's) on top."""
        if not self.method_grids:
            return self.tune_grid
        from ..algorithms import ALGORITHMS, parse_options

        name = settings["algorithm"]
        own = self.method_grids.get(name, {})
        options = self.merged(settings).get("algorithm_options") or {}
        method = ALGORITHMS.get(name)
        variant = method.variant(parse_options(method, options)) if options else None
        if variant is not None and variant[0] in self.method_grids:
            own = self.method_grids[variant[0]]
        return {**self.tune_grid, **own}

    def rungs(self, settings: dict[str, Any]) -> list[float]:
        """Epochs of each rung of successive halving: the first a share of the schedule (``tune.budget``,
        0.25 by default, or ``tune.epochs``), then half of it when the first is shorter, then all of it;
        or ``tune.rungs`` as shares of the schedule."""
        epochs = float(self.merged(settings).get("epochs", 10))
        if "rungs" in self.tune:
            shares = sorted(float(f) for f in self.tune["rungs"])
            return sorted({min(epochs, f * epochs) for f in shares} | {epochs})
        first = float(self.tune["epochs"]) if "epochs" in self.tune else max(epochs * self.tune.get("budget", 0.25), 0.5)
        first = min(first, epochs)
        return [first, epochs / 2, epochs] if first < epochs / 2 else sorted({first, epochs})

    def trials(self, cell: str) -> dict[str, dict[str, Any]]:
        """name -> settings of every tuning trial of ``cell``: grid point x tuning seed, each the cell's full
        schedule on the training set minus a validation split (the rungs pause it part-way)."""
        settings = self.cells[cell]
        keys = self.tuned_keys(settings)
        out = {}
        grid = self.grid_for(settings)
        for values in itertools.product(*(grid[k] for k in keys)):
            point = dict(zip(keys, values))
            for seed in self.tune.get("seeds", [0]):
                out[trial_name(point, seed)] = {**settings, **point, "seed": seed,
                                                "val_fraction": self.tune.get("val_fraction", 0.1),
                                                "eval_local_workers": 0}
        return out

    def halving_plan(self, cell: str, out: str) -> dict[str, Any]:
        """What `python -m bench.pipeline.halving` needs to tune ``cell`` into ``out``."""
        return {"cell": cell, "dir": out, "rungs": self.rungs(self.cells[cell]),
                "keep": float(self.tune.get("keep", 1 / 3)), "extend": bool(self.tune.get("extend", True)),
                "trials": {name: {"command": self.launcher(t), "settings": self.job_settings(t)}
                           for name, t in self.trials(cell).items()}}

    def tuning_work(self, cell: str) -> tuple[dict[str, Any], ...]:
        """The `bench run`s a cell's halving makes, each as the settings of a run of the same cost: every
        trial to the first rung, then a third of the points (all their seeds) each rung's increment; when
        the grid may be extended at its edge, the most that can add: one point (all its seeds) on the full
        schedule per knob of three or more values (bench/pipeline/halving.py). `bench plan` times these, and
        the pipeline's runtime without a plan counts them."""
        trials = list(self.trials(cell).values())
        seeds = max(1, len(self.tune.get("seeds", [0])))
        keep = float(self.tune.get("keep", 1 / 3))
        rungs, points, work, done = self.rungs(self.cells[cell]), len(trials) // seeds, [], 0.0
        for r, epochs in enumerate(rungs):
            if r:
                points = max(1, math.ceil(points * keep))
            work += [{**t, "stop_at": epochs - done} for t in trials[: points * seeds]]
            done = epochs
        if self.tune.get("extend", True):
            grid = self.grid_for(self.cells[cell])
            edges = sum(len(grid.get(k, ())) >= 3 for k in self.tuned_cells[cell])
            work += [dict(t) for t in trials[:seeds]] * edges
        return tuple(work)

    # -- command lines -----------------------------------------------------------------------
    def processes(self, settings: dict[str, Any]) -> int:
        merged = self.merged(settings)
        return int(merged.get("procs") or merged["nodes"]) if merged.get("backend") == "dist" else 1

    def launcher(self, settings: dict[str, Any]) -> list[str]:
        """`python -m bench run`, or torchrun with one process per worker (or `procs`) for backend: dist."""
        if self.merged(settings).get("backend") != "dist":
            return ["python", "-m", "bench", "run"]
        # one thread per rank: Snakemake sets OMP_NUM_THREADS to the job's threads (= its processes), which
        # torchrun keeps, so N ranks would each run N threads on the job's N CPUs
        return ["env", "OMP_NUM_THREADS=1", "python", "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", str(self.processes(settings)), "-m", "bench", "run"]

    def job_settings(self, settings: dict[str, Any], tuned: Sequence[str] = ()) -> dict[str, Any]:
        """What a job hands `bench run --settings`: the values of the validated `RunConfig` for the settings
        the run is given (task, defaults, its own), so the job checks nothing the DAG did not. The ``tuned``
        knobs are left out (they come from the cell's tuned YAML, `--config`), and with them whatever
        bench derives from them (nesterov after momentum 0)."""
        from ..run.settings_file import config_of, given

        values = {k: v for k, v in {**self.merged(settings), "task": self.task}.items() if k not in tuned}
        return given(config_of(values), values)

    def run_args(self, settings: dict[str, Any]) -> list[str]:
        """The same settings as `bench run` flags and `--set` words, which every version of `bench run`
        reads (`bench track` runs older checkouts with them); the pipeline's jobs get ``job_settings``."""
        merged = dict(self.merged(settings))
        words = ["--task", str(self.task)]
        for key in ("algorithm", "compressor", "topology", "nodes", "seed", "epochs"):
            if key in merged:
                words += [f"--{key}", str(merged.pop(key))]
        for key, value in sorted(merged.items()):
            if isinstance(value, dict):  # task_options or algorithm_options: one --set per option
                for option, option_value in sorted(value.items()):
                    words += ["--set", f"{key}.{option}={set_value(option_value)}"]
            else:
                words += ["--set", f"{key}={set_value(value)}"]
        return words

    def command(self, settings: dict[str, Any], out: str, tuned: Sequence[str] = (),
                tuned_config: str | None = None) -> str:
        """The shell line of one run, every word quoted (a study's values never reach the shell as code): its
        settings as one JSON value (``job_settings``). ``tuned_config``: the cell's tuned YAML, read with
        `--config` (a re-tuned cell's earlier final runs hold other settings: they are set aside to
        runs/.stale/, not refused)."""
        from ..run.settings_file import dumps

        words = [*self.launcher(settings), "--settings", dumps(self.job_settings(settings, tuned))]
        if tuned_config is not None:
            words += ["--config", tuned_config, "--replace-stale"]
        # not --quiet: a job's log is its progress (one plain line per evaluation off a terminal)
        return shlex.join([*words, "--out", out])

    # -- jobs ----------------------------------------------------------------------------------
    def jobs(self) -> list[Job]:
        """Every training job the pipeline submits: the tuning of each tuned cell (all its trials in
        one job), then the final runs (one job per run, or per cell with grouped seeds)."""
        out = [Job("tune_cell", cell, cell, self.tuning_work(cell)) for cell in self.tuned_cells]
        if self.group_seeds:
            out += [Job("run_cell", cell, cell, tuple(self.runs[f"{cell}_s{seed}"] for seed in self.seeds))
                    for cell in self.cells]
        else:
            out += [Job("run", run, self.run_cell[run], (settings,)) for run, settings in self.runs.items()]
        return out
