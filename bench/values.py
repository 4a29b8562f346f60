"""What declaring and building a value class costs: kova's ``Record`` against attrs.

    .venv/bin/python bench/values.py [--classes 60] [--repeat 7] [--tree /work/main]

1. **Definition** (paid at import): ``--classes`` classes of six annotated fields, declared
   as a ``Record``, as ``@attrs.frozen(kw_only=True)``, and as a plain class with
   ``__slots__`` and a hand-written ``__init__`` (the floor); microseconds per class, the
   best of ``--repeat`` rounds.
2. **Construction** (paid per value; per streamed token for the stream events): kova's
   ``TextDelta`` and ``ToolUseDelta`` (records with a hand-written ``__init__``), the same
   fields as an attrs class and as a record with the generic ``__init__``; nanoseconds per
   value, the best of ``--repeat`` rounds of ``timeit``.
3. ``import kova.agent`` (and ``kova.mcp``, ``kova.web``) in fresh processes against
   ``import httpx2, trio``, CPU milliseconds, median of 10; with ``--tree`` also for another
   checkout (the "before"), in the same run.

Prints markdown tables. Times are CPU time (a loaded machine's wall clock counts other
processes too); still, compare rows of one run only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import timeit

import attrs

from kova._record import Record
from kova._stream_events import TextDelta, ToolUseDelta

_FIELDS = "a: int\n    b: str\n    c: float | None = None\n    d: bool = False\n    e: str = ''\n"
_FIELDS += "    f: tuple[int, ...] = ()\n"


def _define(kind: str, count: int) -> float:
    sources = {
        "Record": "class C{i}(Record):\n    " + _FIELDS,
        "attrs": "@attrs.frozen(kw_only=True)\nclass C{i}:\n    " + _FIELDS,
        "slots": (
            "class C{i}:\n    __slots__ = ('a', 'b', 'c', 'd', 'e', 'f')\n"
            "    def __init__(self, *, a, b, c=None, d=False, e='', f=()):\n"
            "        self.a = a; self.b = b; self.c = c; self.d = d; self.e = e; self.f = f\n"
        ),
    }
    code = [compile(sources[kind].format(i=i), f"<{kind}>", "exec") for i in range(count)]
    namespace = {"Record": Record, "attrs": attrs, "__name__": "bench_values"}
    start = time.process_time()
    for compiled in code:
        exec(compiled, namespace)
    return (time.process_time() - start) / count * 1e6


@attrs.frozen(kw_only=True)
class _AttrsText:
    text: str
    provider_metadata: object | None = None


class _GenericText(Record):
    text: str
    provider_metadata: object | None = None


@attrs.frozen(kw_only=True)
class _AttrsToolDelta:
    index: int
    partial_json: str


class _GenericToolDelta(Record):
    index: int
    partial_json: str


def _build(factory: object, repeat: int) -> float:
    # CPU time, not wall time: on a shared machine the wall clock also counts other
    # processes' turns on the core.
    timer = timeit.Timer(factory, timer=time.process_time)  # type: ignore[arg-type]
    number = 200_000
    return min(timer.repeat(repeat, number)) / number * 1e9


def _import_ms(statement: str, tree: str | None, runs: int = 10) -> float:
    # Both trees import from their bytecode caches: one uncounted run writes them.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", statement], check=True, cwd=tree, env=env)
    times = []
    for _ in range(runs):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import time; t = time.process_time(); {statement}; "
                "print(time.process_time() - t)",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=tree,  # `python -c` imports kova from its working directory first
            env=env,
        )
        times.append(float(out.stdout) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--classes", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--tree", help="a checkout whose kova the import rows use (a 'before')")
    parser.add_argument("--imports", default="kova.agent,kova.mcp,kova.web")
    args = parser.parse_args()

    print("| definition (6 fields) | µs per class |")
    print("|---|---|")
    for kind in ("slots", "Record", "attrs"):
        best = min(_define(kind, args.classes) for _ in range(args.repeat))
        print(f"| {kind} | {best:.0f} |")

    print("\n| construction | ns per value |")
    print("|---|---|")
    rows = [
        ("TextDelta (record, own __init__)", lambda: TextDelta(text="x")),
        ("same fields, attrs", lambda: _AttrsText(text="x")),
        ("same fields, record, generic __init__", lambda: _GenericText(text="x")),
        ("ToolUseDelta (record, own __init__)", lambda: ToolUseDelta(index=0, partial_json="{")),
        ("same fields, attrs", lambda: _AttrsToolDelta(index=0, partial_json="{")),
        ("same fields, record, generic", lambda: _GenericToolDelta(index=0, partial_json="{")),
    ]
    for name, factory in rows:
        print(f"| {name} | {_build(factory, args.repeat):.0f} |")

    trees = [("this tree", None)]
    if args.tree:
        trees.insert(0, (args.tree, args.tree))
    print(
        "\n| import (fresh process, CPU ms, median of 10) | "
        + " | ".join(label for label, _ in trees)
        + " |"
    )
    print("|---|" + "---|" * len(trees))
    for statement in ["httpx2, trio", *args.imports.split(",")]:
        cells = [f"{_import_ms(f'import {statement}', tree):.1f}" for _, tree in trees]
        print(f"| import {statement} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
