"""Issue 26: one YAML reader with the same refusals everywhere (aliases, tags, depth, repeated keys), cell and run
names that are bounded and one per training, and a study too large to build its DAG warned about or refused."""
import glob
import itertools
from pathlib import Path

import pytest
import yaml

from bench.errors import BenchError
from bench.pipeline import Study, names, size
from bench.pipeline.scale import sized
from bench.yamlio import MAX_DEPTH, check_plain, load_yaml
from hostile import bomb, dag_refused

ROOT = Path(__file__).resolve().parents[1]


def study_text(defaults: str = "{epochs: 1}") -> str:
    return (f"study: y\ntask: lsq\nseeds: [0]\ndefaults: {defaults}\n"
            "blocks: {b: {method: [choco/sign], topology: [ring], nodes: [4]}}\n")


# -- 1. one loader, the same refusals ---------------------------------------------------------------------
DEEP = "".join("  " * i + "a:\n" for i in range(MAX_DEPTH + 1)) + "  " * (MAX_DEPTH + 1) + "b: 1\n"
TAGS = ("tag {}", "(line 1)", "allowed tags: !!bool")


@pytest.mark.parametrize("text, words", [
    *[(f"a: {tag} {value}", [w.format(tag) for w in TAGS]) for tag, value in [
        ("!!python/object/apply:os.system", "['true']"), ("!!python/name:os.system", ""), ("!local", "1"),
        ("!!binary", "aGk="), ("!!set", "{x: null}"), ("!!timestamp", "2024-01-01")]],
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), [f"nested more than {MAX_DEPTH} levels"]),
    ("[" * 200_000, [f"nested more than {MAX_DEPTH} levels"]),  # unclosed: refused at the 65th level, not parsed
    (DEEP, [f"nested more than {MAX_DEPTH} levels"]),
    ("a: &x 1\nb: 2\n", ["anchor &x", "(line 1)", "write the value out"]),
    ("lr: 0.1\nepochs: 2\nlr: 0.2\n", ["key 'lr' twice", "(line 3)"]),
    ("a: " + "x" * (1 << 21), ["2,097,155 characters"]),
])
def test_tags_deep_nesting_anchors_repeated_keys_and_oversized_texts_are_refused(text, words):
    with pytest.raises(BenchError) as err:
        load_yaml(text, "f.yaml")
    message = str(err.value)
    assert "\n" not in message and message.startswith("f.yaml ") and all(w in message for w in words), message


def test_the_plain_tags_a_merge_and_nesting_up_to_the_limit_are_read():
    assert load_yaml("a: !!str 1\nb: !!float 2\nc: ! x\nd: !!null ''\n", "f.yaml") == \
        {"a": "1", "b": 2.0, "c": "x", "d": None}
    assert load_yaml("<<: {lr: 0.1}\nepochs: 2\n", "f.yaml") == {"lr": 0.1, "epochs": 2}  # a merge, no alias
    value = load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f.yaml")
    for _ in range(MAX_DEPTH - 1):
        (value,) = value
    assert value == []


def test_every_yaml_file_of_the_suite_reads_as_before():
    files = [p for p in glob.glob(str(ROOT / "**" / "*.yaml"), recursive=True)
             if "/.venv/" not in p and "/results/" not in p and "/.snakemake/" not in p]
    assert len(files) > 15
    for path in files:
        text = Path(path).read_text()
        assert load_yaml(text, path) == yaml.safe_load(text), path


def test_data_loaded_elsewhere_is_held_to_the_same_rules():
    # Snakemake loads --configfile itself: the aliases come back as one object reached many times
    loaded = yaml.load(f"x: {bomb()}", Loader=yaml.FullLoader)
    with pytest.raises(BenchError, match=r"cfg repeats a value at x\[1\]\[0\] \(a YAML alias\)"):
        check_plain(loaded, "cfg")  # at the first repeat: x[0] is visited whole, x[1][0] is its copy
    with pytest.raises(BenchError, match="tuple"):
        check_plain({"a": (1, 2)}, "cfg")
    deep: list = []
    for _ in range(MAX_DEPTH):
        deep = [deep]
    with pytest.raises(BenchError, match="nested more than"):
        check_plain({"a": deep}, "cfg")
    check_plain(yaml.safe_load((ROOT / "config" / "table1.yaml").read_text()), "cfg")


# -- 2. names: one per training, bounded -------------------------------------------------------------------
BASE = {"study": "v", "task": "lsq", "seeds": [0, 1], "defaults": {"epochs": 1}}


TOPOLOGIES = ["ring", "torus", "erdos-renyi:0.5", "erdos-renyi:0.51", "erdos-renyi:0.05", "erdos-renyi:0.516",
              "erdos-renyi:1", "random-regular:4", "random-regular:41", "file:edges.txt", "file:edges.txt5",
              "file:e/dges.txt", "file:edg-es.txt"]


