"""bench/catalog (no torch) and the implementations agree: the same names in the same order, each implementation
built on its entry, the same parse of every spec and the same line for every bad one; the task catalog holds
bench.tasks' own option defaults and metrics."""
import math

import pytest

from bench.algorithms import ALGORITHMS
from bench.catalog.algorithms import METHODS
from bench.catalog.compressors import SPECS, parse_compressor
from bench.catalog import tasks as catalog_tasks
from bench.compressors import COMPRESSORS, make_compressor
from bench.errors import BenchError
from bench import tasks

ALGORITHM_NAMES = [None, *METHODS.names()]


def test_algorithms_are_their_catalog_entries_plus_the_maths():
    assert ALGORITHMS.names() == METHODS.names()
    for name in METHODS.names():
        assert issubclass(ALGORITHMS.get(name), METHODS.get(name))
        assert ALGORITHMS.get(name).describe() == METHODS.get(name).describe()


def test_operators_are_their_spec_classes_plus_the_encoding():
    assert COMPRESSORS.names() == SPECS.names()
    for name in SPECS.names():
        operator = COMPRESSORS.get(name)
        assert issubclass(operator, SPECS.get(name)) and operator.__module__ == f"bench.compressors.{operator.module}"


@pytest.mark.parametrize("algorithm", ALGORITHM_NAMES)
def test_every_example_spec_parses_to_what_the_operator_is(algorithm):
    for name in COMPRESSORS.names():
        for spec in COMPRESSORS.get(name).examples:
            light, operator = parse_compressor(spec, algorithm), make_compressor(spec, algorithm)
            assert (light.spec, light.unbiased, light.sparse, light.form) == (
                operator.spec, operator.unbiased, operator.sparse, operator.form)
            assert parse_compressor(light.spec).spec == light.spec  # canonical


@pytest.mark.parametrize("spec", ["top:2", "top", "top:x", "top:0.1,k=1", "rand:0", "rand:0.1,unbiased=maybe",
                                  "qsgd", "qsgd:0", "qsgd:17", "qsgd:two", "qsgd:4,bias=true", "sign:1",
                                  "none:3", "none,x=1", "zip:3", "", "consensus", "top:0.1,bad"])
def test_a_bad_spec_is_the_same_line_either_way(spec):
    with pytest.raises(BenchError) as implemented:
        make_compressor(spec, "choco")
    with pytest.raises(BenchError) as parsed:
        parse_compressor(spec, "choco")
    assert str(parsed.value) == str(implemented.value)


def test_the_task_catalog_holds_bench_tasks_options_and_metrics():
    from bench.tasks.supervised import SyntheticTask

    assert catalog_tasks.TASKS.names() == tasks.TASKS.names()
    for name in tasks.TASKS.names():
        task = tasks.TASKS.get(name)
        info = catalog_tasks.TASKS.get(name)
        assert info.options == task.default_options, name
        assert catalog_tasks.task_option_names(name) == tasks.task_option_names(name)
        recorded = [*task.metric_names, *(["train_subopt"] if issubclass(task, SyntheticTask) else [])]
        assert list(info.metrics) == recorded, name


@pytest.mark.parametrize("name", ["consensus", "nope"])
def test_an_unknown_or_retired_task_is_the_same_line_either_way(name):
    with pytest.raises(BenchError) as implemented:
        tasks.TASKS.get(name)
    with pytest.raises(BenchError) as parsed:
        catalog_tasks.TASKS.get(name)
    assert str(parsed.value) == str(implemented.value)


@pytest.mark.parametrize("task, options", [
    ("mnist1d-mlp", {"n_train": 0}), ("mnist1d-mlp", {"hidden": [64, 0]}), ("mnist1d-mlp", {"hidden": 64}),
    ("mnist1d-mlp", {"eval_batch": True}), ("wikitext2-lstm", {"tie_weights": 1}),
    ("wikitext2-lstm", {"dropout": math.inf}), ("wikitext2-lstm", {"dropout": "x"}), ("lsq", {"dim": 2.5})])
def test_a_bad_task_option_value_is_the_same_line_either_way(task, options):
    with pytest.raises(BenchError) as implemented:
        tasks.check_option_values(task, options)
    with pytest.raises(BenchError) as parsed:
        catalog_tasks.check_option_values(task, options)
    assert str(parsed.value) == str(implemented.value)
