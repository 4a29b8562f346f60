"""kova's modules form no import circle, and the lower layers import nothing above them.

Every import counts, at module level or inside a function (a lazy import is still a
dependency), except those under ``if TYPE_CHECKING:``. A module's import of its own parent
packages is not an edge: Python initialises a package before its modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kova

ROOT = Path(kova.__file__).parent

BASE = {
    "kova._errors",
    "kova._json",
    "kova._log",
    "kova._messages",
    "kova._models",
    "kova._record",
    "kova._requests",
    "kova._responses",
    "kova._secret",
    "kova._stream_events",
}
"""The data model and what everything may use: imports nothing of kova above itself."""


def _modules() -> dict[str, Path]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(sub) for statement in node.body for sub in ast.walk(statement))
    return hidden


def _imported(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    # `from package import module` imports the module too.
    return [target, *(f"{target}.{alias.name}" for alias in node.names)]


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        hidden = _type_checking_nodes(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in hidden:
                continue
            for name in _imported(module, node, path.name == "__init__.py"):
                parts = name.split(".")
                for end in range(1, len(parts) + 1):
                    target = ".".join(parts[:end])
                    if target in MODULES and not (module + ".").startswith(target + "."):
                        edges.add(target)
        edges.discard(module)
        graph[module] = edges
    return graph


GRAPH = _graph()


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _imports_of(prefix: str) -> set[str]:
    inside = {m for m in GRAPH if m == prefix or m.startswith(prefix + ".")}
    return {target for module in inside for target in GRAPH[module]} - inside


def test_the_graph_is_read() -> None:
    assert "kova.agent._agent" in GRAPH
    assert "kova.actors" in GRAPH["kova.agent._agent"] or any(
        target.startswith("kova.actors") for target in GRAPH["kova.agent._agent"]
    )


def test_no_import_circles() -> None:
    assert _circles(GRAPH) == []


def test_the_circle_finder_finds_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_the_base_layer_imports_only_itself() -> None:
    for module in BASE:
        assert GRAPH[module] <= BASE, (module, sorted(GRAPH[module] - BASE))


def test_the_event_stream_imports_only_the_base_layer() -> None:
    assert _imports_of("kova._observe") <= BASE


def test_the_actor_runtime_imports_nothing_above_itself() -> None:
    assert _imports_of("kova.actors") <= BASE | {"kova._observe"}
