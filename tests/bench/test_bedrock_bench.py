"""The Bedrock ConverseStream benchmark runs end to end on a tiny size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bedrock.py"


def test_tiny_bedrock_run(tmp_path: Path) -> None:
    pytest.importorskip("boto3")
    out = tmp_path / "bedrock.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--events",
            "20",
            "--streams",
            "1",
            "--rounds",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "kova / boto3 thread per event" in proc.stdout
    rates = json.loads(out.read_text())["events_per_second"]
    assert set(rates) == {"kova (trio)", "boto3, thread per event", "boto3, one thread per stream"}
