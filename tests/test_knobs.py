"""Every knob of a method is its options class's (issue 29): one reader and range check per knob, `auto`
found by the method on its own gossip, run-level words kept as shortcuts, and run ids as they were."""
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
from bench.run.config import KEYS, resolve
from bench.topology import make_topology

# ids taken by the code before the knobs moved (git 2781234): a method's run keeps its directory
BEFORE = [
    ({"algorithm": "dpsgd", "compressor": "none", "gamma": 0.5}, "867efef26d"),
    ({"algorithm": "dpsgd", "compressor": "none", "gamma": 0.5, "gamma_tune_steps": 300}, "08a2ff9bb2"),
    ({"algorithm": "dpsgd", "order": "code", "compressor": "none"}, "4ffe62c7ba"),
    ({"algorithm": "choco", "compressor": "sign", "gamma_tune_steps": 300, "order": "code"}, "8737a30cf4"),
    ({"algorithm": "choco", "compressor": "sign", "algorithm_options": {"gamma": 1}}, "881a1231b8"),
    ({"algorithm": "allreduce", "compressor": "none", "gamma": 1}, "ce8fc85fe5"),
    ({"algorithm": "powergossip", "compressor": "none", "algorithm_options": {"rank": 2}}, "8e5f379c9c"),
    ({"algorithm": "beer", "compressor": "sign", "gamma": 0.3}, "aafd619a60"),
    ({"algorithm": "beer", "compressor": "top:0.1", "gamma": 0.2, "gamma_tune_steps": 50}, "88adc261dc"),
    ({"algorithm": "deepsqueeze", "compressor": "sign", "gamma": 1.0}, "ef1fe3a531"),
    ({"algorithm": "deepsqueeze", "compressor": "none"}, "40b9267ae3"),
]
# ... and the runs whose numbers change: BEER's and DeepSqueeze's γ = auto is tuned on their own gossip now
RETUNED = [({"algorithm": "beer", "compressor": "sign"}, "6e0a8889db"),
           ({"algorithm": "deepsqueeze", "compressor": "top:0.1"}, "7fd45854ca")]


@pytest.mark.parametrize("settings,before", BEFORE, ids=[str(s) for s, _ in BEFORE])
def test_run_ids_are_what_they_were_before_the_knobs_moved(settings, before):
    assert resolve({}, {}, settings).fingerprint() == before


@pytest.mark.parametrize("settings,before", RETUNED, ids=[str(s) for s, _ in RETUNED])
def test_a_run_whose_auto_step_is_now_found_otherwise_gets_a_new_id(settings, before):
    cfg = resolve({}, {}, settings)
    assert cfg.fingerprint() != before
    given = resolve({}, {}, {**settings, "gamma": 0.5})  # a given γ is found the same way as ever: no revision
    assert "auto_revision" not in ALGORITHMS.get(cfg.algorithm).identity(given.algorithm_options, given.compressor)


def test_no_knob_is_a_run_setting_and_each_shortcut_is_one_field():
    named = shortcuts()
    tunable = {f for n in ALGORITHMS.names() for f, info in ALGORITHMS.get(n).knobs().items() if info.get("tune")}
    assert set(named) == {"gamma", "gamma_tune_steps", "order"} | tunable  # a grid names a tunable knob by its word
    assert not set(named) & set(KEYS)
    for name in ALGORITHMS.names():  # every method that has a shortcut's knob has that very knob: default, reader
        for f in dataclasses.fields(ALGORITHMS.get(name).Options):
            if f.name in named:
                assert (f.default, f.metadata["read"]) == (named[f.name].default, named[f.name].metadata["read"])


def test_the_shortcut_is_read_once_whatever_the_method():
    for algorithm in ("dpsgd", "choco"):  # the same line where the run's settings are resolved
        with pytest.raises(BenchError, match=r"^gamma=2\.0 must be 'auto' or in \(0, 1\]$"):
            resolve({}, {}, {"algorithm": algorithm, "gamma": 2})
    with pytest.raises(BenchError, match=r"^gamma_tune_steps=0 must be >= 1$"):
        resolve({}, {}, {"gamma_tune_steps": 0})
    with pytest.raises(BenchError, match=r"^order='x'; allowed: paper, code$"):
        resolve({}, {}, {"order": "x"})
    assert resolve({}, {}, {"gamma": "1"}).algorithm_options == {"gamma": 1.0}  # one form: the id holds


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


def test_choco_keeps_its_cache_entries_and_exact_messages_need_no_tuning():
    ring = make_topology("ring", 5)
    options, record = _resolved("choco", ring, "top:0.2", 20)
    assert f"ring|5|{ring.weights}|top:0.2|20|2000" in read_gamma_cache(cache_path("gamma.json"))
    assert record["gamma"]["source"] == "tuned on consensus (20 rounds, d=2000)"
    options, record = _resolved("beer", ring, "none", 20)
    assert options.gamma == 1.0 and record["gamma"]["source"] == "identity compressor"


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


def test_the_shortcut_words_follow_the_registered_methods(monkeypatch):
    """shortcuts() is read once per state of the registry (every resolved setting asks): a method registered
    later, or another registry, is seen at once."""
    from bench.algorithms import method
    from bench.registry import Registry

    fresh = Registry("algorithm")
    monkeypatch.setattr(method, "ALGORITHMS", fresh)
    assert shortcuts() == {}
    fresh.register("dpsgd-like")(ALGORITHMS.get("dpsgd"))  # D-PSGD's options: `order`, no consensus step
    assert set(shortcuts()) == {"order"}
    fresh.register("choco-like")(ALGORITHMS.get("choco"))
    assert set(shortcuts()) == {"order", "gamma", "gamma_tune_steps"}
    shortcuts().clear()  # a caller's copy: the next caller still gets every word
    assert set(shortcuts()) == {"order", "gamma", "gamma_tune_steps"}
