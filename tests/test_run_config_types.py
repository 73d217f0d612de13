"""`_coerce` follows RunConfig's field annotations (issue 15): run identities pinned literally (a knob's shortcut and
its `algorithm_options` spelling one id), every field round-trips (its one-line refusals: tests/test_start.py)."""
import dataclasses
import itertools

import pytest

from bench.algorithms import ALGORITHMS, parse_options
from bench.compressors.spec import COMPRESSORS, make_compressor
from bench.data.partition import DEALS
from bench.pipeline import Study
from bench.run.config import KEYS, RunConfig, _coerce, resolve
from bench.specs import parse_spec
from bench.topology.kinds import TOPOLOGIES

# fingerprints computed before _coerce was derived from the annotations: a change to how values are
# read that changes a run's identity (and so its directory) fails here
PINNED = [
    ({}, "4e5c2cfaf3"),
    ({"epochs": 1}, "38446011d4"),
    ({"epochs": 0.5}, "fb5c26410b"),
    ({"epochs": 40.0}, "c694a934a9"),  # whole epochs stay ints, whatever their spelling: 40 and 40.0 had two ids
    ({"epochs": 1.0}, "38446011d4"),
    ({"epochs": "40.0"}, "c694a934a9"),
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
    # a spec spelt otherwise is the same training: the id of its canonical spelling (below)
    ({"task": "lsq", "algorithm": "ecd", "compressor": "top:1e-1", "topology": "torus", "nodes": 16, "seed": 3},
     "e6b79e240b"),
    # a knob's run-level word is its algorithm option: either spelling, one id (gamma=0.3's when it was a setting)
    ({"algorithm_options": {"gamma": 0.3}}, "8aa0b7b4aa"),
    ({"gamma": 0.3, "order": "code"}, "5482c3988a"),
    ({"algorithm_options": {"gamma": 0.3, "order": "code"}}, "5482c3988a"),
    ({"algorithm_options": {}}, "4e5c2cfaf3"),
    # a knob given a word later (LEAD's copy step): its id is the one its option had
    ({"algorithm": "lead", "compressor": "qsgd:16", "copy_step": 0.5}, "9b3a449568"),
    ({"algorithm": "lead", "compressor": "qsgd:16", "algorithm_options": {"copy_step": 0.5}}, "9b3a449568"),
    # ids taken by the code before the knobs moved into each method's options class (git 2781234, tests/test_knobs.py):
    # a method's run keeps its directory
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


@pytest.mark.parametrize("settings,fingerprint", PINNED, ids=[str(s) for s, _ in PINNED])
def test_run_identities_are_unchanged(settings, fingerprint):
    assert resolve({}, {}, settings).fingerprint() == fingerprint


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
    # each field takes its own words only (the words live beside the field, in its metadata; another field's word is
    # refused: tests/test_start.py); γ's `auto` is its algorithm's knob now (tests/test_knobs.py)
    assert KEYS["compute_time"].metadata["words"] == ("measured",)


def test_a_shortcut_knob_a_method_does_not_have_stays_in_the_settings_but_is_not_its_option():
    """Its id is what it was (PINNED); a name the method's class does not know is refused by that class
    (tests/test_start.py's refusals)."""
    dpsgd = resolve({}, {}, {"algorithm": "dpsgd", "compressor": "none", "gamma": 0.5})
    assert dpsgd.algorithm_options == {"gamma": 0.5}
    assert dataclasses.asdict(parse_options(ALGORITHMS.get("dpsgd"), dpsgd.algorithm_options)) == {"order": "paper"}
    # (`bench run` prints such a refusal as its one line: tests/test_bad_input.py's REFUSED)


def respelt(spec: str, defaults: dict[str, str]) -> list[str]:
    """``spec`` and spellings of it that read as the same: each number in exponent form or with trailing zeros (an
    integer with a leading zero or a sign), the options in reverse order with true as True or 1, and ``defaults``
    (options at the value the spec leaves them) spelt out."""
    parsed = parse_spec(spec)
    options = {**defaults, **parsed.options}
    out = [spec]
    for form, yes in itertools.product((0, 1), ("True", "1")):
        def other(text: str) -> str:
            if text == "true" or text.isdigit():
                return yes if text == "true" else (f"0{text}", f"+{text}")[form]
            try:
                return (f"{float(text):e}", f"{float(text):.12f}")[form]
            except ValueError:
                return text
        head = parsed.name if parsed.arg is None else f"{parsed.name}:{other(parsed.arg)}"
        out.append(",".join([head, *(f"{key}={other(value)}" for key, value in reversed(options.items()))]))
    return list(dict.fromkeys(out))


# (setting, spec, nodes, the options it leaves at their defaults) for every kind of spec with a number or options,
# from the registries: compressors under Choco, topologies at their examples' n, the data deals
SPELT = [("compressor", e, 4, parse_spec(make_compressor(e, contraction=True).spec).options)
         for name in COMPRESSORS.names() for e in COMPRESSORS.get(name).examples if e != name]
SPELT += [("topology", e.spec, e.n, {key: str(flag).lower() for key, flag in kind.flags})
          for kind in map(TOPOLOGIES.get, TOPOLOGIES.names()) if kind.arg or kind.flags for e in kind.examples]
SPELT += [("data", f"{name}:{alpha}", 4, {}) for name, reader in DEALS.items() if reader for alpha in (0.1, 10)]
SPELT += [("network", "p2p-100m,latency=0.001,bandwidth=5e6", 4, {"sends": "serial"})]


@pytest.mark.parametrize("key,spec,nodes,defaults", SPELT, ids=[f"{k}={s}@{n}" for k, s, n, _ in SPELT])
def test_every_spelling_of_one_training_has_one_run_id_and_one_cell_name(key, spec, nodes, defaults):
    """top:0.1, top:0.10 and top:1e-1 are one training: one run id (so one run.json and folder) and, in a study,
    one cell name (before, each spelling was a training of its own: one study ran 9 cells for one)."""
    ids, cells = set(), set()
    for spelt in respelt(spec, defaults):
        settings = {"compressor": "sign", "topology": "ring", "nodes": nodes, key: spelt}
        ids.add(resolve({}, {}, {**settings, "task": "lsq", "algorithm": "choco", "gamma": 0.5}).run_id())
        block = {"method": [f"choco/{settings.pop('compressor')}"], **{k: [v] for k, v in settings.items()}}
        study = {"study": "v", "task": "lsq", "defaults": {"gamma": 0.5}, "blocks": {"b": block}}
        cells.update(Study(study).cells)
    assert len(ids) == 1 and len(cells) == 1, (ids, cells)