def test_every_combination_of_look_alike_settings_has_a_name_of_its_own():
    combos = list(itertools.product(
        ["choco", "dcd"], ["none", "top:0.01", "top:0.011", "qsgd:4", "qsgd:41", "rand:0.1,unbiased=true"],
        TOPOLOGIES, [1, 6, 16, 56, 516], [None, "shuffle", "dirichlet:0.1", "dirichlet:0.11", "dirichlet0.1"],
        [None, 0.1, "0.1,2", [0.1, 2]]))
    cells = set()
    for algorithm, compressor, topology, nodes, data, lr in combos:
        settings = {"algorithm": algorithm, "compressor": compressor, "topology": topology, "nodes": nodes}
        settings.update({k: v for k, v in (("data", data), ("lr", lr)) if v is not None})
        name = names.cell_name(settings)
        assert len(name.encode()) <= names.MAX_NAME and "/" not in name and ":" not in name
        cells.add(name)
    assert len(cells) == len(combos)
    # before, erdos-renyi:0.51 at n=6 silently replaced erdos-renyi:0.5 at n=16 (both in one study):
    # the spelling that reads back one way keeps the name it always had, the other gets ~ and a digest
    plain = {"algorithm": "dpsgd", "compressor": "none", "topology": "erdos-renyi:0.5", "nodes": 16}
    assert names.cell_name(plain) == "dpsgd-none_erdos-renyi0.516"
    assert names.cell_name({**plain, "topology": "erdos-renyi:0.51", "nodes": 6}).startswith(
        "dpsgd-none_erdos-renyi0.516~")


def test_the_studies_of_this_checkout_keep_their_names():
    studies = 0
    for path in sorted((ROOT / "config").glob("*.yaml")):
        config = yaml.safe_load(path.read_text())
        if "blocks" not in config:
            continue
        for scale in ("cpu", "gpu"):
            study = Study({**config, "scale": scale})
            for cell, settings in study.cells.items():
                if any(isinstance(v, dict) for v in settings.values()):  # a mapping (faults) cannot read back:
                    spelt = names.spelling(settings)  # its spelling, then ~ and the digest of its settings
                    assert cell == names.bounded(spelt, settings, keep=False) and not names.reads_back(settings)
                    continue
                assert cell == names.spelling(settings), (path.name, cell)
            studies += 1
    assert studies > 20
    spelt = set(Study(yaml.safe_load((ROOT / "config" / "config.yaml").read_text())).runs)
    assert {"choco-sign_erdos-renyi0.316_s0", "choco-top0.01_ring8_s0"} <= spelt


def test_long_names_are_cut_with_a_digest_and_fit_the_file_system(tmp_path):
    # before: a 300-character data_root gave a 330-byte run folder, refused only when the run started
    long = "x" * 300
    config = {**BASE, "seeds": [0, 2**31 - 1], "blocks": {"b": {
        "method": ["choco/sign"], "topology": ["ring"], "nodes": [4], "data_root": [long + "a", long + "b"]}}}
    study = Study(config)
    assert len(study.cells) == 2 and len(study.runs) == 4
    for cell in study.cells:
        assert len(cell.encode()) == names.MAX_NAME and names.MARK in cell
        results = tmp_path / "results" / "v"
        # every folder and file a cell or run gets, temporary and set-aside names included
        run = f"{cell}_s{2**31 - 1}"
        logs = tmp_path / "logs" / "v"
        for path in [results / "runs" / run / "run.json", results / "runs" / ".cells" / f"{cell}.done",
                     results / "tuned" / f".{cell}.yaml.4194304.0123abcd.tmp", results / "tune" / cell / "lr=0.1_s0",
                     results / "runs" / ".stale" / f"{run}-0123456789.12", logs / "runs" / f"{run}.log",
                     logs / "tune" / f"{cell}.select.log"]:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    assert {settings["data_root"] for settings in study.cells.values()} == {long + "a", long + "b"}


def test_a_repeated_name_stops_the_study_with_one_line(monkeypatch):
    # names are one per training by construction; the study still refuses two cells of one name
    from bench.pipeline import study as study_module

    monkeypatch.setattr(study_module, "cell_name", lambda settings: "same")
    config = {**BASE, "blocks": {"a": {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4]},
                                 "b": {"method": ["dpsgd/none"], "topology": ["ring"], "nodes": [4]}}}
    with pytest.raises(BenchError) as err:
        Study(config)
    message = str(err.value)
    assert "\n" not in message and "'same'" in message and "block 'a': " in message and "block 'b': " in message


def test_consensus_methods_get_a_folder_each():
    assert names.keyed(["exact", "qsgd:4", "top:0.1"], "m") == {"exact": "exact", "qsgd4": "qsgd:4",
                                                                  "top0.1": "top:0.1"}
    folders = names.keyed(["qsgd:4", "qsgd4", "top:0.1"], "m")
    assert len(folders) == 3 and "qsgd4" in folders and folders["qsgd4"] == "qsgd:4"


