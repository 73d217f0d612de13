"""Names and looks of methods come from the runs (run.json), one map for every figure."""
import json

from analysis import labels
from analysis.load import load_runs
from analysis.summary import summarize
from analysis.tables import table1_markdown
from analysis_fixtures import make_run


def test_a_new_algorithm_is_named_as_its_run_json_says(tmp_path):
    labels.reset()  # a fresh process: nothing known but what the runs say
    make_run(tmp_path / "a", algorithm="allreduce", compressor="none")
    run = make_run(tmp_path / "b", algorithm="squeeze", compressor="sign")
    record = json.loads((run / "run.json").read_text())
    record["algorithm"] = {"name": "squeeze", "label": "DeepSqueeze", "compresses": True}
    (run / "run.json").write_text(json.dumps(record))
    summary = summarize(load_runs(tmp_path), target_rel=0.9)
    assert labels.method_label("squeeze", "sign") == "DeepSqueeze (sign)"
    assert labels.method_label("allreduce", "none") == "all-reduce"  # sends exact models: no compressor
    md = table1_markdown(summary)
    assert md.splitlines()[0] == "| compression | DeepSqueeze |" and "all-reduce: 70.00 (1 seed)" in md


def test_a_run_without_a_description_shows_its_registry_name(tmp_path):
    labels.reset()
    run = make_run(tmp_path / "old", algorithm="choco", compressor="top:0.01")
    record = json.loads((run / "run.json").read_text())
    del record["algorithm"]  # recorded before bench wrote its algorithm's description
    (run / "run.json").write_text(json.dumps(record))
    load_runs(tmp_path)
    assert labels.method_label("choco", "top:0.01") == "choco (top 1%)"


def test_legend_order_puts_exact_methods_first_then_compressors_in_paper_order():
    methods = [labels.method_label(a, c) for a, c in
               [("choco", "sign"), ("dcd", "qsgd:4"), ("allreduce", "none"), ("choco", "qsgd:4"), ("dpsgd", "none")]]
    assert sorted(methods, key=labels.method_sort_key) == [
        "all-reduce", "D-PSGD", "Choco-SGD (QSGD 4-bit)", "Choco-SGD (sign)", "DCD-PSGD (QSGD 4-bit)"]


def test_one_method_has_one_look_whatever_else_a_figure_shows():
    study = [("allreduce", "none"), ("dpsgd", "none"), ("choco", "sign"), ("choco", "top:0.01"),
             ("dcd", "qsgd:4"), ("ecd", "qsgd:4")]
    names = [labels.method_label(a, c) for a, c in study]
    looks = {m: labels.style(m) for m in names}
    # asked again later (another figure of the study, showing fewer methods): the same look
    assert labels.style("Choco-SGD (sign)") == looks["Choco-SGD (sign)"]
    # every method of the study is told apart by colour or marker
    assert len({(str(s["color"]), s["marker"], s["linestyle"]) for s in looks.values()}) == len(names)
    # one hue per algorithm: Choco's two compressors are shades of one colour, with their own markers
    choco = [looks["Choco-SGD (sign)"], looks["Choco-SGD (top 1%)"]]
    assert choco[0]["color"] != choco[1]["color"] and choco[0]["marker"] != choco[1]["marker"]
    assert looks["DCD-PSGD (QSGD 4-bit)"]["marker"] == looks["ECD-PSGD (QSGD 4-bit)"]["marker"]  # same compressor
    assert looks["DCD-PSGD (QSGD 4-bit)"]["color"] != looks["ECD-PSGD (QSGD 4-bit)"]["color"]
    assert looks["all-reduce"]["linestyle"] != looks["D-PSGD"]["linestyle"]


def test_a_method_with_its_own_compression_is_named_bare_but_drawn_as_compressing():
    methods = [labels.method_label(a, c) for a, c in [("allreduce", "none"), ("powersgd", "none"), ("ef", "sign")]]
    assert methods == ["all-reduce", "PowerSGD", "EF-SGD (sign)"]
    assert sorted(methods, key=labels.method_sort_key)[0] == "all-reduce"  # the exact method first
    assert labels.style("PowerSGD")["color"] not in ("#000000", "#7f7f7f", "#4d4d4d", "#b0b0b0")  # not a grey


def test_looks_of_methods_from_another_experiment_leave_the_study_as_it_is():
    labels.reset()
    study = [("allreduce", "none"), ("dpsgd", "none"), ("choco", "sign"), ("choco", "top:0.01"), ("dcd", "qsgd:4")]
    names = [labels.method_label(a, c) for a, c in study]
    before = {m: labels.style(m) for m in names}
    # the consensus figure: Choco-Gossip with compressors the study ran and some it did not, and a new algorithm
    extra = [("choco", "sign"), ("choco", "qsgd:2"), ("choco", "rand:0.01"), ("squeeze", "sign"), ("dpsgd", "none")]
    looks = labels.styles_with(extra)
    assert {m: labels.style(m) for m in names} == before  # nothing added: the study keeps its looks
    assert set(labels._METHODS) == set(names)  # the methods of the study, and only they
    assert looks[("choco", "sign")] == before["choco (sign)"] and looks[("dpsgd", "none")] == before["dpsgd"]
    every = [(str(s["color"]), s["marker"]) for s in list(before.values()) + list(looks.values())[1:4]]
    assert len(set(every)) == len(every)  # the new ones look like no method of the study, nor each other
    assert looks[("choco", "qsgd:2")]["marker"] == labels.style("dcd (QSGD 4-bit)")["marker"]  # the compressor's
    assert looks[("squeeze", "sign")]["color"] not in {str(s["color"]) for s in before.values()}


def test_a_topology_has_one_glyph_and_line_in_every_figure():
    ring = labels.topology_style("ring", ["ring", "torus"])
    assert labels.topology_style("ring", ["complete", "ring", "exponential"]) == ring
    looks = [labels.topology_style(t, ["ring", "torus", "erdos-renyi:0.3", "erdos-renyi:0.5", "star", "grid"])
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
    make_run(tmp_path / "old", algorithm="choco", compressor="sign")  # recorded before bench described it
    for name, spec, said in [("b", "zip:3,fast=true", {"label": "ZIP 3", "family": "zip", "order": [0.5, -3],
                                                        "marker": "*"}),
                             ("c", "top-layer:0.1", {"label": "top 10% a layer", "family": "top", "order": [3, -0.1]})]:
        run = make_run(tmp_path / name, algorithm="choco", compressor=spec)
        record = json.loads((run / "run.json").read_text())
        record["compressor"].update(said)
        (run / "run.json").write_text(json.dumps(record))
    load_runs(tmp_path)
    assert labels.compressor_label("zip:3,fast=true") == "ZIP 3, fast"
    assert labels.method_label("choco", "top-layer:0.1") == "Choco-SGD (top 10% a layer)"
    assert labels.compressor_label("sign") == "sign" and labels.compressor_label("qsgd:4") == "QSGD 4-bit"
    ordered = sorted(["sign", "top-layer:0.1", "qsgd:4", "zip:3,fast=true", "none"], key=labels.compressor_order)
    assert ordered == ["none", "zip:3,fast=true", "qsgd:4", "top-layer:0.1", "sign"]
    assert _look("zip:3,fast=true")[2] == "*"
    assert _look("top-layer:0.1")[2] == _look("top:0.5")[2] == "s"  # its family's marker
    assert _look("sign")[2] == "D"  # the old run: as before


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
