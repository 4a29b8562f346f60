"""The crash and contention trials of bench/sessions_trials.py, on a small scale: writers
SIGKILLed at random points lose no reported turn, duplicate none and leave no partial one,
on SQLite and PostgreSQL; a fleet of processes on PostgreSQL interleaves no turns. (The
bench script runs the issue's 200 trials per store and 4 processes x 1,000 turns.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _trials(*args: str) -> dict[str, int]:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "sessions_trials.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, int] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_writers_killed_at_random_points_lose_and_split_no_turn(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = (
        ["--path", str(tmp_path / "s.db")]
        if store == "sqlite"
        else ["--dsn", request.getfixturevalue("postgres_db")]
    )
    result = _trials("kill", "--store", store, "--trials", "4", "--seed", "7", *where)
    assert result["killed"] == 8
    assert result["reported"] > 0
    assert (result["lost"], result["duplicated"], result["partial"]) == (0, 0, 0)
    # Appended but not reported: only a turn whose writer died between its commit and its
    # report line (two turns run at once per writer, two writers per trial).
    assert 0 <= result["turns"] - result["reported"] <= 2 * 2 * 4


def test_a_fleet_of_processes_interleaves_no_turns(postgres_db: str) -> None:
    result = _trials(
        "fleet", "--processes", "4", "--turns", "40", "--sessions", "5", "--dsn", postgres_db
    )
    assert result["reported"] == 160
    assert result["turns"] == 160
    # Turns wait for a session another process holds: none ran and then found it changed.
    assert result["conflicts_retried"] == 0
    assert (result["lost"], result["duplicated"], result["partial"]) == (0, 0, 0)
