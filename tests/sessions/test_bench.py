"""bench/sessions.py runs end to end on a tiny size and reports a row per store and size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_sessions_bench_reports_every_row(tmp_path: Path, postgres_db: str) -> None:
    out = tmp_path / "sessions.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "sessions.py"),
            *("--turns", "10", "--rounds", "1", "--sizes", "3,30", "--history", "4"),
            *("--dsn", postgres_db, "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(row["store"], row["sessions"]) for row in rows] == [
        ("sqlite", 3),
        ("sqlite", 30),
        ("postgres", 3),
        ("postgres", 30),
    ]
    for row in rows:
        assert row["kova_us"] > 0
        assert row["floor_us"] > 0
        assert abs(row["ratio"] - row["kova_us"] / row["floor_us"]) < 0.02
