"""kova's modules form no import circle, and the lower layers import nothing above them.

Every import counts, at module level or inside a function (a lazy import is still a
dependency), except those under ``if TYPE_CHECKING:`` (one more test counts those too: no
circle either way). A module's import of its own parent
packages is not an edge: Python initialises a package before its modules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

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


# -- private doors -------------------------------------------------------------------------

OWNERS = {"Agent": "kova.agent._agent", "Turn": "kova.agent._turn"}
"""Classes whose private names only their own module may use."""


def _private_names(module: str, class_name: str) -> set[str]:
    """The single-underscore names a class defines: its methods and slots, and the
    attributes its methods set on ``self``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == class_name):
            continue
        for item in ast.walk(node):
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(item.name)
            elif isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name):
                if item.value.id == "self":
                    names.add(item.attr)
            elif isinstance(item, ast.Constant) and isinstance(item.value, str):
                names.add(item.value)  # __slots__ entries
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


PRIVATE = {owner: _private_names(module, owner) for owner, module in OWNERS.items()}


def _private_uses(source: str) -> list[tuple[int, str]]:
    """``x._name`` for a private name of Agent or Turn, on anything but ``self``/``cls``
    (within their own modules the test does not look)."""
    wanted = set().union(*PRIVATE.values())
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or node.attr not in wanted:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_private_names_are_read() -> None:
    assert {"_config", "_context"} <= PRIVATE["Agent"]
    assert {"_limits", "_phase", "_fail"} <= PRIVATE["Turn"]


def test_nothing_outside_agent_and_turn_uses_their_private_names() -> None:
    """Drivers reach an agent through its driver context and a turn through its public
    protocol (issue 41): no ``agent._x`` or ``turn._x`` outside their own modules (any
    receiver but ``self``: ``self._agent._x`` counts too)."""
    owners = set(OWNERS.values())
    used = {
        module: uses
        for module, path in MODULES.items()
        if module not in owners and (uses := _private_uses(path.read_text(encoding="utf-8")))
    }
    assert used == {}


def test_a_private_door_is_found() -> None:
    source = "def f(agent, turn, other):\n    agent._context\n    self._turn._limits\n    other.x\n"
    assert [text for _, text in _private_uses(source)] == ["agent._context", "self._turn._limits"]


# -- size of the loop ----------------------------------------------------------------------


def _functions(module: str) -> dict[str, int]:
    """Each function's length in lines: from its ``def`` to its last line, without its
    docstring (prose, not code)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    lengths: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            size = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                assert first.end_lineno is not None
                size -= first.end_lineno - first.lineno + 1
            lengths[f"{module}.{node.name}@{node.lineno}"] = size
    return lengths


def test_no_function_in_the_agent_package_is_over_100_lines() -> None:
    lengths: dict[str, int] = {}
    for module in MODULES:
        if module.startswith("kova.agent."):
            lengths.update(_functions(module))
    assert len(lengths) > 100
    assert {name: size for name, size in lengths.items() if size > 100} == {}


def test_the_in_process_loop_fits_on_a_screen() -> None:
    (size,) = [size for name, size in _functions("kova.agent._loop").items() if ".drive@" in name]
    assert size <= 60


# -- the pure core loads no I/O ------------------------------------------------------------


@pytest.mark.parametrize("module", ["kova.agent._turn", "kova.temporal._workflow"])
def test_the_pure_modules_load_neither_trio_nor_httpx2(module: str) -> None:
    """The turn core (and the Temporal workflow, which runs outside Temporal's sandbox) is pure:
    importing it, in a fresh interpreter, loads no event loop and no HTTP client."""
    code = (
        "import importlib, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(sorted(name for name in ('trio', 'httpx2') if name in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]", done.stderr


# -- circles through typing-only imports ---------------------------------------------------


def test_no_import_circles_counting_typing_only_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    """No circle either when ``if TYPE_CHECKING:`` imports count too (issue 41): a module
    that only names another's types in its signatures still depends on it. Gone: the agent
    and its helpers, kova.durable and kova.sessions (the agent names what it needs of an
    agent, a journal and a session by protocols, ``kova.agent._seams``; the journaled
    driver its journal and claim, the session's streamed turns their session; the shared
    budget takes the SQL store base), ``_nesting`` <-> ``_tool_pool`` (the nest types its
    approval policy by a protocol), ``_context`` <-> ``_events`` (``Compaction`` lives
    beside ``AgentResponse``), ``providers.openai`` (``openai_auth`` types its config by a
    protocol), ``mcp._stdio`` <-> ``mcp._transports`` (``SessionWatch`` in ``_wire``, the
    child by a protocol), ``serve`` (``Served`` in ``_turns``) and ``web``
    (``open_event_server`` beside the routes it serves)."""
    monkeypatch.setattr(sys.modules[__name__], "_type_checking_nodes", lambda tree: set())
    graph = _graph()
    assert graph["kova.agent._agent"] > GRAPH["kova.agent._agent"]  # typing imports counted
    assert _circles(graph) == []


LONG_FUNCTIONS: dict[str, int] = {}
"""Functions still over 100 lines, at most as long as this (a ratchet: it only shrinks; the
last one, kova.testing._sessions._check at 306 lines, is a function per group of rules now)."""


def test_no_function_in_kova_grows_over_100_lines() -> None:
    lengths: dict[str, int] = {}
    for module in MODULES:
        lengths.update(_functions(module))
    assert len(lengths) > 1000
    over = {name.partition("@")[0]: size for name, size in lengths.items() if size > 100}
    grown = {name: size for name, size in over.items() if size > LONG_FUNCTIONS.get(name, 100)}
    assert grown == {}, f"functions over 100 lines (split them): {grown}"
