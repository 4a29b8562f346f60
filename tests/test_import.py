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

WEB_STACK = ["bs4", "markdownify", "httpcore2"]
"""The web extra's HTML stack, and the HTTP stack fetch_webpage pins connections with."""


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
