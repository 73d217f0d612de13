"""The analysis package's rooms: no module imports one that imports it back (read from the source, every
import statement, those inside functions included), and only the command line's entry imports the command
line: the rest raise analysis.errors' errors and parse with analysis.argparsing."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "analysis"
CLI_USERS = {"analysis.__main__"}  # `python -m analysis` runs analysis/cli.py's main


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports: ``from a.b import c`` is a.b.c when that is a
    module, else a.b; relative imports are resolved."""
    paths = {module_name(p, package.parent): p for p in package.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in _executed(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


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


def test_no_module_of_analysis_imports_one_that_imports_it_back():
    graph = imports()
    assert len(graph) > 40 and "analysis.figures.gap_vs_nodes" in graph
    assert cycles(graph) == [], "\n".join(" -> ".join(c) for c in cycles(graph))


def test_only_the_command_lines_entry_imports_the_command_line():
    graph = imports()
    users = {name for name, imported in graph.items() if "analysis.cli" in imported}
    assert users == CLI_USERS