def test_a_study_name_is_a_folder_name():
    with pytest.raises(BenchError, match="study name 'x{101}' must be 1 to 100"):
        Study({**BASE, "study": "x" * 101, "blocks": {}})
    with pytest.raises(BenchError, match=r"study name '\.\./up'"):
        Study({**BASE, "study": "../up", "blocks": {}})


# -- 3. size -------------------------------------------------------------------------------------------------
def huge(cells_per_knob: int, **top) -> dict:
    values = [round(0.001 * (i + 1), 6) for i in range(cells_per_knob)]
    return {**BASE, **top, "blocks": {
        "grid": {"method": ["dpsgd/none"], "topology": ["ring"], "nodes": [4], "lr": values,
                 "weight_decay": list(values)},  # a copy: one list twice would be dumped as an alias
        "one": {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4]}}}


def test_the_size_is_counted_from_the_lists_alone():
    config = huge(1000, tune={"grid": {"lr": [0.1, 0.2], "momentum": [0.0, 0.5, 0.9]}, "seeds": [0, 1]})
    counted = size.count(sized(config, "cpu"))
    assert counted.cells == 10**6 + 1 and counted.runs == 2 * (10**6 + 1)
    # the grid block fixes lr: 3 momenta x 2 tuning seeds; the other searches 2 x 3 x 2
    assert counted.trials == 10**6 * 6 + 12 and counted.total == counted.runs + counted.trials


def test_a_huge_study_is_refused_before_it_is_expanded(monkeypatch):
    import bench.pipeline.study as study_module

    def expanded(block):
        raise AssertionError("the study was expanded before its size was checked")

    monkeypatch.setattr(study_module, "expand_block", expanded)  # expanding it would take over an hour
    with pytest.raises(BenchError) as err:
        Study(huge(1000))
    message = str(err.value)
    assert "\n" not in message and message.startswith("study 'v' at scale=cpu: 2,000,002 runs")
    assert "allow_large: true" in message and "min" in message and "GB" in message


def test_a_large_study_is_warned_about_in_one_line_and_a_huge_one_is_allowed_when_it_says_so(monkeypatch, capsys):
    assert size.check(size.count(sized(huge(10, seeds=[0]), "cpu")), False) is None  # 101 runs: quiet
    warning = size.check(size.count(sized(huge(150), "cpu")), False)  # 2 x 22,501 runs
    assert warning.startswith("45,002 runs (") and "about 3 min" in warning and "15,000" in warning
    assert "2,000,002 runs" in size.check(size.count(sized(huge(1000), "cpu")), True)
    assert size.allows_large({"allow_large": True}) and size.allows_large({"allow_large": "true"})
    assert not size.allows_large({}) and not size.allows_large({"allow_large": False})
    # the study says it in one line on stderr, with the count
    monkeypatch.setattr(size, "WARN_RUNS", 10)
    Study(huge(3))  # 2 x 10 runs
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: study 'v' at scale=cpu spells out 20 runs (10 cells") and "s and" in line


# -- 4. the pipeline's DAG build, in this process (the command line's form of a refusal: tests/test_pipeline.py)
ONE = {**BASE, "blocks": {"b": {"method": ["choco/sign"], "topology": ["ring"], "nodes": [4]}}}


@pytest.mark.slow
@pytest.mark.parametrize("config,words", [  # Study's refusals end here as the huge one's (theirs: BAD_STUDIES)
    # the schema does not list the figures: the DAG checks them against analysis/figures
    ({**ONE, "figures": ["acuracy_curves"]}, ["unknown figure", "'acuracy_curves'", "accuracy_curves"]),
    ({**yaml.safe_load((ROOT / "tests" / "two_methods.yaml").read_text()), "figures": ["accuracy_curves", "speedup"]},
     ["error: study 'two-methods' at scale=cpu: figure 'speedup' cannot be drawn from its cells: needs runs with "
      "train_subopt (the lsq and logreg tasks record it)"]),  # a known figure the cells cannot give
    # before: `snakemake -n` was still validating the expanded tree after a minute
    (study_text(f"{{epochs: 1, data_root: {bomb()}}}"),
     ["alias", "the study's config repeats a value at defaults.data_root[1][0]"]),
    (huge(1000), ["allow_large", "2,000,002 runs"]),
], ids=["figure", "figure-unmet", "alias-bomb", "huge"])
def test_a_dag_build_stops_at_once_with_one_line(config, words, tmp_path):
    line = dag_refused(config, tmp_path, *words)  # one line holding every word (hostile.dag_refused asserts it)
    assert line.startswith("error: ") and all(str(word) in line for word in words), line
    assert not (tmp_path / "results").exists()  # nothing run

