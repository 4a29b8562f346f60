"""bench/cost.py (the cost bookkeeping's share of Agent.run) runs end to end on a tiny size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_cost_bench_measures_every_row() -> None:
    pytest.importorskip("psutil")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "cost.py"), "--calls", "5", "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| Agent.run")]
    labels = [row.split("|")[1].strip() for row in rows]
    assert labels == [
        f"{group}: {label}"
        for group in ("Agent.run", "Agent.run, instant provider")
        for label in ("none", "unpriced", "priced", "budget")
    ]
