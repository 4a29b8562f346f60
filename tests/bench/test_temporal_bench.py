"""bench/temporal.py runs end to end on a tiny size: the in-process row and a worker row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_temporal_bench_reports_in_process_and_worker_rows(tmp_path: Path) -> None:
    out = tmp_path / "temporal.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "temporal.py"),
            *("--turns", "4", "--concurrency", "2", "--workers", "1", "--sequential", "1"),
            *("--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    assert set(figures) == {"in-process", "temporal x1"}
    assert figures["in-process"]["turns_per_s"] > 0
    assert figures["temporal x1"]["turns_per_s"] > 0
    assert figures["temporal x1"]["latency_s"] > 0
    assert "temporal x1 workers" in proc.stdout
