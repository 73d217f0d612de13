"""`bench compare`: the study it writes is one the pipeline accepts, bad input stops it in one line before anything
is written, and (slow) its dry run and a tiny real comparison go through the real pipeline to a report."""
from __future__ import annotations

from pathlib import Path

import pytest

from analysis.figures.requirements import Grid, cells_frame, unmet
from bench.algorithms import ALGORITHMS
from bench.cli import build_parser, main
from bench.errors import BenchError
from bench.pipeline import compare
from bench.yamlio import read_yaml
from hostile import run_cli

ROOT = Path(__file__).resolve().parents[1]


def parsed(*argv: str):
    args = build_parser().parse_args(["compare", *argv])
    args.argv = ["compare", *argv]
    return args


def test_the_default_baselines_are_the_exact_ones_and_choco_with_each_compressor_used_or_none():
    assert compare.baselines(["powersgd/none"]) == ["allreduce/none", "dpsgd/none"]  # nothing to compress
    assert compare.baselines(["choco/top:0.01"]) == ["allreduce/none", "dpsgd/none"]  # never itself
    assert compare.baselines(["dpsgd/none"]) == ["allreduce/none"]
    config, methods, against = compare.build(parsed("choco/sign", "dpsgd/none", "--against", "none", "--seeds", "3"))
    assert against == [] and list(config["blocks"]) == ["methods"]  # --against none: the methods alone
    assert len(compare.load(config).runs) == 2


def test_a_list_keeps_a_compressors_options_with_its_method_and_names_are_folder_safe():
    assert compare.split_list("allreduce/none, choco/rand:0.01,unbiased=true,dcd/qsgd:8") == [
        "allreduce/none", "choco/rand:0.01,unbiased=true", "dcd/qsgd:8"]
    assert compare.default_name(["choco/top:0.01", "ef/sign"]) == "choco-top001_ef-sign"
    long = compare.default_name([f"choco/top:0.{'1' * 60}", "ef/sign"])
    assert len(long) <= compare.MAX_NAME and compare._NAME.fullmatch(long)


@pytest.mark.parametrize("extra", [[], ["--tune", "--data", "dirichlet:0.5", "--epochs", "2.5"]])
def test_the_study_written_is_one_the_pipeline_accepts_with_a_run_per_method_and_seed(extra, tmp_path, monkeypatch):
    from snakemake.utils import validate

    args = parsed("ecd/qsgd:4", "deepsqueeze/sign", "--seeds", "0,1", "--nodes", "6", *extra)
    config, methods, against = compare.build(args)
    assert against == ["allreduce/none", "dpsgd/none", "choco/qsgd:4", "choco/sign"]
    study = compare.load(config)
    assert len(study.runs) == (len(methods) + len(against)) * 2 == 12
    assert {(s["algorithm"], s["compressor"]) for s in study.cells.values()} == {
        tuple(m.split("/")) for m in methods + against}
    monkeypatch.chdir(tmp_path)
    path = Path("results") / study.name / "study.yaml"
    compare.write(config, path, args.argv)
    again = read_yaml(path, "the study file")  # the suite's own reader: no aliases, plain types
    assert again == config and again["study"] == "compare-ecd-qsgd4_deepsqueeze-sign"
    validate(again, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))  # the pipeline's schema
    grid = Grid(cells_frame([study.configs[c].to_dict() for c in study.cells]), tune_grid=study.tune_grid,
                tuned=study.tuned_cells, metrics=study.metrics)
    assert unmet(again["figures"], grid) == []  # every figure asked for can be drawn from these cells
    if "--tune" in extra:
        assert "sensitivity" in again["figures"] and study.tuned_cells and again["defaults"]["epochs"] == 2.5
        assert again["defaults"]["data"] == "dirichlet:0.5"
    else:
        assert "tune" not in again and again["defaults"]["epochs"] == 15


def test_a_folder_holding_runs_of_another_comparison_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config, _, _ = compare.build(parsed("choco/sign", "--epochs", "3"))
    path = Path("results") / config["study"] / "study.yaml"
    compare.write(config, path, ["compare"])
    (path.parent / "runs" / "choco-sign_ring8_s0").mkdir(parents=True)
    compare.write(config, path, ["compare"])  # the same comparison again: it carries on
    other, _, _ = compare.build(parsed("choco/sign", "--epochs", "5"))
    with pytest.raises(BenchError, match="defaults.*--name"):
        compare.write(other, path, ["compare"])
    assert read_yaml(path, "the study file") == config


def _compare(monkeypatch, capfd, tmp_path, *argv: str) -> tuple[int, str]:
    """`bench compare ARGV` in this process (the pipeline in its own, as always), in ``tmp_path`` with nothing
    activated: its exit status and what it and the pipeline printed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    status, out, err = run_cli(main, ["compare", *argv], capfd)
    return status, out + err


@pytest.mark.slow  # about 4 s: the DAG of a real study
def test_a_dry_run_builds_the_pipelines_dag_and_trains_nothing(tmp_path, monkeypatch, capfd):
    status, said = _compare(monkeypatch, capfd, tmp_path, "deepsqueeze/sign", "--tune", "--dry-run")
    assert status == 0, said[-3000:]
    assert "This was a dry-run" in said and "--snakefile" in said and " -n" in said
    path = "results/compare-deepsqueeze-sign/study.yaml"
    assert f"the study file is {path} (12 runs)" in said
    assert "4 methods x 3 seeds = 12 runs, after" in said  # and its tuning trials
    assert (tmp_path / path).is_file() and not (tmp_path / "results/compare-deepsqueeze-sign/runs").exists()


@pytest.mark.slow  # two runs of half an epoch, figures and report
def test_a_tiny_comparison_runs_end_to_end_to_a_report_naming_each_method(tmp_path, monkeypatch, capfd):
    status, said = _compare(monkeypatch, capfd, tmp_path, "deepsqueeze/sign", "--against", "allreduce/none",
                            "--seeds", "0", "--epochs", "0.5", "--nodes", "4", "--name", "tiny")
    assert status == 0, said[-3000:]
    out = tmp_path / "results" / "compare-tiny"
    assert ("compare: the report is results/compare-tiny/report.html (and report.md); figures in "
            "results/compare-tiny/figures/") in said
    report = (out / "report.md").read_text()
    assert "| rank " in said and "**(yours)**" in said and report.index("| rank ") < report.index("## Per cell")
    assert (out / "report.html").is_file() and (out / "figures" / "methods.png").is_file()
    for algorithm in ("deepsqueeze", "allreduce"):
        assert ALGORITHMS.get(algorithm).label in report, algorithm
    assert sorted(p.name for p in (out / "runs").iterdir() if not p.name.startswith(".")) == [
        "allreduce-none_ring4_s0", "deepsqueeze-sign_ring4_s0"]
