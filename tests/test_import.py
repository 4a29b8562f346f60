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
]


def test_import_kova_does_not_load_heavy_modules() -> None:
    code = (
        "import sys, json, kova, kova.testing, kova.providers\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    output = subprocess.check_output([sys.executable, "-c", code], text=True)
    loaded = set(json.loads(output))
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


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
