"""One way into a run: ``bench.run.start`` from a mapping gives the run `bench run` gives, bad settings are
one line before anything is written, and every job the pipeline submits carries its settings as the JSON
of the validated RunConfig (bench/run/settings_file.py), which resolves back to exactly that config."""
import functools
import json
import shlex
from pathlib import Path

import pytest
import yaml

from bench.cli import main
from bench.errors import BenchError
from bench.pipeline import Study
from bench.pipeline.halving import _with_value
from bench.run import resolve, start
from bench.run.parsing import parse_sets
from bench.run.settings_file import config_of, dumps, given, load_settings, read_settings, write_settings

ROOT = Path(__file__).resolve().parents[1]
TINY = {"task": "lsq", "algorithm": "choco", "compressor": "sign", "nodes": 4, "epochs": 1, "seed": 3,
        "gamma": 0.4, "lr": 0.05, "momentum": 0, "batch_size": 8, "task_options": {"n_train": 64}, "quiet": True}


def test_start_with_a_mapping_and_the_settings_json_write_the_run_bench_run_writes(tmp_path):
    assert start(TINY, tmp_path / "lib") == 0
    # the pipeline hands each job its settings as one JSON object; a flag or --set beside it wins
    given = json.dumps({**{k: v for k, v in TINY.items() if k != "quiet"}, "nodes": 8, "lr": 0.3})
    assert main(["run", "--settings", given, "--nodes", "4", "--set", "lr=0.05", "--quiet",
                 "--out", str(tmp_path / "cli")]) == 0
    lib, cli = (json.loads((tmp_path / d / "run.json").read_text()) for d in ("lib", "cli"))
    assert lib["run_id"] == cli["run_id"] and lib["fingerprint"] == cli["fingerprint"]
    assert lib["config"] == cli["config"] and lib["config"]["nesterov"] is False  # momentum 0
    assert lib["status"] == cli["status"] == "completed"
    same = ("train_loss", "test_loss", "consensus_distance", "bits_per_worker")  # not the measured times
    assert [lib["final"][k] for k in same] == [cli["final"][k] for k in same]
    # the same settings again: recognised as done, whichever way in
    assert start(resolve({}, {}, TINY), tmp_path / "cli") == 0


