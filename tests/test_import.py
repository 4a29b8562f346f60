"""`import kova` stays light: heavy optional dependencies load only when used."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = [
    "boto3",
    "botocore",
    "mcp",
    "opentelemetry",
    "jsonschema",
    "pydantic",
    "anthropic",
    "openai",
    "pathspec",  # the search tool loads it when it meets a .gitignore
]

WEB_STACK = ["httpcore2"]
"""The HTTP stack fetch_webpage pins connections with."""


def test_import_kova_does_not_load_heavy_modules() -> None:
    code = (
        "import sys, json, kova, kova.testing, kova.providers, kova.tools\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    output = subprocess.check_output([sys.executable, "-c", code], text=True)
    loaded = set(json.loads(output))
    assert loaded.isdisjoint(HEAVY + WEB_STACK), sorted(loaded & set(HEAVY + WEB_STACK))


def test_building_a_bedrock_provider_does_not_load_botocore() -> None:
    # Explicit keys: nothing to resolve, so botocore waits for the first signed request.
    code = (
        "import sys, kova.providers.bedrock as b\n"
        "b.BedrockProvider(b.BedrockConfig(region='us-east-1', model_id='m',"
        " access_key_id='A', secret_access_key='S'))\n"
        "print('botocore' in sys.modules)"
    )
    output = subprocess.check_output([sys.executable, "-c", code], text=True)
    assert output.strip() == "False"


def test_file_tools_do_not_load_the_html_stack(tmp_path: object) -> None:
    code = (
        "import sys, json, trio, kova, kova.tools\n"
        "from kova.tools import ToolPolicy, builtin_tools\n"
        "async def main():\n"
        f"    tools = builtin_tools(ToolPolicy(workspace_root={str(tmp_path)!r}), web=True)\n"
        "    for tool in tools[:3]:\n"
        "        await tool.execute({'path': '.'} if tool.name != 'search' else {'pattern': 'x'})\n"
        "trio.run(main)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    output = subprocess.check_output([sys.executable, "-c", code], text=True)
    loaded = set(json.loads(output))
    assert loaded.isdisjoint(WEB_STACK + HEAVY), sorted(loaded & set(WEB_STACK + HEAVY))


def test_an_agent_with_tools_loads_validation_off_the_event_loop() -> None:
    # jsonschema takes a few hundred ms to import; an agent with tools loads it in a worker
    # thread when it opens, so the first tool call never blocks the event loop on it.
    code = (
        "import sys, threading, trio\n"
        "from kova.agent import AgentBuilder\n"
        "from kova.testing import ScriptedProvider, reply_text\n"
        "from kova.tools import tool\n"
        "@tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    'Add.'\n"
        "    return a + b\n"
        "loaded_in = []\n"
        "real_import = __import__\n"
        "def spy(name, *args, **kwargs):\n"
        "    if name == 'jsonschema' and 'jsonschema' not in sys.modules:\n"
        "        loaded_in.append(threading.current_thread() is threading.main_thread())\n"
        "    return real_import(name, *args, **kwargs)\n"
        "import builtins\n"
        "builtins.__import__ = spy\n"
        "async def main():\n"
        "    builder = AgentBuilder().provider(ScriptedProvider([reply_text('x')]))\n"
        "    agent = builder.tool(add).build()\n"
        "    async with agent:\n"
        "        assert 'jsonschema' in sys.modules\n"
        "trio.run(main)\n"
        "print(loaded_in)\n"
    )
    output = subprocess.check_output([sys.executable, "-c", code], text=True)
    assert output.strip() == "[False]"  # imported once, and not on the main (event loop) thread


AGENT_PROGRAM = """
import sys, json
import kova, kova.agent, kova.tools
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

@kova.tool
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

provider = OpenAiCompatibleProvider(OpenAiConfig(model='m', api_key='k'))
agent = kova.AgentBuilder().provider(provider).tool(add).system_prompt('s').build()
import gc, attrs
from kova._record import Record
compiled = sorted(
    f"{cls.__module__}.{cls.__qualname__}"
    for cls in gc.get_objects()
    if isinstance(cls, type) and cls.__module__.startswith("kova")
    and "__attrs_attrs__" in vars(cls) and not issubclass(cls, Record)
)
print(json.dumps({"modules": sorted(sys.modules), "attrs_classes": compiled}))
"""

NOT_IN_AN_AGENT_PROGRAM = [
    # structlog (and the asyncio, pickle and uuid it imports): kova logs through it only
    # when the application configured it, which means the application imported it.
    "structlog",
    "asyncio",
    "pickle",
    "uuid",
    # the metrics collector and TelemetryConfig: only when the program asks for them
    "kova.telemetry._collector",
    "kova.telemetry._metrics",
    "kova.telemetry._subscribers",
    "kova.telemetry._config",
    # the embeddings provider: only when the program embeds
    "kova.providers.openai._embeddings",
]
"""Modules an agent program that does not ask for them must not pay for at import (on top of
what ``import httpx2, trio`` imports): the import-time target of bench/run.py scenario (a)."""


ATTRS_CLASSES_IN_AN_AGENT_PROGRAM = [
    "kova.providers._settings.HttpSettings",
    "kova.providers.openai._config.OpenAiConfig",
]
"""The only attrs classes an agent program builds: attrs compiles each class's methods at
import (about a millisecond apiece), so kova's data model, events, messages and actors are
records (kova/_record.py) or plain classes; a provider config (and HttpSettings, the base
every provider config shares) stays an attrs class (documented: its converters type-check)."""


def _agent_program() -> dict[str, list[str]]:
    output = subprocess.check_output([sys.executable, "-c", AGENT_PROGRAM], text=True)
    result: dict[str, list[str]] = json.loads(output)
    return result


def test_an_agent_program_does_not_import_what_it_does_not_use() -> None:
    loaded = set(_agent_program()["modules"])
    unwanted = {m for m in loaded if m.split(".")[0] in NOT_IN_AN_AGENT_PROGRAM}
    unwanted |= loaded & set(NOT_IN_AN_AGENT_PROGRAM)
    assert not unwanted, sorted(unwanted)


def test_an_agent_program_builds_no_attrs_class_but_its_provider_config() -> None:
    assert _agent_program()["attrs_classes"] == ATTRS_CLASSES_IN_AN_AGENT_PROGRAM
