"""Every knob of a method is its options class's (issue 29): one reader and range check per knob, `auto`
found by the method on its own gossip, run-level words kept as shortcuts, and run ids as they were. A study's
tune.grid: an open map of the knobs declared tunable (run settings and each method's own), checked against the
declarations when the DAG is built, each searched only for the cells of a method that has it."""
import dataclasses

import pytest
import torch

from bench.algorithms import AUTO, ALGORITHMS, make_algorithm, parse_options, shortcuts
from bench.algorithms.gossip import best_of, tune_gamma
from bench.algorithms.step_tuning import read_gamma_cache
from bench.cache import cache_path
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.pipeline.study import Study
from bench.run.config import KEYS, resolve, tunable_words
from bench.topology import make_topology

# the ids of the runs before the knobs moved are pinned in tests/test_run_config_types.py; the runs whose numbers
# change get new ones: BEER's and DeepSqueeze's γ = auto is tuned on their own gossip now
RETUNED = [({"algorithm": "beer", "compressor": "sign"}, "6e0a8889db"),
           ({"algorithm": "deepsqueeze", "compressor": "top:0.1"}, "7fd45854ca")]


@pytest.mark.parametrize("settings,before", RETUNED, ids=[str(s) for s, _ in RETUNED])
def test_a_run_whose_auto_step_is_now_found_otherwise_gets_a_new_id(settings, before):
    cfg = resolve({}, {}, settings)
    assert cfg.fingerprint() != before
    given = resolve({}, {}, {**settings, "gamma": 0.5})  # a given γ is found the same way as ever: no revision
    assert "auto_revision" not in ALGORITHMS.get(cfg.algorithm).identity(given.algorithm_options, given.compressor)


def test_no_knob_is_a_run_setting_each_shortcut_is_one_field_and_a_grid_searches_the_declared_tunable_ones():
    named = shortcuts()
    tunable = {f for n in ALGORITHMS.names() for f, info in ALGORITHMS.get(n).knobs().items() if info.get("tune")}
    assert set(named) == {"gamma", "gamma_tune_steps", "order"} | tunable  # a grid names a tunable knob by its word
    assert set(tunable_words()) == {"lr", "momentum", "weight_decay"} | tunable
    assert {"gamma", "copy_step", "mix_step", "dual_step"} <= tunable
    assert not set(named) & set(KEYS)
    for name in ALGORITHMS.names():  # every method that has a shortcut's knob has that very knob: default, reader
        for f in dataclasses.fields(ALGORITHMS.get(name).Options):
            if f.name in named:
                assert (f.default, f.metadata["read"]) == (named[f.name].default, named[f.name].metadata["read"])


def test_what_a_method_tunes_and_what_a_plan_fixes():
    assert ALGORITHMS.get("choco").tunable("sign") == ("gamma",) and ALGORITHMS.get("choco").tunable("none") == ()
    assert ALGORITHMS.get("dpsgd").tunable("none") == ALGORITHMS.get("dcd").tunable("sign") == ()
    assert ALGORITHMS.get("beer").planning_options({}) == {"gamma": 0.5}
    assert ALGORITHMS.get("beer").planning_options({"gamma": 0.2}) == {"gamma": 0.2}
    assert ALGORITHMS.get("dpsgd").planning_options({"gamma": AUTO}) == {"gamma": AUTO}  # not its knob
    knobs = ALGORITHMS.get("choco").describe()["knobs"]  # what run.json tells the analysis
    assert knobs["gamma"] == {"default": "auto", "low": 0.0, "high": 1.0, "tune": True}
    assert knobs["order"] == {"default": "paper"}


def _resolved(method, topology, spec, steps):
    cls = ALGORITHMS.get(method)
    options = parse_options(cls, {"gamma_tune_steps": steps})
    return cls.resolve_options(options, topology, make_compressor(spec, contraction=cls.contraction))


@pytest.mark.parametrize("method", ["beer", "deepsqueeze"])
def test_auto_gamma_is_the_best_of_the_method_s_own_gossip(method):
    """γ = auto is the grid's best on the method's own gossip (its step without gradients), not Choco-Gossip's:
    on a ring of 6 with sign, 40 rounds, DeepSqueeze's best γ is 0.16 where Choco-Gossip's is 1."""
    ring = make_topology("ring", 6)
    options, record = _resolved(method, ring, "sign", 40)
    own = best_of(tune_gamma(ring, "sign", steps=40, method=method))
    assert options.gamma == record["gamma"]["value"] == own.gamma
    assert record["gamma"]["source"] == f"tuned on {method}'s gossip (40 rounds, d=2000)"
    choco = best_of(tune_gamma(ring, "sign", steps=40, method="choco"))
    if method == "deepsqueeze":
        assert own.gamma < 0.2 and choco.gamma == 1.0
        # Choco's γ would leave DeepSqueeze's own gossip far from consensus
        at_choco = tune_gamma(ring, "sign", grid=[choco.gamma], steps=40, method=method)[0]
        assert at_choco.final_error > 10 * own.final_error
    cache = read_gamma_cache(cache_path("gamma.json"))
    assert f"{method}|ring|6|{ring.weights}|sign|40|2000" in cache  # its own entry, beside Choco's


def test_choco_keeps_its_cache_entries():
    ring = make_topology("ring", 5)
    options, record = _resolved("choco", ring, "top:0.2", 20)
    assert f"ring|5|{ring.weights}|top:0.2|20|2000" in read_gamma_cache(cache_path("gamma.json"))
    assert record["gamma"]["source"] == "tuned on consensus (20 rounds, d=2000)"


