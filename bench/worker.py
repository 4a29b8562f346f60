"""One benchmark client in its own process: ``python bench/worker.py '<json spec>'``.

The spec names a client (``module:Class`` under ``bench/clients``), an API format, a scenario
and its sizes. The worker imports only that client, runs one untimed warm-up and then
``repeats`` timed rounds, checks every answer arrived whole, and prints one JSON line with
the wall/CPU seconds of each round and the peak RSS of the process.

Scenarios (letters as in the issue):
- ``b``: ``calls`` sequential non-streaming calls;
- ``c``: one stream of ``chunks`` content chunks;
- ``d``: ``streams`` concurrent streams of ``chunks`` chunks each;
- ``e``: ``turns`` sequential agent turns with one tool round trip each;
- ``g``: ``streams`` concurrent streams as in ``d`` (10,000 at full size), the mock server
  holding every answer until all of them have arrived, so every connection is open at once.
  The worker raises its open-file limit to the hard limit first (one socket a stream), and
  the floor's pool allows that many connections.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import resource
import sys
import time
from typing import TYPE_CHECKING, Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import payloads  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


def _rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _model(spec: dict[str, Any], *, tool: bool = False, n: int) -> str:
    return f"bench-tool-n{n}" if tool else f"bench-n{n}"


async def _run(client_cls: Any, spec: dict[str, Any], gather: Callable[..., Awaitable[Any]]):
    scenario = spec["scenario"]
    api = spec["api"]
    rounds: list[dict[str, float]] = []
    async with client_cls(spec["base_url"], api) as client:

        async def one_round(size: dict[str, int]) -> None:
            if scenario == "b":
                n = size["answer"]
                expect = payloads.answer_text(n)
                model = _model(spec, n=n)
                for _ in range(size["calls"]):
                    text = await client.call(model)
                    if text != expect:
                        raise AssertionError(f"wrong answer: {text[:60]!r}")
            elif scenario in ("c", "d", "g"):
                n = size["chunks"]
                model = _model(spec, n=n)
                expect = len(payloads.answer_text(n))
                count = size.get("streams", 1)

                async def one() -> None:
                    deltas, chars = await client.stream(model)
                    if chars != expect or deltas < n:
                        raise AssertionError(f"short stream: {deltas} deltas, {chars} chars")

                if scenario == "c":
                    await one()
                elif scenario == "g":
                    _hold(spec["base_url"], count)
                    await gather([one for _ in range(count)])
                else:
                    await gather([one for _ in range(count)])
            elif scenario == "e":
                n = size["answer"]
                expect = payloads.answer_text(n)
                model = _model(spec, tool=True, n=n)
                for _ in range(size["turns"]):
                    text = await client.turn(model)
                    if text != expect:
                        raise AssertionError(f"wrong final answer: {text[:60]!r}")
            else:
                raise ValueError(scenario)

        w0 = time.process_time()
        ww0 = time.perf_counter()
        await one_round(spec["warmup"])
        warm_wall = time.perf_counter() - ww0
        warm_cpu = time.process_time() - w0
        gc.collect()
        rss_base = _rss_now()
        for _ in range(spec["repeats"]):
            gc.collect()
            c0 = time.process_time()
            w0 = time.perf_counter()
            await one_round(spec["size"])
            w1 = time.perf_counter()
            c1 = time.process_time()
            rounds.append({"wall": w1 - w0, "cpu": c1 - c0})
    return {
        "rounds": rounds,
        "warm_cpu": warm_cpu,
        "warm_wall": warm_wall,
        "peak_rss": _peak_rss(),
        "rss_base": rss_base,
    }


def _hold(base_url: str, count: int) -> None:
    """Have the mock server hold the next ``count`` answers until all have been asked."""
    import http.client

    host, port = base_url.rsplit("/", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request("GET", f"/hold?n={count}")
        conn.getresponse().read()
    finally:
        conn.close()


def main() -> None:
    spec = json.loads(sys.argv[1])
    if spec["scenario"] == "g":
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        os.environ["BENCH_MAX_CONNECTIONS"] = str(spec["size"]["streams"] + 100)
    module_name, _, class_name = spec["client"].partition(":")
    t0 = time.perf_counter()
    module = importlib.import_module(f"clients.{module_name}")
    client_cls = getattr(module, class_name)
    import_s = time.perf_counter() - t0
    if client_cls.runtime == "trio":
        import trio

        async def gather(fns: list[Callable[[], Awaitable[None]]]) -> None:
            async with trio.open_nursery() as nursery:
                for fn in fns:
                    nursery.start_soon(fn)

        result = trio.run(_run, client_cls, spec, gather)
    else:
        import asyncio

        async def gather(fns: list[Callable[[], Awaitable[None]]]) -> None:  # type: ignore[misc]
            await asyncio.gather(*(fn() for fn in fns))

        result = asyncio.run(_run(client_cls, spec, gather))
    result["import_s"] = import_s
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
