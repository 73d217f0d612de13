"""bench's layers (issue 29): no module imports one that imports it back, and no import runs back up the layers
(a compressor never imports an algorithm, the runner never the command line, nothing below the front door the
front door). Read from the source: every import statement, those inside functions included (the walk of
tests/test_analysis_imports.py)."""
import ast
from pathlib import Path

from test_analysis_imports import cycles, imports

ROOT = Path(__file__).resolve().parents[1]
# lowest first; a module may import its own layer and those below. A new package of bench is placed here.
LAYERS = [
    ("bench", "bench.errors", "bench.registry", "bench.limits", "bench.files", "bench.yamlio", "bench.specs",
     "bench.cache", "bench.quick_exit"),  # plumbing every layer uses
    ("bench.topology", "bench.compressors", "bench.data", "bench.models"),
    ("bench.comm", "bench.faults"),
    ("bench.algorithms", "bench.tasks"),
    ("bench.run",),  # one run: settings, identity, the loop, its directory
    ("bench.plan", "bench.perf", "bench.pipeline", "bench.track"),  # what starts runs
    ("bench.cli", "bench.__main__"),  # the front door
]


def layer_of(module: str) -> int | None:
    found = None
    for i, group in enumerate(LAYERS):
        for prefix in group:
            if module == prefix or (prefix != "bench" and module.startswith(prefix + ".")):
                found = i
    return found


def test_no_module_of_bench_imports_one_that_imports_it_back_and_none_runs_back_up_the_layers():
    graph = imports(ROOT / "bench")
    assert len(graph) > 100 and "bench.compressors.qsgd" in graph  # the walk sees the package
    assert cycles(graph) == [], "\n".join(" -> ".join(c) for c in cycles(graph))
    assert [m for m in graph if layer_of(m) is None] == []  # every module has a layer
    upward = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if layer_of(d) > layer_of(m))
    assert upward == []


def test_bench_imports_neither_analysis_nor_the_checkouts_benchmarks():
    """bench runs without analysis (analysis reads what bench writes, never the reverse; `bench bisect` asks it in
    a process of its own) and without benchmarks/ (the peers' and probes' scripts, run as programs)."""
    found = []
    for path in sorted((ROOT / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in {"analysis", "benchmarks"}]
    assert found == []
