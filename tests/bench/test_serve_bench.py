"""bench/serve.py runs end to end on a tiny size: every streamed client completes and both
sides' cost per event is reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_serve_bench_reports_both_sides(tmp_path: Path) -> None:
    out = tmp_path / "serve.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "serve.py"),
            *("--clients", "20", "--chunks", "10", "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    assert figures["served"]["complete"] == 20
    assert figures["served"]["events"] == 200
    assert figures["direct"]["events"] == 200
    assert figures["served_cpu_us_per_event"] > 0
    assert "CPU per streamed event" in proc.stdout
