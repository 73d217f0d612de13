"""bench/catalog (no torch) and the implementations agree: the same names, each implementation built on its
entry, the same parse of every spec and the same line for every bad one; every task class is filed with its
catalog entry (options, defaults and metrics are written there alone), and a bad task option is the same line at
a DAG's check (the catalog) and at `bench run` (make_task). The operators know no algorithm."""
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.catalog.compressors import SPECS, parse_compressor
from bench.catalog import tasks as catalog_tasks
from bench.compressors import COMPRESSORS, make_compressor
from bench.errors import BenchError
from bench import tasks
from bench.tasks.base import Task, register



def test_operators_are_their_spec_classes_plus_the_encoding():
    assert sorted(COMPRESSORS.names()) == sorted(SPECS.names())
    for name in SPECS.names():
        operator = COMPRESSORS.get(name)
        assert issubclass(operator, SPECS.get(name)) and operator.__module__ == f"bench.compressors.{operator.module}"


@pytest.mark.parametrize("contraction", [False, True])
def test_every_example_spec_parses_to_what_the_operator_is(contraction):
    for name in COMPRESSORS.names():
        for spec in COMPRESSORS.get(name).examples:
            light = parse_compressor(spec, contraction=contraction)
            operator = make_compressor(spec, contraction=contraction)
            assert (light.spec, light.unbiased, light.sparse, light.form, light.looks()) == (
                operator.spec, operator.unbiased, operator.sparse, operator.form, operator.looks())
            assert parse_compressor(light.spec).spec == light.spec  # canonical


@pytest.mark.parametrize("spec", ["top:2", "top", "top:x", "top:0.1,k=1", "rand:0", "rand:0.1,unbiased=maybe",
                                  "qsgd", "qsgd:0", "qsgd:17", "qsgd:two", "qsgd:4,bias=true", "sign:1",
                                  "none:3", "none,x=1", "zip:3", "", "consensus", "top:0.1,bad"])
def test_a_bad_spec_is_the_same_line_either_way(spec):
    with pytest.raises(BenchError) as implemented:
        make_compressor(spec, contraction=True)
    with pytest.raises(BenchError) as parsed:
        parse_compressor(spec, contraction=True)
    assert str(parsed.value) == str(implemented.value)


def test_every_task_class_is_its_catalog_entry_and_every_entry_a_task_class():
    assert tasks.TASKS.names() == catalog_tasks.TASKS.names()  # the same names, in the same order
    for name in tasks.TASKS.names():
        task, info = tasks.TASKS.get(name), catalog_tasks.TASKS.get(name)
        assert task.name == info.name == name
        assert task.default_options is info.options and task.metric_names == info.metrics, name
        assert "vectorize" in catalog_tasks.task_option_names(name)  # every task takes the common options


def test_every_task_declares_examples_of_settings_a_run_takes():
    for name in catalog_tasks.TASKS.names():
        info = catalog_tasks.TASKS.get(name)
        assert info.examples, name
        for example in info.examples:
            assert set(example) <= {"nodes", "batch_size", "data", "task_options"}, name
            options = example.get("task_options", {})
            assert set(options) <= set(catalog_tasks.task_option_names(name)), name
            catalog_tasks.check_option_values(name, options)


@pytest.mark.parametrize("attrs, why", [({"name": "nope"}, "no entry in bench/catalog/tasks.py"),
                                        ({"name": "lsq", "default_options": {"dim": 3}}, "sets its own options"),
                                        ({"name": "lsq", "metric_names": ("test_loss",)}, "sets its own options")])
def test_a_task_class_without_its_entry_or_with_its_own_defaults_is_not_filed(attrs, why):
    with pytest.raises(RuntimeError, match=why):
        register(type("Stray", (Task,), attrs))


@pytest.mark.parametrize("name", ["consensus", "nope"])
def test_an_unknown_or_retired_task_is_the_same_line_either_way(name):
    with pytest.raises(BenchError) as implemented:
        tasks.TASKS.get(name)
    with pytest.raises(BenchError) as parsed:
        catalog_tasks.TASKS.get(name)
    assert str(parsed.value) == str(implemented.value)