# every refusal of a run's settings, whatever part of them it names: the start of its one line (a string row is
# one --set word), before anything is written
@pytest.mark.parametrize("settings, line", [
    ({**TINY, "lerning_rate": 0.1}, "unknown setting 'lerning_rate' in the settings; known: task, algorithm, "),
    ({**TINY, "lr": -1}, "lr=-1.0 must be >= 0"),
    ({**TINY, "nodes": "eight"}, "nodes='eight' must be an integer"),
    ({**TINY, "backend": "mpi"}, "backend='mpi'; allowed: sim, dist"),
    ([("lr", 0.1)], "the settings must be a mapping"),
    # the tuned recipe, and settings that contradict each other
    ({"task": "mnist1d-mlp", "algorithm": "choco", "compressor": "qsgd:2", "recipe": "tuned"},
     "recipe=tuned: no tuned settings for choco/qsgd:2 on mnist1d-mlp; tuned: "),
    ({"task": "lsq", "recipe": "tuned"}, "recipe=tuned: no tuned settings for task 'lsq'"),
    ({"recipe": "best"}, "recipe='best'; allowed: none, tuned"),
    ({"momentum": 0, "nesterov": True}, "nesterov=true needs momentum > 0"),  # asked for both: refused
    # a knob's shortcut is read once, in the same line whatever the method (tests/test_knobs.py)
    ({"algorithm": "dpsgd", "gamma": 2}, "gamma=2.0 must be 'auto' or in (0, 1]"),
    ({"algorithm": "choco", "gamma": 2}, "gamma=2.0 must be 'auto' or in (0, 1]"),
    ({"gamma_tune_steps": 0}, "gamma_tune_steps=0 must be >= 1"),
    ({"order": "x"}, "order='x'; allowed: paper, code"),
    # the method's options: a mapping, of names its class knows
    ("algorithm_options=3", "algorithm_options=3 must be a mapping of option names to values, e.g. {gamma: 0.3}"),
    ({"algorithm_options": {1: 2}}, "algorithm_options key 1 must be an option name"),
    ({"algorithm_options": {"gama": 0.3, "gamma": 0.2}},
     "unknown option 'gama' for algorithm 'choco'; allowed: gamma, "),
    # each field reads its own type (bench/run/parsing.py)
    ({"milestones": "a,b"}, "milestones=['a', 'b'] must be a list of epochs, e.g. [150, 225]"),
    ({"milestones": [10**400]}, "milestones=[1000"),
    ({"task_options": [1, 2]},
     "task_options=[1, 2] must be a mapping of option names to values, e.g. {hidden: [64, 64]}"),
    ({"task_options": {1: 2}}, "task_options key 1 must be an option name (a string)"),
    ({"nesterov": "maybe"}, "nesterov='maybe' must be true or false"),
    ({"batch_size": True}, "batch_size=True must be an integer, not true/false"),
    ({"nodes": 2.5}, "nodes=2.5 must be an integer"),  # a float that is not whole
    ({"lr": False}, "lr=False must be a number, not true/false"),
    ({"compute_time": "auto"}, "compute_time='auto' must be a number"),  # each field takes its own words only
    ({"eval_local_workers": "All"}, "eval_local_workers='All' must be 'all' or a count >= 0"),
    ({"grad_clip": "x"}, "grad_clip='x' must be a number"),
    ({"procs": "two"}, "procs='two' must be an integer"),
    ({"stop_at": True}, "stop_at=True must be a number, not true/false"),
])
def test_bad_settings_are_one_line_before_anything_is_written(settings, line, tmp_path):
    with pytest.raises(BenchError) as err:
        start(parse_sets([settings]) if isinstance(settings, str) else settings, tmp_path / "run")
    message = str(err.value)
    assert "\n" not in message and message.startswith(line), message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("values", [
    {}, TINY, {"momentum": 0}, {"algorithm_options": {"gamma": 0.3}, "gamma": 0.2},
    {"recipe": "tuned", "task": "mnist1d-mlp", "algorithm": "choco", "compressor": "sign", "lr": 0.1},
    {"algorithm": "powersgd", "algorithm_options": {"rank": 2}}, {"epochs": 2.0, "milestones": "1, 1.5"},
    {"data_root": "0.10", "topology": "torus", "nodes": 9}, {"algorithm": "dpsgd", "faults": {"drop": 0.1}},
])
def test_the_settings_forms_resolve_back_to_the_same_config(values, tmp_path):
    cfg = config_of(values)
    # every setting in a file (what dist ranks read), and the given ones as one JSON value (the pipeline's)
    assert load_settings(write_settings(cfg, tmp_path / "s.json")) == cfg
    form = given(cfg, values)
    assert load_settings(dumps(form)) == cfg and set(form) <= set(cfg.to_dict())
    assert cfg.run_id() == load_settings(dumps(form)).run_id()


