"""A study that asks for a figure its cells cannot give is refused when its DAG is built, naming the figure and
why (issue 25): the requirement of each figure against a study's cells. (That each figure draws from one method up:
tests/test_figure_catalog.py; that the pipeline's figure rules draw and caption: test_pipeline.py's test study.)"""
from pathlib import Path

import pytest
import yaml

from analysis import figures
from analysis.figures.requirements import Grid, cells_frame, unmet
from bench.pipeline import Study


# -- the study's cells, as the DAG build reads them (workflow/rules/common.smk) ---------------------------------
def two_method_study(**changes):
    study = yaml.safe_load((Path(__file__).with_name("two_methods.yaml")).read_text())
    return {**study, **changes}


def grid_of(config):
    S = Study(config)
    return Grid(cells_frame([S.configs[c].to_dict() for c in S.cells]), tune_grid=S.tune_grid, tuned=S.tuned_cells,
                consensus=S.consensus, metrics=S.metrics)


def block(method, topology, nodes, **extra):
    return {"method": method, "topology": [topology], "nodes": nodes, **extra}


def test_the_two_method_study_gives_every_figure_it_asks_for_and_names_the_others():
    """(Their reasons in words: the table below; the speed-up's exact one: the DAG build's refusal.)"""
    config = two_method_study()
    assert unmet(config["figures"], grid_of(config)) == []
    assert [name for name, _ in unmet(figures.FIGURES, grid_of(config))] == ["gap_vs_alpha", "speedup", "faults_effect"]


STRAGGLERS = [{"straggler": {"model": "exponential", "mean": 1.0}}]


@pytest.mark.parametrize("figure, blocks, why", [
    ("gap_vs_nodes", {"a": block(["allreduce/none", "choco/sign"], "ring", [4])}, "node counts"),
    ("gap_vs_nodes", {"a": block(["choco/sign"], "ring", [4, 9])}, "all-reduce"),
    ("accuracy_vs_spectral_gap", {"a": block(["allreduce/none", "choco/sign"], "ring", [4, 9])}, "topologies"),
    ("lag_vs_consensus", {"a": block(["allreduce/none", "choco/sign"], "ring", [4])}, ">= 2 settings"),
    ("noniid_effect", {"a": block(["allreduce/none", "choco/sign"], "ring", [4])}, "data partitions"),
    ("speedup", {"a": block(["allreduce/none"], "ring", [4, 9])}, "n = 1"),
    ("sensitivity", {"a": block(["choco/sign"], "ring", [4])}, "tune: grid"),
    ("consensus", {"a": block(["choco/sign"], "ring", [4])}, "consensus: block"),
    ("accuracy_curves", {}, "training runs"),
    ("faults_effect", {"a": block(["allreduce/none", "choco/sign"], "ring", [4])}, "unreliable network"),
    ("faults_effect", {"a": block(["choco/sign"], "ring", [4], faults=[{"drop": 0.0}, {"down": [
        {"edge": [0, 1], "rounds": [10, 20]}]}])}, "unreliable network"),  # no loss at a rate: nothing to draw
    # a study with losses at a rate, or with stragglers, gives the faults figure
    ("faults_effect", {"a": block(["dpsgd/none", "choco/sign"], "ring", [4], faults=[{"drop": 0.0},
                                                                                     {"drop": 0.05}])}, None),
    ("faults_effect", {"a": block(["dpsgd/none", "choco/sign"], "ring", [4], faults=STRAGGLERS)}, None),
])
def test_a_figure_the_cells_cannot_give_is_named_with_why(figure, blocks, why):
    config = {"study": "s", "task": "lsq" if figure == "speedup" else "mnist1d-mlp", "seeds": [0], "blocks": blocks}
    if figure == "sensitivity":
        config["tune"] = {"grid": {"weight_decay": [0.0, 1e-4]}}  # a grid, but no LR or γ to draw against
    reasons = unmet([figure], grid_of(config))
    assert reasons == [] if why is None else (len(reasons) == 1 and reasons[0][0] == figure and why in reasons[0][1])
