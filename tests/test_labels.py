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
