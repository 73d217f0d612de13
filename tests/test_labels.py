"""Names and looks of methods come from the runs (run.json), one map for every figure."""
import json

from analysis import colours, labels
from analysis.load import load_runs
from analysis_fixtures import make_run


def run_saying(path, part, **said):
    """A run whose run.json says ``said`` of its ``part`` ("algorithm", "compressor"); None: says nothing of it."""
    run = make_run(path, **({"compressor": said.pop("spec")} if "spec" in said else {}),
                   **({"algorithm": said["name"]} if "name" in said else {}))
    record = json.loads((run / "run.json").read_text())
    if said.pop("nothing", False):
        del record[part]  # recorded before bench wrote its description
    else:
        record[part] = {**record[part], **said}
    (run / "run.json").write_text(json.dumps(record))


def test_a_method_is_named_as_its_run_json_says_or_by_its_registry_name(tmp_path):
    labels.reset()  # a fresh process: nothing known but what the runs say
    run_saying(tmp_path / "b", "algorithm", spec="sign", name="squeeze", label="DeepSqueeze", compresses=True)
    run_saying(tmp_path / "old", "algorithm", spec="top:0.01", nothing=True)
    load_runs(tmp_path)
    assert labels.method_label("squeeze", "sign") == "DeepSqueeze (sign)"
    assert labels.method_label("choco", "top:0.01") == "choco (top 1%)"  # no description: the registry's name


def test_legend_order_puts_exact_methods_first_then_compressors_in_paper_order():
    # a method with its own compression (PowerSGD) is named bare but drawn as compressing: after the exact ones
    methods = [labels.method_label(a, c) for a, c in [("choco", "sign"), ("dcd", "qsgd:4"), ("powersgd", "none"),
                                                      ("allreduce", "none"), ("choco", "qsgd:4"), ("dpsgd", "none")]]
    assert sorted(methods, key=labels.method_sort_key) == [
        "all-reduce", "D-PSGD", "Choco-SGD (QSGD 4-bit)", "Choco-SGD (sign)", "DCD-PSGD (QSGD 4-bit)", "PowerSGD"]


def test_looks_of_methods_from_another_experiment_leave_the_study_as_it_is():
    labels.reset()
    study = [("allreduce", "none"), ("dpsgd", "none"), ("choco", "sign"), ("choco", "top:0.01"), ("dcd", "qsgd:4")]
    names = [labels.method_label(a, c) for a, c in study]
    before = {m: labels.style(m) for m in names}
    # the consensus figure: Choco-Gossip with compressors the study ran and some it did not, and a new algorithm
    extra = [("choco", "sign"), ("choco", "qsgd:2"), ("choco", "rand:0.01"), ("squeeze", "sign"), ("dpsgd", "none")]
    looks = labels.styles_with(extra)
    assert {m: labels.style(m) for m in names} == before  # nothing added: the study keeps its looks
    assert looks[("choco", "sign")] == before["choco (sign)"] and looks[("dpsgd", "none")] == before["dpsgd"]
    every = [(str(s["color"]), s["marker"]) for s in list(before.values()) + list(looks.values())[1:4]]
    assert len(set(every)) == len(every)  # the new ones look like no method of the study, nor each other
    assert looks[("choco", "qsgd:2")]["marker"] == labels.style("dcd (QSGD 4-bit)")["marker"]  # the compressor's
    assert looks[("squeeze", "sign")]["color"] not in {str(s["color"]) for s in before.values()}


def test_a_topology_has_one_glyph_and_line_in_every_figure():
    ring = colours.topology_style("ring", ["ring", "torus"])
    assert colours.topology_style("ring", ["complete", "ring", "exponential"]) == ring
    looks = [colours.topology_style(t, ["ring", "torus", "erdos-renyi:0.3", "erdos-renyi:0.5", "star", "grid"])
             for t in ["ring", "torus", "erdos-renyi:0.3", "erdos-renyi:0.5", "star", "grid"]]
    assert len({(s["marker"], str(s["linestyle"])) for s in looks}) == len(looks)


def _look(spec):
    """(label, legend order, marker) analysis gives a compressor spec, as Choco-SGD's."""
    marker = labels.style(labels.method_label("choco", spec))["marker"]
    return labels.compressor_label(spec), labels.compressor_order(spec), marker


def test_what_bench_says_of_its_compressors_is_how_analysis_showed_them_before():
    """Every registered operator's examples (and specs as people write them, options left open): the label,
    legend order and marker learned from run.json equal those of a run recorded before bench said them, so
    figures of old and new results look alike; only operators of the families analysis knew then."""
    from bench.compressors import COMPRESSORS, make_compressor

    specs = [spec for name in COMPRESSORS.names() for spec in COMPRESSORS.get(name).examples]
    specs += [spec.partition(",")[0] for spec in specs if "," in spec]
    checked = 0
    for spec in specs:
        description = json.loads(json.dumps(make_compressor(spec).describe()))
        if description["family"] not in labels._BEFORE:
            continue
        labels.reset()
        before = _look(spec)
        labels.learn_compressor(spec, description)
        assert labels._described(spec) and _look(spec) == before, spec
        checked += 1
    assert checked >= len(labels._BEFORE)


def test_a_new_compressor_is_named_ordered_and_drawn_as_its_run_json_says(tmp_path):
    labels.reset()
    make_run(tmp_path / "a", algorithm="choco", compressor="qsgd:4")
    run_saying(tmp_path / "old", "compressor", spec="sign", nothing=True)  # recorded before bench described it
    run_saying(tmp_path / "b", "compressor", spec="zip:3,fast=true", label="ZIP 3", family="zip", order=[0.5, -3],
               marker="*")
    run_saying(tmp_path / "c", "compressor", spec="top-layer:0.1", label="top 10% a layer", family="top",
               order=[3, -0.1])
    load_runs(tmp_path)
    assert [labels.compressor_label(s) for s in ("zip:3,fast=true", "sign", "qsgd:4")] == [
        "ZIP 3, fast", "sign", "QSGD 4-bit"]
    assert labels.method_label("choco", "top-layer:0.1") == "Choco-SGD (top 10% a layer)"
    ordered = sorted(["sign", "top-layer:0.1", "qsgd:4", "zip:3,fast=true", "none"], key=labels.compressor_order)
    assert ordered == ["none", "zip:3,fast=true", "qsgd:4", "top-layer:0.1", "sign"]
    # markers: its own, its family's, and the old run's as before
    assert [_look(s)[2] for s in ("zip:3,fast=true", "top-layer:0.1", "top:0.5", "sign")] == ["*", "s", "s", "D"]


def test_what_the_analysis_asks_of_a_method_comes_from_its_record():
    """The method drawn beside the exact references in a crowded figure, and the slope its consensus bound
    is fitted against, are what run.json says; runs written before it said so keep Choco's."""
    labels.reset()
    assert labels.headline("choco") and labels.consensus_slope("choco") == -4.0  # old records
    assert not labels.headline("dcd") and labels.consensus_slope("dcd") is None
    labels.learn("mine", {"label": "Mine", "compresses": True, "headline": True, "consensus_slope": -2.0})
    labels.learn("choco", {"label": "Choco-SGD", "compresses": True, "headline": False, "consensus_slope": None})
    assert labels.headline("mine") and labels.consensus_slope("mine") == -2.0
    assert not labels.headline("choco") and labels.consensus_slope("choco") is None
