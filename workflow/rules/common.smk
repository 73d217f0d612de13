# Target logic of the pipeline, in one place: validate the study, expand its blocks into runs,
# and name every output. Rules in the other files stay thin.
import itertools
import json
import re

from snakemake.utils import validate

validate(config, "../schemas/config.schema.yaml")

STUDY = config["study"]
OUT = f"results/{STUDY}"
SCALE = config.get("scale", "cpu")
# `--config scale=gpu` swaps in the study's paper-sized task and settings
_SIZED = {**config.get(SCALE, {})} if SCALE != "cpu" else {}
TASK = _SIZED.get("task", config.get("task"))
DEFAULTS = {**config.get("defaults", {}), **_SIZED.get("defaults", {})}
SEEDS = config.get("seeds", [0])
# Resources per task for cluster profiles (memory MB, runtime minutes, GPUs).
TASK_RESOURCES = {
    "cifar10-resnet20": dict(mem_mb=16000, runtime=24 * 60, gpus=1),
    "cifar10-resnet8": dict(mem_mb=16000, runtime=12 * 60, gpus=1),
    "wikitext2-lstm": dict(mem_mb=32000, runtime=24 * 60, gpus=1),
    "imagenet-resnet50": dict(mem_mb=64000, runtime=72 * 60, gpus=1),
}
DEFAULT_RESOURCES = dict(mem_mb=4000, runtime=60, gpus=0)


def safe(text):
    """A file-name-safe form of a spec: top:0.01 -> top0.01, rand:0.01,unbiased=true -> rand0.01_unbiased=true."""
    return re.sub(r"[^A-Za-z0-9.=_+-]", "", str(text).replace(",", "_"))


def expand_block(name, block):
    """One run per combination of the block's lists; `method` is `algorithm/compressor`."""
    keys = sorted(block)
    for values in itertools.product(*(block[k] if isinstance(block[k], list) else [block[k]] for k in keys)):
        settings = dict(zip(keys, values))
        algorithm, _, compressor = settings.pop("method").partition("/")
        settings.update(algorithm=algorithm, compressor=compressor or "none")
        extras = "_".join(f"{safe(k)}={safe(v)}" for k, v in sorted(settings.items())
                          if k not in ("algorithm", "compressor", "topology", "nodes"))
        cell = f"{algorithm}-{safe(settings['compressor'])}_{safe(settings['topology'])}{settings['nodes']}"
        yield (f"{cell}_{extras}" if extras else cell), settings


def canonical(settings):
    """The run's full resolved settings (bench's own defaults filled in and validated), as a key:
    two blocks asking for the same training, however they spell it, get one cell."""
    from bench.errors import BenchError
    from bench.run.config import resolve

    try:
        cfg = resolve({}, {}, {**DEFAULTS, **settings, "task": TASK, "seed": 0})
    except BenchError as err:
        raise ValueError(f"study {STUDY!r}: {err}") from None
    return json.dumps(cfg.to_dict(), sort_keys=True, default=str)


CELLS, _SEEN = {}, {}
for _name, _block in config.get("blocks", {}).items():
    for _cell, _settings in expand_block(_name, _block):
        _key = canonical(_settings)
        if _key not in _SEEN:
            _SEEN[_key] = _cell
            CELLS[_cell] = _settings
RUNS = {f"{cell}_s{seed}": {**settings, "seed": seed} for cell, settings in CELLS.items() for seed in SEEDS}
RUN_CELL = {f"{cell}_s{seed}": cell for cell in CELLS for seed in SEEDS}

# -- tuning: a grid per cell on a validation split, its winner feeds the cell's final runs ----------
TUNE = _SIZED.get("tune") or config.get("tune") or {}  # the paper-sized version may bring its own grid
TUNE_GRID = {key: list(values) for key, values in TUNE.get("grid", {}).items()}


def tuned_keys(settings):
    """The grid's knobs this cell searches: those its block does not fix by hand, and γ only for
    Choco with a compressor (exact gossip needs none)."""
    keys = []
    for key in sorted(TUNE_GRID):
        if key in settings:
            continue
        if key == "gamma" and (settings["algorithm"] != "choco" or settings["compressor"] == "none"):
            continue
        keys.append(key)
    return keys


def trial_epochs(settings):
    epochs = float({**DEFAULTS, **settings}.get("epochs", 10))
    return TUNE["epochs"] if "epochs" in TUNE else max(epochs * TUNE.get("budget", 0.25), 0.5)


