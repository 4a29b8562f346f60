"""The generated test of issue 49, its fast part: 120 seeded long tool loops across the five
native formats and Responses on the fake servers, each in a small window, finish with no
request over the window, no tool call without its result and no result without its call in
any request sent, every request passing the fake server's wire checks. The 1,000-run version
is bench/context_loops.py (``KOVA_CONTEXT_RUNS=1000`` runs it here)."""

from __future__ import annotations

import os

import pytest
from _long_loops import Tally, one_run

RUNS = int(os.environ.get("KOVA_CONTEXT_RUNS", "120"))
BATCH = 10


@pytest.mark.parametrize("batch", range((RUNS + BATCH - 1) // BATCH))
async def test_long_tool_loops_in_a_small_window_never_overflow(batch):
    tally = Tally()
    for seed in range(batch * BATCH, min(RUNS, (batch + 1) * BATCH)):
        await one_run(seed, tally)
    assert tally.overflows == 0
    assert tally.unpaired == []
    assert tally.compacted_runs >= tally.runs // 2  # the window is small: most compact
