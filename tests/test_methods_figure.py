"""The `methods` figure: every method against Mbit and modelled time, one row per data partition."""
from analysis.figures import methods as figure
from analysis.load import load_runs
from analysis_fixtures import make_run

METHODS = [("allreduce", "none"), ("ef", "sign"), ("choco", "sign"), ("dgc", "top:0.01"), ("dpsgd", "none")]


def _study(tmp_path):
    for data in ("shuffle", "dirichlet:0.1"):
        for topology in ("ring", "exponential"):
            for algorithm, compressor in METHODS:
                for seed in (0, 1):
                    make_run(tmp_path / data.replace(":", "") / topology / f"{algorithm}-{seed}", algorithm=algorithm,
                             compressor=compressor, topology=topology, data=data, nodes=16, seed=seed,
                             epochs_points=[{"epoch": e, "test_acc": 0.1 + 0.1 * e + 0.01 * seed} for e in range(4)])
    return load_runs(tmp_path).points


def test_centralized_methods_are_drawn_once_and_every_partition_has_its_row(tmp_path, monkeypatch):
    kept = []
    monkeypatch.setattr(figure, "save_figure", lambda fig, out_stem: kept.append(fig) or [])
    points = _study(tmp_path)
    result = figure.draw(tmp_path, points, None, tmp_path / "methods")
    assert not isinstance(result, str), result
    table = figure.curves(points)
    drawn = table.groupby(["data", "method"])["topology"].nunique()
    # all-reduce, EF-SGD and DGC use no graph: one line each; Choco and D-PSGD one per graph
    assert drawn.loc[("shuffle", "all-reduce")] == 1 and drawn.loc[("shuffle", "EF-SGD (sign)")] == 1
    assert drawn.loc[("shuffle", "DGC (top 1%)")] == 1 and drawn.loc[("shuffle", "Choco-SGD (sign)")] == 2
    (fig,) = kept
    axes = fig.axes
    assert len(axes) == 4  # 2 partitions x (bits, time)
    assert axes[0].get_title().startswith("shuffle") and axes[2].get_title().startswith("dirichlet:0.1")
    lines = [line for line in axes[0].get_lines() if len(line.get_xdata())]
    assert len(lines) == 3 * 1 + 2 * 2  # 3 graphless methods once, 2 decentralized ones per graph
    assert all(min(line.get_xdata()) > 0 for line in lines)  # the log bits axis has no 0-bit start
    # medians over the two seeds
    row = table[(table["method"] == "all-reduce") & (table["data"] == "shuffle") & (table["step"] == 30)]
    assert row["acc"].iloc[0] == 100 * (0.1 + 0.3 + 0.005)


def test_two_methods_are_a_figure(tmp_path):
    make_run(tmp_path / "a", algorithm="allreduce", compressor="none")
    make_run(tmp_path / "b", algorithm="choco", compressor="sign")
    paths, caption = figure.draw(tmp_path, load_runs(tmp_path).points, None, tmp_path / "m")
    assert [p.suffix for p in paths] == [".png", ".pdf"] and "mnist1d-mlp" in caption
