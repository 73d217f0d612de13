"""`_coerce` follows RunConfig's field annotations (issue 15): run identities pinned literally, every
field round-trips, errors are one line naming the key, and the `algorithm_options` alias."""
import dataclasses

import pytest

from bench.algorithms import ALGORITHMS, parse_options
from bench.errors import BenchError
from bench.run.config import KEYS, RunConfig, _coerce, check_keys, parse_sets, resolve

# fingerprints computed before _coerce was derived from the annotations: a change to how values are
# read that changes a run's identity (and so its directory) fails here
PINNED = [
    ({}, "4e5c2cfaf3"),
    ({"epochs": 1}, "38446011d4"),
    ({"epochs": 0.5}, "fb5c26410b"),
    ({"epochs": 40.0}, "c694a934a9"),
    ({"epochs": "10", "milestones": "5,8"}, "f75da70c73"),
    ({"lr_schedule": "warmup-multistep", "milestones": [150, 225]}, "05d6c3ff6c"),
    ({"gamma": "auto"}, "4e5c2cfaf3"),
    ({"gamma": 0.3}, "8aa0b7b4aa"),
    ({"gamma": "0.3"}, "8aa0b7b4aa"),
    ({"weights": None}, "4e5c2cfaf3"),
    ({"weights": "metropolis"}, "e9d2c95f6a"),
    ({"eval_local_workers": "all"}, "4e5c2cfaf3"),
    ({"eval_local_workers": 4}, "62a5d9a8dc"),
    ({"compute_time": 0.01}, "0831a1a9f8"),
    ({"compute_time": "measured"}, "4e5c2cfaf3"),
    ({"task_options": {"hidden": [16]}}, "2307425002"),
    ({"grad_clip": 0.4, "stop_at": 2}, "150672f284"),
    ({"backend": "dist", "procs": 2}, "59a22f1194"),
    ({"momentum": 0.5, "nesterov": "false"}, "7d758a86b8"),
    ({"data_root": "none", "val_fraction": 0.1}, "8d239d180c"),
    ({"task": "lsq", "algorithm": "ecd", "compressor": "top:0.1", "topology": "torus", "nodes": 16, "seed": 3},
     "e6b79e240b"),
]


@pytest.mark.parametrize("settings,fingerprint", PINNED, ids=[str(s) for s, _ in PINNED])
def test_run_identities_are_unchanged(settings, fingerprint):
    assert resolve({}, {}, settings).fingerprint() == fingerprint


def test_whole_epochs_stay_ints():
    for value in (1, 1.0, "1", "40.0"):
        epochs = resolve({}, {}, {"epochs": value}).epochs
        assert epochs == int(float(value)) and type(epochs) is int
    assert resolve({}, {}, {"epochs": "0.5"}).epochs == 0.5


@pytest.mark.parametrize("key", list(KEYS))
def test_every_field_round_trips(key):
    default = getattr(RunConfig(), key)
    assert _coerce(key, default) == default and type(_coerce(key, default)) is type(default)
    for settings, _ in PINNED:  # and the values of other runs
        value = getattr(resolve({}, {}, settings), key)
        assert _coerce(key, value) == value and type(_coerce(key, value)) is type(value)


def test_what_each_kind_of_field_accepts():
    for key in ("weights", "grad_clip", "data_root", "procs", "stop_at"):  # None-able
        for none in (None, "none", "Null", ""):
            assert _coerce(key, none) is None
    assert _coerce("grad_clip", "0.4") == 0.4 and _coerce("procs", "2") == 2
    assert _coerce("weights", "uniform") == "uniform"
    assert _coerce("milestones", 5) == (5.0,) and _coerce("milestones", "5, 8 9") == (5.0, 8.0, 9.0)
    assert _coerce("milestones", [150, "225"]) == (150.0, 225.0)
    assert _coerce("task_options", {"hidden": [8]}) == {"hidden": [8]}
    assert _coerce("eval_local_workers", "all") == "all" and _coerce("eval_local_workers", "3") == 3
    assert _coerce("compute_time", "measured") == "measured"
    # each field takes its own words only (the words live beside the field, in its metadata); γ's `auto` is
    # its algorithm's knob now (tests/test_knobs.py)
    assert KEYS["compute_time"].metadata["words"] == ("measured",)
    others = (("compute_time", "auto"), ("compute_time", "Measured"), ("eval_local_workers", "All"))
    for key, word in others:
        with pytest.raises(BenchError):
            _coerce(key, word)