def test_an_algorithm_built_directly_finds_its_own_auto_step():
    ring = make_topology("ring", 4)
    x0 = torch.randn(4, 8, dtype=torch.float64)
    algo = make_algorithm("choco", x0, SimulatedCommunicator(ring), compressor=make_compressor("none"))
    assert algo.options.gamma == 1.0 and algo.resolved["gamma"]["source"] == "identity compressor"
    algo = make_algorithm("dpsgd", x0, SimulatedCommunicator(ring))
    assert algo.resolved == {"gamma": {"value": None, "source": "unused"}}


def test_an_options_class_serves_any_method_and_its_errors_name_that_method():
    """A new method may take Choco's options class as it is (README "Extending it"): what it refuses names it."""
    from bench.algorithms import Method
    from bench.algorithms.choco import ChocoOptions

    class Mine(Method):
        name, label, Options = "mine", "Mine", ChocoOptions

    with pytest.raises(BenchError, match=r"^mine gamma=2\.0 must be 'auto' or in \(0, 1\]$"):
        parse_options(Mine, {"gamma": 2})
    with pytest.raises(BenchError) as err:
        parse_options(Mine, {"gamma": "x\ny"})  # a value's newline stays inside its repr
    assert "\n" not in str(err.value) and str(err.value).startswith("mine gamma=")
    with pytest.raises(BenchError, match=r"^choco order='x'; allowed: paper, code$"):
        parse_options(ALGORITHMS.get("choco"), {"order": "x"})


# -- a study's tune.grid and tune.methods ---------------------------------------------------------------------
@pytest.mark.parametrize("tune, line", [
    ({"grid": {"epochs": [1, 2]}}, "tune.grid: 'epochs' is not a tunable knob; tunable: lr, momentum, weight_decay"),
    ({"grid": {"copy_steps": [0.1]}}, "'copy_steps' is not a tunable knob"),
    ({"grid": {"copy_step": [0.1, 1.5]}}, "tune.grid: copy_step=1.5 must be a number in (0, 1]"),
    ({"grid": {"gamma": [0.0]}}, "tune.grid: gamma=0.0 must be 'auto' or in (0, 1]"),
    ({"grid": {"lr": [-1]}}, "tune.grid: lr=-1"),
    ({"grid": {"lr": [0.1]}, "methods": {"nosuch": {"lr": [0.1]}}}, "tune.methods: 'nosuch' is not a method"),
    ({"grid": {"lr": [0.1]}, "methods": {"cedas": {"gamma": [0.5]}}},
     "tune.methods.cedas: 'gamma' is not a knob cedas tunes; it tunes: mix_step, copy_step"),
    ({"grid": {"lr": [0.1]}, "methods": {"docom": {"beta": [2.0]}}}, "tune.grid: beta=2.0 must be a number in (0, 1]"),
])
def test_a_grid_naming_what_is_not_tunable_or_a_value_outside_its_range_is_one_line(tune, line):
    with pytest.raises(BenchError) as err:
        Study({"study": "t", "task": "lsq", "blocks": {"b": {"method": ["cedas/qsgd:16"], "topology": ["ring"],
                                                             "nodes": [4]}}, "tune": tune})
    assert line in str(err.value) and "\n" not in str(err.value)


def test_a_method_knob_is_searched_only_for_the_cells_of_a_method_that_has_it_and_its_own_grid_for_its_cells_only():
    shared = {"lr": [0.1, 0.2], "copy_step": [0.1, 0.5], "mix_step": [0.5, 1.0]}
    study = Study({"study": "t", "task": "lsq", "seeds": [0], "defaults": {"epochs": 1},
                   "blocks": {"b": {"method": ["cedas/qsgd:16", "lead/qsgd:16", "choco/sign", "dpsgd/none",
                                               "docom/sign"], "topology": ["ring"], "nodes": [4]}},
                   "tune": {"grid": shared, "methods": {"cedas": {"copy_step": [0.2, 0.4], "lr": [0.05]},
                                                        "docom": {"beta": [0.01, 0.3]}}}})
    searched = {cell.partition("_")[0]: keys for cell, keys in study.tuned_cells.items()}
    assert searched == {"cedas-qsgd16": ["copy_step", "lr", "mix_step"], "lead-qsgd16": ["copy_step", "lr"],
                        "choco-sign": ["lr"], "dpsgd-none": ["lr"], "docom-sign": ["beta", "lr"]}
    grids = {cell.partition("_")[0]: study.grid_for(study.cells[cell]) for cell in study.tuned_cells}
    assert grids["cedas-qsgd16"] == {"lr": [0.05], "copy_step": [0.2, 0.4], "mix_step": [0.5, 1.0]}
    assert grids["lead-qsgd16"] == shared and grids["docom-sign"] == {**shared, "beta": [0.01, 0.3]}
    trials = {cell.partition("_")[0]: study.trials(cell) for cell in study.tuned_cells}
    assert len(trials["cedas-qsgd16"]) == len(trials["docom-sign"]) == 4  # no γ in either grid
    trial = next(iter(trials["lead-qsgd16"].values()))
    cfg = resolve({}, {}, dict(trial))
    assert cfg.algorithm_options == {"copy_step": trial["copy_step"]}  # the grid's word is the method's knob
