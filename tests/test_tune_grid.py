"""A study's tune.grid: an open map of the knobs that are declared tunable (run settings and each method's own),
checked against the declarations when the DAG is built, each searched only for the cells of a method that has it."""
import pytest

from bench.algorithms import ALGORITHMS
from bench.errors import BenchError
from bench.pipeline.study import Study
from bench.run.config import check_tune_grid, resolve, tunable_words
from bench.run.identity import identity_dict


def test_the_tunable_words_are_the_declared_ones():
    declared = {f for name in ALGORITHMS.names() for f, info in ALGORITHMS.get(name).knobs().items()
                if info.get("tune")}
    assert set(tunable_words()) == {"lr", "momentum", "weight_decay"} | declared
    assert {"gamma", "copy_step", "mix_step", "dual_step"} <= declared


@pytest.mark.parametrize("grid, line", [
    ({"epochs": [1, 2]}, "tune.grid: 'epochs' is not a tunable knob; tunable: lr, momentum, weight_decay"),
    ({"copy_steps": [0.1]}, "'copy_steps' is not a tunable knob"),
    ({"copy_step": [0.1, 1.5]}, "tune.grid: copy_step=1.5 must be a number in (0, 1]"),
    ({"gamma": [0.0]}, "tune.grid: gamma=0.0 must be 'auto' or in (0, 1]"),
    ({"lr": [-1]}, "tune.grid: lr=-1"),
])
def test_a_grid_key_or_value_outside_the_declarations_is_one_line(grid, line):
    with pytest.raises(BenchError) as err:
        check_tune_grid(grid)
    assert line in str(err.value) and "\n" not in str(err.value)


def _study(grid):
    return Study({"study": "t", "task": "lsq", "seeds": [0], "defaults": {"epochs": 1},
                  "blocks": {"b": {"method": ["cedas/qsgd:16", "lead/qsgd:16", "choco/sign", "dpsgd/none"],
                                   "topology": ["ring"], "nodes": [4]}},
                  "tune": {"grid": grid}})


def test_a_method_knob_is_searched_only_for_the_cells_of_a_method_that_has_it():
    study = _study({"lr": [0.1, 0.2], "copy_step": [0.1, 0.5], "mix_step": [0.5, 1.0]})
    searched = {cell.partition("_")[0]: keys for cell, keys in study.tuned_cells.items()}
    assert searched == {"cedas-qsgd16": ["copy_step", "lr", "mix_step"], "lead-qsgd16": ["copy_step", "lr"],
                        "choco-sign": ["lr"], "dpsgd-none": ["lr"]}
    trial = next(t for t in study.trials(next(c for c in study.tuned_cells if c.startswith("lead"))).values())
    cfg = resolve({}, {}, {k: v for k, v in trial.items()})
    assert cfg.algorithm_options == {"copy_step": trial["copy_step"]}  # the grid's word is the method's knob


def test_a_knob_given_a_word_later_keeps_the_run_ids_of_its_runs():
    # the fingerprint keeps at its top level only the knobs that were run settings when ids were first taken
    cfg = resolve({}, {}, {"algorithm": "lead", "compressor": "qsgd:16", "copy_step": 0.5})
    identity = identity_dict(cfg)
    assert identity["algorithm_options"] == {"copy_step": 0.5} and "copy_step" not in identity
    assert {"gamma", "gamma_tune_steps", "order"} <= set(identity)


def test_a_methods_own_grid_adds_to_the_shared_one_for_its_cells_only():
    study = Study({"study": "t", "task": "lsq", "seeds": [0], "defaults": {"epochs": 1},
                   "blocks": {"b": {"method": ["cedas/qsgd:16", "lead/qsgd:16", "docom/sign"], "topology": ["ring"],
                                    "nodes": [4]}},
                   "tune": {"grid": {"lr": [0.1, 0.2], "copy_step": [0.1]},
                            "methods": {"cedas": {"copy_step": [0.2, 0.4], "lr": [0.05]}, "docom": {"beta": [0.01, 0.3]}}}})
    grids = {cell.partition("_")[0]: study.grid_for(study.cells[cell]) for cell in study.tuned_cells}
    assert grids["cedas-qsgd16"] == {"lr": [0.05], "copy_step": [0.2, 0.4]}
    assert grids["lead-qsgd16"] == {"lr": [0.1, 0.2], "copy_step": [0.1]}
    assert grids["docom-sign"]["beta"] == [0.01, 0.3]
    docom = next(c for c in study.tuned_cells if c.startswith("docom"))
    assert study.tuned_cells[docom] == ["beta", "lr"] and len(study.trials(docom)) == 4  # no γ in either grid


@pytest.mark.parametrize("methods, line", [
    ({"nosuch": {"lr": [0.1]}}, "tune.methods: 'nosuch' is not a method"),
    ({"cedas": {"gamma": [0.5]}}, "tune.methods.cedas: 'gamma' is not a knob cedas tunes; it tunes: mix_step, copy_step"),
    ({"docom": {"beta": [2.0]}}, "tune.grid: beta=2.0 must be a number in (0, 1]"),
])
def test_a_methods_grid_naming_what_it_does_not_tune_is_one_line(methods, line):
    with pytest.raises(BenchError) as err:
        Study({"study": "t", "task": "lsq", "blocks": {"b": {"method": ["cedas/qsgd:16"], "topology": ["ring"],
                                                             "nodes": [4]}},
               "tune": {"grid": {"lr": [0.1]}, "methods": methods}})
    assert line in str(err.value) and "\n" not in str(err.value)
