"""bench/asyncio_bridge.py runs end to end on a tiny size and reports every row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bridge_bench_reports_run_and_stream_for_every_mode(tmp_path: Path) -> None:
    out = tmp_path / "bridge.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "asyncio_bridge.py"),
            *("--calls", "3", "--streams", "2", "--chunks", "20", "--rounds", "1"),
            *("--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    assert set(figures) == {"trio", "asyncio", "uvloop"}
    for mode in figures.values():
        for path in ("run", "stream"):
            assert mode[path]["wall"] > 0
            assert mode[path]["cpu"] > 0
    assert "agent.stream via uvloop (per event)" in proc.stdout
