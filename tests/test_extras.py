"""A part of kova used without its extra says so in one line, naming the extra, from Python
and from the CLI alike. Each case runs in a fresh interpreter where the extra's module is
missing (a ``None`` entry in ``sys.modules``, or an import hook that refuses it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_BLOCK_WITH_NONE = "import sys\nfor name in {modules!r}:\n    sys.modules[name] = None\n"
_BLOCK_WITH_HOOK = """
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {modules!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Refuse())
"""


def _run(
    code: str, modules: tuple[str, ...], *, hook: bool = False
) -> subprocess.CompletedProcess[str]:
    block = (_BLOCK_WITH_HOOK if hook else _BLOCK_WITH_NONE).format(modules=modules)
    return subprocess.run(
        [sys.executable, "-c", block + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "OPENAI_API_KEY": "k"},
    )


_IMPORT = """
try:
    {statement}
except ImportError as exc:
    print(type(exc).__name__, exc.name, exc, sep="|")
"""


@pytest.mark.parametrize("hook", [False, True], ids=["sys.modules", "meta_path"])
@pytest.mark.parametrize(
    ("statement", "modules", "feature", "extra"),
    [
        ("import kova.mcp", ("mcp", "mcp_types"), "kova.mcp", "mcp"),
        ("import kova.mcp", ("mcp_types",), "kova.mcp", "mcp"),
        (
            "from kova.providers.bedrock import BedrockProvider",
            ("botocore",),
            "the Bedrock provider",
            "bedrock",
        ),
        ("import kova.web", ("trio_websocket",), "kova.web", "ws"),
        ("import kova.telemetry.otel", ("opentelemetry",), "kova.telemetry.otel", "otel"),
        ("import kova.temporal", ("temporalio",), "kova.temporal", "temporal"),
        ("import kova.serve", ("starlette",), "kova.serve", "serve"),
        ("import kova.serve", ("hypercorn",), "kova.serve", "serve"),
        (
            "from kova.sessions import PostgresSessionStore",
            ("psycopg", "psycopg_pool"),
            "kova.sessions.PostgresSessionStore",
            "postgres",
        ),
        (
            "from kova.sessions import PostgresSessionStore",
            ("psycopg_pool",),
            "kova.sessions.PostgresSessionStore",
            "postgres",
        ),
    ],
    ids=[
        "mcp",
        "mcp_types",
        "bedrock",
        "web",
        "otel",
        "temporal",
        "serve",
        "serve-hypercorn",
        "postgres",
        "psycopg_pool",
    ],
)
def test_importing_a_part_without_its_extra_names_the_extra(
    statement: str, modules: tuple[str, ...], feature: str, extra: str, hook: bool
) -> None:
    result = _run(_IMPORT.format(statement=statement), modules, hook=hook)
    assert result.returncode == 0, result.stderr
    kind, missing, message = result.stdout.strip().split("|")
    assert kind == "MissingExtraError"  # a ModuleNotFoundError, so `except ImportError` works
    assert missing == modules[0]
    assert message == (
        f"{feature} needs kova's {extra!r} extra: pip install 'kova-sdk[{extra}]' "
        f"(from a clone: pip install './kova[{extra}]'); the module {modules[0]!r} is missing"
    )


_CLI = """
import sys
from kova.cli import main
sys.exit(main({argv!r}))
"""


@pytest.mark.parametrize(
    ("argv", "modules", "start"),
    [
        (
            ["chat", "--mcp", "npx server"],
            ("mcp",),
            "kova: kova chat --mcp needs kova's 'mcp' extra",
        ),
        (
            ["mcp", "tools", "--", "npx", "server"],
            ("mcp",),
            "kova: kova.mcp needs kova's 'mcp' extra",
        ),
        (
            ["chat", "--provider", "bedrock"],
            ("botocore",),
            "kova: the Bedrock provider needs kova's 'bedrock' extra",
        ),
        (
            ["serve", "--demo", "--port", "0"],
            ("trio_websocket",),
            "kova: kova serve needs kova's 'ws' extra",
        ),
        (
            ["serve", "--provider", "openai"],
            ("trio_websocket",),
            "kova: kova serve needs kova's 'ws' extra",
        ),
    ],
    ids=["chat-mcp", "mcp-tools", "chat-bedrock", "serve-demo", "serve"],
)
def test_the_cli_says_which_extra_is_missing_in_one_line(
    argv: list[str], modules: tuple[str, ...], start: str
) -> None:
    result = _run(_CLI.format(argv=argv), modules)
    assert result.returncode == 2
    assert result.stdout == ""  # kova serve printed no address it could not serve
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(start)
    assert "pip install 'kova-sdk[" in lines[0]