@pytest.mark.parametrize("task, options, line", [
    ("mnist1d-mlp", {"n_train": 0}, "task_options.n_train=0 must be a whole number >= 1"),
    ("mnist1d-mlp", {"hidden": [64, 0]}, "task_options.hidden=[64, 0] must be a list of whole numbers >= 1, "
                                         "e.g. [100, 100]"),
    ("mnist1d-mlp", {"hidden": 64}, "task_options.hidden=64 must be a list of whole numbers >= 1, e.g. [100, 100]"),
    ("mnist1d-mlp", {"eval_batch": True}, "task_options.eval_batch=True must be a whole number >= 1"),
    ("wikitext2-lstm", {"tie_weights": 1}, "task_options.tie_weights=1 must be true or false"),
    ("wikitext2-lstm", {"dropout": math.inf}, "task_options.dropout=inf must be a finite number"),
    ("wikitext2-lstm", {"dropout": "x"}, "task_options.dropout='x' must be a finite number"),
    ("lsq", {"dim": 2.5}, "task_options.dim=2.5 must be a whole number >= 1")])
def test_a_bad_task_option_value_is_one_line_at_the_dag_and_at_run(task, options, line):
    with pytest.raises(BenchError) as parsed:
        catalog_tasks.check_option_values(task, options)
    with pytest.raises(BenchError) as built:
        tasks.make_task(task, tasks.TaskSetup(n_workers=2, batch_size=4, data="split", options=options))
    assert str(parsed.value) == str(built.value) == line


@pytest.mark.parametrize("task", ["mnist1d-mlp", "lsq"])
def test_a_bad_vectorize_is_refused_as_the_task_is_built(task):
    with pytest.raises(BenchError, match=r"^task_options.vectorize='maybe' must be true, false or auto$"):
        tasks.make_task(task, tasks.TaskSetup(n_workers=2, batch_size=4, options={"vectorize": "maybe"}))


ROOT = Path(__file__).parent.parent


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_operators_import_no_algorithm_and_the_help_needs_no_torch():
    """The catalog's help lines and names (compressors, topologies, tasks) come without torch; neither the
    catalog of operators nor the operators themselves import an algorithm (the caller says `contraction`)."""
    out = _python("""
        import sys
        from bench.catalog.compressors import help_text
        from bench.catalog.tasks import TASKS
        from bench.topology import help_text as topology_help
        assert help_text() and topology_help() and TASKS.names()
        assert "torch" not in sys.modules, "torch"
        import bench.compressors
        print(sorted(m for m in sys.modules if m.startswith("bench.") and "algorithms" in m))
    """)
    assert out.strip() == "[]"


def test_a_catalog_entry_without_its_operator_module_is_refused_when_the_operators_load():
    out = _python("""
        from dataclasses import dataclass
        from bench.catalog import compressors as catalog

        @catalog.register
        @dataclass(frozen=True)
        class Zip(catalog.OperatorSpec):
            name = "zip"
            module = "zip"
            unbiased = False

        try:
            import bench.compressors
        except RuntimeError as err:
            print(err)
    """)
    assert "'zip' has no operator" in out and "bench/compressors/zip.py" in out


def test_the_help_lists_every_operator_as_it_declares_itself():
    from bench.catalog.compressors import help_text

    text = help_text()
    for name in SPECS.names():
        cls = SPECS.get(name)
        assert f"{cls.usage} ({cls.summary}" in text
        for option in cls.options:
            assert option in text
    assert "\n" not in text


@pytest.mark.parametrize("contraction", ["choco", None, 1])
def test_contraction_is_a_flag_not_an_algorithm_name(contraction):
    with pytest.raises(TypeError, match="contraction must be True or False"):
        make_compressor("qsgd:4", contraction=contraction)
    with pytest.raises(TypeError, match="contraction must be True or False"):
        parse_compressor("qsgd:4", contraction=contraction)


def test_every_task_declares_what_a_cluster_job_of_it_asks():
    """The pipeline's job resources are the task's own (workflow/rules/common.smk reads them): memory, the
    runtime of one run, GPUs and CPUs, positive whole numbers; the image and language tasks ask a GPU."""
    from bench.catalog.tasks import TASKS

    for name in TASKS.names():
        res = TASKS.get(name).resources
        assert set(res) == {"mem_mb", "runtime", "gpus", "cpus"}, name
        assert all(isinstance(v, int) and v >= 0 for v in res.values()) and res["mem_mb"] > 0 and res["cpus"] >= 1
    assert TASKS.get("cifar10-resnet20").resources["gpus"] == 1 and TASKS.get("lsq").resources["gpus"] == 0