def trials(cell):
    """name -> settings of every tuning trial of ``cell``: grid point x tuning seed."""
    settings = CELLS[cell]
    keys = tuned_keys(settings)
    out = {}
    for values in itertools.product(*(TUNE_GRID[k] for k in keys)):
        point = dict(zip(keys, values))
        name = "_".join(f"{k}={safe(v)}" for k, v in point.items()) or "default"
        for seed in TUNE.get("seeds", [0]):
            out[f"{name}_s{seed}"] = {**settings, **point, "seed": seed, "epochs": trial_epochs(settings),
                                      "val_fraction": TUNE.get("val_fraction", 0.1), "eval_local_workers": 0}
    return out


# cell -> the knobs it searches, for the cells that search any (tuned_keys is empty without a grid)
TUNED_CELLS = {cell: keys for cell, settings in CELLS.items() if (keys := tuned_keys(settings))}


def tune_marker(cell):
    return f"{OUT}/.tune/{cell}.done"


def tuned_values(cell):
    """The YAML of a tuned cell's chosen values (empty for a cell that is not tuned)."""
    return [f"{OUT}/tuned/{cell}.yaml"] if cell in TUNED_CELLS else []


def tuned_flag(cell):
    """`--config <the cell's tuned values>` for a tuned cell, nothing otherwise. A re-tuned cell's
    earlier final runs hold other settings: they are set aside (runs/.stale/), not refused."""
    return " ".join(f"--config {path} --replace-stale" for path in tuned_values(cell))


def launcher(settings):
    """`python -m bench run`, or torchrun with one process per worker (or `procs`) for backend: dist."""
    merged = {**DEFAULTS, **settings}
    if merged.get("backend") != "dist":
        return "python -m bench run"
    return f"python -m torch.distributed.run --standalone --nproc-per-node {processes(settings)} -m bench run"


def processes(settings):
    merged = {**DEFAULTS, **settings}
    return int(merged.get("procs") or merged["nodes"]) if merged.get("backend") == "dist" else 1


def run_args(settings, tuned=()):
    """The `bench run` command line of one run: task, defaults, then the run's own settings. The
    ``tuned`` knobs are left out: they come from the cell's tuned YAML (`--config`)."""
    merged = {k: v for k, v in {**DEFAULTS, **settings}.items() if k not in tuned}
    flags = [f"--task {TASK}"]
    for key in ("algorithm", "compressor", "topology", "nodes", "seed", "epochs"):
        if key in merged:
            flags.append(f"--{key} '{merged.pop(key)}'")
    for key, value in sorted(merged.items()):
        if isinstance(value, dict):
            flags += [f"--set 'task_options.{k}={_yaml(v)}'" for k, v in sorted(value.items())]
        else:
            flags.append(f"--set '{key}={_yaml(value)}'")
    return " ".join(flags)


def _yaml(value):
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(str(v) for v in value) + "]"
    return value


def resources_of(settings, key):
    return TASK_RESOURCES.get(TASK, DEFAULT_RESOURCES)[key]


RUN_RESOURCES = dict(
    mem_mb=lambda wc: resources_of(None, "mem_mb"),
    runtime=lambda wc: resources_of(None, "runtime"),
    gpu=lambda wc: resources_of(None, "gpus"),
)


CONSENSUS_METHODS = {safe(m): m for m in config.get("consensus", {}).get("methods", [])}


def consensus_traces():
    return [f"{OUT}/consensus/{key}/traces.csv" for key in CONSENSUS_METHODS]


def run_outputs(run):
    return [f"{OUT}/runs/{run}/run.json", f"{OUT}/runs/{run}/metrics.parquet"]


def cell_marker(cell):
    return f"{OUT}/runs/.cells/{cell}.done"


def run_targets():
    """What the analysis waits for: every run's files, or one marker per cell when seeds are grouped."""
    if config.get("group_seeds", False):
        return [cell_marker(cell) for cell in CELLS]
    return [path for run in RUNS for path in run_outputs(run)]


FIGURES = config.get("figures", [])


def all_targets():
    targets = []
    if TUNED_CELLS:
        targets += [f"{OUT}/tuned.csv"]
    if RUNS:
        targets += [f"{OUT}/summary.csv", f"{OUT}/report.md"]
    if CONSENSUS_METHODS:
        targets += [f"{OUT}/consensus/summary.csv"]
    targets += [f"{OUT}/figures/{name}.png" for name in FIGURES]
    return targets