BAD = [  # (key, value, the message)
    ("milestones", "a,b", "milestones=['a', 'b'] must be a list of epochs, e.g. [150, 225]"),
    ("milestones", [[1]], "milestones=[[1]] must be a list of epochs, e.g. [150, 225]"),
    ("milestones", [10**400], None),
    ("eval_local_workers", "x", "eval_local_workers='x' must be 'all' or a count >= 0"),
    ("eval_local_workers", True, "eval_local_workers=True must be 'all' or a count >= 0"),
    ("eval_local_workers", 1.5, "eval_local_workers=1.5 must be 'all' or a count >= 0"),
    ("task_options", [1, 2],
     "task_options=[1, 2] must be a mapping of option names to values, e.g. {hidden: [64, 64]}"),
    ("task_options", {1: 2}, "task_options key 1 must be an option name (a string)"),
    ("nesterov", "maybe", "nesterov='maybe' must be true or false"),
    ("batch_size", "x", "batch_size='x' must be an integer"),
    ("batch_size", True, "batch_size=True must be an integer, not true/false"),
    ("nodes", 2.5, "nodes=2.5 must be an integer"),
    ("lr", "x", "lr='x' must be a number"),
    ("lr", False, "lr=False must be a number, not true/false"),
    ("epochs", "ten", "epochs='ten' must be a number"),
    ("compute_time", [1], "compute_time=[1] must be a number"),
    ("grad_clip", "x", "grad_clip='x' must be a number"),
    ("procs", "two", "procs='two' must be an integer"),
    ("stop_at", True, "stop_at=True must be a number, not true/false"),
]


@pytest.mark.parametrize("key,value,message", BAD, ids=[f"{k}={v!r}"[:40] for k, v, _ in BAD])
def test_a_coerce_error_is_one_line_naming_the_key(key, value, message):
    with pytest.raises(BenchError) as err:
        _coerce(key, value)
    text = str(err.value)
    assert "\n" not in text and text.startswith(key)
    if message is not None:
        assert text == message


# ---- a knob's run-level word is its algorithm option ------------------------------------------------
def test_a_knob_s_shortcut_is_the_algorithm_option():
    plain = resolve({}, {}, parse_sets(["gamma=0.3"]))
    spelled = resolve({}, {}, parse_sets(["algorithm_options.gamma=0.3"]))
    assert plain.algorithm_options == spelled.algorithm_options == {"gamma": 0.3}
    assert plain.fingerprint() == spelled.fingerprint() == "8aa0b7b4aa"  # the id of gamma=0.3 when it was a setting
    assert parse_sets(["algorithm_options={gamma: 0.3, order: code}"]) == {"algorithm_options": {"gamma": 0.3,
                                                                                               "order": "code"}}
    # within one layer the later spelling wins
    assert resolve({}, {}, parse_sets(["algorithm_options.gamma=0.3", "gamma=0.5"])).algorithm_options == {"gamma": 0.5}
    # shortcuts and the mapping meet in one place
    cfg = resolve({"algorithm_options": {"gamma": 0.3, "order": "code"}}, {}, {})
    assert cfg.algorithm_options == {"gamma": 0.3, "order": "code"}
    assert cfg.fingerprint() == resolve({"gamma": 0.3, "order": "code"}, {}, {}).fingerprint()
    # file ← flags ← --set still holds; within one mapping the later key wins
    assert resolve({"algorithm_options": {"gamma": 0.3}}, {}, {"gamma": 0.5}).algorithm_options["gamma"] == 0.5
    assert resolve({"gamma": 0.5, "algorithm_options": {"gamma": 0.3}}, {}, {}).algorithm_options["gamma"] == 0.3
    check_keys({"algorithm_options": {"gamma": 0.3}, "lr": 0.1}, "the study's defaults")  # studies take it too
    check_keys({"gamma": 0.3}, "the study's defaults")


@pytest.mark.parametrize("call,words", [
    (lambda: parse_sets(["algorithm_options=3"]),
     "algorithm_options=3 must be a mapping of option names to values, e.g. {gamma: 0.3}"),
    (lambda: resolve({"algorithm_options": [1]}, {}, {}),
     "algorithm_options=[1] must be a mapping of option names to values, e.g. {gamma: 0.3}"),
    (lambda: resolve({"algorithm_options": {1: 2}}, {}, {}), "algorithm_options key 1 must be an option name"),
], ids=["set-not-mapping", "file-not-mapping", "int-key"])
def test_a_bad_algorithm_options_is_one_line(call, words):
    with pytest.raises(BenchError) as err:
        call()
    assert words in str(err.value) and "\n" not in str(err.value)


def test_an_algorithm_checks_its_own_options_before_anything_is_written():
    """A name the algorithm's class does not know is refused by that class, in one line, when the run is
    resolved into its parts (before anything is written); a shortcut knob a method does not have stays in the
    run's settings (its id is what it was) but is not the method's option."""
    from bench.run.resolved import resolve_run

    with pytest.raises(BenchError, match="^unknown option 'gama' for algorithm 'choco'; allowed: gamma, "):
        resolve_run(resolve({}, {}, parse_sets(["algorithm_options.gama=0.3", "algorithm_options.gamma=0.2"])))
    assert resolve({}, {}, {}).fingerprint() == resolve({"algorithm_options": {}}, {}, {}).fingerprint()
    dpsgd = resolve({}, {}, {"algorithm": "dpsgd", "compressor": "none", "gamma": 0.5})
    assert dpsgd.algorithm_options == {"gamma": 0.5}
    assert dataclasses.asdict(parse_options(ALGORITHMS.get("dpsgd"), dpsgd.algorithm_options)) == {"order": "paper"}
    # (`bench run` prints such a refusal as its one line: tests/test_bad_input.py's REFUSED)
