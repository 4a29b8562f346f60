"""Instructions per call or per agent turn, counted by valgrind: deterministic on a noisy
machine, where wall and CPU ratios are not.

    .venv/bin/python bench/instructions.py [--apis openai,ollama] [--scenarios bcde]
        [--clients floor,agent] [--small 40] [--large 160] [--tree PATH]

For each client it runs ``bench/worker.py`` under ``valgrind --tool=callgrind`` twice, with
``small`` and ``large`` calls (b) or turns (e), stream chunks (c, per event) or concurrent
streams (d, per stream) against the mock server, and divides the
difference of the two instruction counts by the difference of the sizes: imports, warm-up
and start-up cancel out. ``--tree`` runs another checkout's ``kova`` (a "before" commit)
with this bench. Prints a markdown table with each client's ratio to the floor.
Clients: ``floor``, ``provider``, ``actor``, ``agent`` and, for turns (e), ``loop`` (the
floor's hand-written loop on kova's provider), ``deftool`` and ``inline`` (``Agent.run`` with
a plain ``def`` tool in its thread, or declared ``@tool(inline=True)``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import WARMUP, MockServer, prepare_bodies  # noqa: E402

CLIENTS = {
    "floor": "floor:Httpx2Trio",
    "provider": "kova_client:Kova",
    "actor": "kova_client:KovaActor",
    "agent": "kova_client:KovaAgent",
    "loop": "kova_loop:KovaLoop",
    "deftool": "kova_loop:KovaDefTool",
    "inline": "kova_loop:KovaInlineTool",
}
_COLLECTED = re.compile(r"Collected : (\d+)")
# Per event (c: one stream of 1,000 then 4,000 chunks) and per stream (d: 100 then 400
# concurrent streams of 20 chunks); b and e take --small and --large calls or turns.
_SIZES = {"c": (1000, 4000), "d": (100, 400)}


def count(spec: dict[str, object], tree: str | None) -> int:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [HERE, tree])))
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.setdefault("PYTHONHASHSEED", "0")  # string hashing varies the count by ~0.7M a run
    result = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            os.path.join(HERE, "worker.py"),
            json.dumps(spec),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    found = _COLLECTED.findall(result.stderr)
    if result.returncode != 0 or not found or "RESULT " not in result.stdout:
        raise RuntimeError(f"worker failed: {result.stderr[-2000:]}")
    return int(found[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--apis", default="openai,anthropic,gemini,ollama")
    parser.add_argument("--scenarios", default="be")
    parser.add_argument("--clients", default="floor,agent")
    parser.add_argument("--small", type=int, default=40)
    parser.add_argument("--large", type=int, default=160)
    parser.add_argument("--tree", default=None, help="a checkout whose kova to measure")
    args = parser.parse_args()
    server = MockServer()
    print("| format | scenario | client | instructions / call | x floor |")
    print("|---|---|---|---:|---:|")
    try:
        for api in args.apis.split(","):
            for scenario in args.scenarios:
                per: dict[str, float] = {}
                for name in args.clients.split(","):
                    counts = []
                    sizes = _SIZES.get(scenario, (args.small, args.large))
                    for n in sizes:
                        size = {"answer": 20, "calls": n, "turns": n, "chunks": n, "streams": n}
                        if scenario == "d":
                            size["chunks"] = 20
                        warmup = {**WARMUP, "calls": 3, "turns": 3, "streams": 3}
                        server.prepare(api, prepare_bodies(scenario, size, warmup))
                        spec = {
                            "client": CLIENTS[name],
                            "api": api,
                            "scenario": scenario,
                            "base_url": server.base_url,
                            "repeats": 1,
                            "warmup": warmup,
                            "size": {**WARMUP, **size},
                        }
                        counts.append(count(spec, args.tree))
                    per[name] = (counts[1] - counts[0]) / (sizes[1] - sizes[0])
                    ratio = per[name] / per["floor"] if "floor" in per else float("nan")
                    print(
                        f"| {api} | {scenario} | {name} | {per[name] / 1000:,.1f}k | {ratio:.3f} |",
                        flush=True,
                    )
    finally:
        server.close()


if __name__ == "__main__":
    main()
