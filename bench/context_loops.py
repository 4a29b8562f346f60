"""Issue 49's generated test at full size: 1,000 seeded long tool loops across the five native
formats and Responses on the wire-level fake servers, each in a small window (2k-6k tokens),
with a random policy (clear older results, then a sliding window or a summary).

    .venv/bin/python bench/context_loops.py [--runs 1000] [--first 0]

Prints what the fake servers saw: requests, summaries, requests over the window (the target
is 0), tool calls without their result or results without their call in any request (0), runs
that compacted, and the runs per format. Any run whose turn fails (a wire check of a fake
server refusing a request, an error) stops it with that error. The suite runs the first 120
(tests/agent/test_context_long_loops.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "agent"))

import trio  # noqa: E402
from _long_loops import Tally, one_run  # noqa: E402


async def main(runs: int, first: int) -> Tally:
    tally = Tally()
    started = time.perf_counter()
    for seed in range(first, first + runs):
        await one_run(seed, tally)
    elapsed = time.perf_counter() - started
    print(f"runs:                       {tally.runs} (seeds {first}..{first + runs - 1})")
    print(f"per format:                 {dict(sorted(tally.by_format.items()))}")
    print(f"model requests:             {tally.requests} ({tally.summaries} summaries)")
    print(f"runs that compacted:        {tally.compacted_runs}")
    print(f"requests over the window:   {tally.overflows}")
    print(f"unpaired calls or results:  {len(tally.unpaired)}")
    for fault in tally.unpaired[:10]:
        print(f"  {fault}")
    print(
        f"time:                       {elapsed:.1f} s ({elapsed / max(1, runs) * 1e3:.0f} ms a run)"
    )
    return tally


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--first", type=int, default=0)
    args = parser.parse_args()
    result = trio.run(main, args.runs, args.first)
    sys.exit(1 if result.overflows or result.unpaired else 0)