@pytest.mark.parametrize("source, content, words", [
    ("{not json", None, ["the settings is not JSON"]),
    ('{"lr": 0.1, "nodez": 4}', None, ["unknown setting 'nodez' in the settings"]),
    ("missing.json", None, ["settings file 'missing.json' cannot be read"]),
    ("list.json", '["lr", 0.1]', ["settings file 'list.json' must be a JSON object"]),
    ("deep.json", "[" * 100000, ["settings file 'deep.json' is not JSON"]),
])
def test_a_bad_settings_value_or_file_is_one_line(source, content, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        Path(source).write_text(content)
    with pytest.raises(BenchError) as err:
        read_settings(source)
    assert "\n" not in str(err.value) and all(w in str(err.value) for w in words), str(err.value)


# -- the pipeline's jobs ------------------------------------------------------------------------------------
@functools.cache
def _studies() -> list[tuple[str, Study]]:
    out = []
    for path in sorted((ROOT / "config").glob("*.yaml")):
        config = yaml.safe_load(path.read_text())
        if "blocks" in config:
            for scale in ("cpu",) + (("gpu",) if config.get("gpu") else ()):
                out.append((f"{path.stem}@{scale}", Study({**config, "scale": scale})))
    small = {"study": "v", "task": "lsq", "seeds": [0, 1], "tune": {"grid": {"lr": [0.1, 0.2]}, "seeds": [0]}}
    block = {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4]}
    for value in NASTY:  # a value reaches `bench run` as it is, from the defaults and from a block's axis
        out.append(("quoted@cpu", Study({**small, "defaults": {"epochs": 1, "data_root": value},
                                         "blocks": {"b": block}})))
        out.append(("quoted@cpu", Study({**small, "defaults": {"epochs": 1}, "group_seeds": True,
                                         "blocks": {"b": {**block, "data_root": [value]}}})))
    # momentum 0 in the defaults (so nesterov off) and momentum searched: the final run with the chosen 0.9 gets
    # Nesterov back, as `resolve` gives it, because the job's settings name neither
    out.append(("derived@cpu", Study({**small, "defaults": {"epochs": 1, "momentum": 0},
                                      "tune": {"grid": {"momentum": [0.5, 0.9]}}, "blocks": {"b": block}})))
    return out


# what a shell or `--set`'s YAML would read otherwise, in a value and in the paths a job is given
NASTY = ["/data/it's", "$(touch PWNED)", "x; touch PWNED", "a`touch PWNED`b", 'say "hi" \\ $HOME',
         "it's; rm -rf $(pwd) #", "0.10", "[1, 2]", "key: value"]
OUT, YAML = "results/v/it's $(touch PWNED)", "tuned/it's.yaml"


def _settings_word(line: str, tuned=()) -> dict:
    words = shlex.split(line)
    at = words.index("bench") + 1
    assert words[at:at + 2] == ["run", "--settings"] and words[-2:] == ["--out", OUT]
    # a final run reads its tuned values from the cell's YAML, and they are left out of its settings
    assert not tuned or words[at + 3:at + 6] == ["--config", YAML, "--replace-stale"]
    return read_settings(words[at + 2])


def test_every_job_tuning_trial_and_grid_extension_of_every_study_carries_the_validated_settings_of_its_runs():
    checked, trials = set(), 0
    for name, study in _studies():
        for job in study.jobs():
            tuned = study.tuned_cells.get(job.cell, ())
            if job.rule == "tune_cell" or not job.runs:
                continue
            # a tuned YAML as `analysis tune select` writes it: one value of each searched knob (the shared grid with
            # the method's own, tune.methods)
            grid = study.grid_for(study.cells[job.cell]) if tuned else {}
            chosen = {key: grid[key][-1] for key in tuned}
            run = job.runs[0]  # a job's seeds differ in the seed alone
            settings = _settings_word(study.command(run, OUT, tuned, YAML if tuned else None), tuned)
            assert not set(settings) & set(tuned) and (name != "quoted@cpu" or settings["data_root"] in NASTY), name
            # as `bench run --settings JSON --config tuned.yaml` layers them: the YAML beneath the settings
            assert resolve(chosen, settings, {}) == study.run_config({**run, **chosen}), (name, run)
            checked.add(name.split("@")[0])
        # one cell for each set of searched knobs: the other cells' trials are made alike
        for cell in {tuple(knobs): cell for cell, knobs in study.tuned_cells.items()}.values():
            plan = json.loads(json.dumps(study.halving_plan(cell, "tune")))  # as the rule hands it over
            for trial_name, settings in study.trials(cell).items():
                trial = plan["trials"][trial_name]
                assert trial["command"] == study.launcher(settings)
                assert config_of(trial["settings"]) == study.run_config(settings), (name, trial_name)
                for knob in study.tuned_cells[cell]:  # the halving's extension of the grid past its edge
                    moved = _with_value(trial["settings"], knob, 0.0123)
                    assert config_of(moved) == study.run_config({**settings, knob: 0.0123}), (name, knob)
                trials += 1
    assert len(checked) > 12 and trials > 50
