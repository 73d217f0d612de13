"""The packages' layers (issue 29), read from the source (every import statement, those inside functions
included): in bench and in analysis no module imports one that imports it back; in bench no import runs back up
the layers (a compressor never imports an algorithm, the runner never the command line, nothing below the front
door the front door) and none reaches analysis or benchmarks/; in analysis only the command line's entry imports
the command line (the rest raise analysis.errors' errors and parse with analysis.argparsing)."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# lowest first; a module may import its own layer and those below. A new package of bench is placed here.
LAYERS = [
    ("bench", "bench.errors", "bench.registry", "bench.limits", "bench.files", "bench.yamlio", "bench.specs",
     "bench.cache", "bench.quick_exit", "bench.cpu_meter"),  # plumbing every layer uses
    ("bench.topology", "bench.compressors", "bench.data", "bench.models"),
    ("bench.comm", "bench.faults"),
    ("bench.algorithms", "bench.tasks"),
    ("bench.run",),  # one run: settings, identity, the loop, its directory
    ("bench.plan", "bench.perf", "bench.pipeline", "bench.track"),  # what starts runs
    ("bench.cli", "bench.__main__"),  # the front door
]


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(package: Path) -> dict[str, set[str]]:
    """Module of ``package`` -> every module it imports, of the package or not: ``from a.b import c`` is a.b.c
    when that is a module of the package, else a.b; relative imports are resolved."""
    paths = {module_name(p, package.parent): p for p in package.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        parent = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in _executed(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = parent.split(".")[: len(parent.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base)
        graph[name] = found - {name}
    return graph


def imports(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of its own package it imports."""
    graph = imported(package)
    return {name: found & set(graph) for name, found in graph.items()}


def _executed(tree: ast.AST):
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:``, imports that only a type checker runs."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One path per cycle found by a depth-first walk (a cycle through A and B is reported once)."""
    found, state = [], {}  # state: 1 on the current path, 2 done

    def walk(node, path):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [node])
    return found


def layer_of(module: str) -> int | None:
    found = None
    for i, group in enumerate(LAYERS):
        for prefix in group:
            if module == prefix or (prefix != "bench" and module.startswith(prefix + ".")):
                found = i
    return found


@pytest.mark.parametrize("package, known", [("bench", "bench.compressors.qsgd"),
                                            ("analysis", "analysis.figures.gap_vs_nodes")])
def test_no_module_imports_one_that_imports_it_back(package, known):
    graph = imports(ROOT / package)
    assert len(graph) > 40 and known in graph  # the walk sees the package
    assert cycles(graph) == [], "\n".join(" -> ".join(c) for c in cycles(graph))


def test_no_import_of_bench_runs_back_up_the_layers_or_out_to_analysis_or_benchmarks():
    """bench runs without analysis (analysis reads what bench writes, never the reverse; `bench bisect` asks it in
    a process of its own) and without benchmarks/ (the peers' and probes' scripts, run as programs)."""
    graph = imported(ROOT / "bench")
    assert [m for m in graph if layer_of(m) is None] == []  # every module has a layer
    upward = sorted(f"{m} -> {d}" for m, deps in imports(ROOT / "bench").items() for d in deps
                    if layer_of(d) > layer_of(m))
    assert upward == []
    outward = [f"{m}: {d}" for m, deps in graph.items() for d in deps if d.split(".")[0] in {"analysis", "benchmarks"}]
    assert outward == []


def test_only_the_command_lines_entry_imports_the_command_line():
    users = {name for name, found in imports(ROOT / "analysis").items() if "analysis.cli" in found}
    assert users == {"analysis.__main__"}  # `python -m analysis` runs analysis/cli.py's main
