"""bench/mcp_flood.py runs end to end on a tiny flood over legacy SSE (the transport issue
44 measured; Streamable HTTP runs the same code) and reports both clients."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_flood_bench_compares_both_clients(tmp_path: Path) -> None:
    out = tmp_path / "flood.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "mcp_flood.py"),
            *("--count", "30", "--rounds", "1", "--no-warmup", "--transports", "sse"),
            *("--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    row = figures["sse"]
    for client in ("kova", "official"):
        assert row[f"{client}_wall_s"] > 0
        assert row[f"{client}_cpu_us_per_notification"] > 0
    assert row["wall_ratio"] > 0
    assert row["cpu_ratio"] > 0
    assert "sse   flood of 30" in proc.stdout
    assert "http" not in figures
