"""kova against the SDKs users would pick instead, on a local mock server: one command.

    .venv/bin/python bench/run.py              # full run (~8 min on 2 cores)
    .venv/bin/python bench/run.py --quick      # smaller sizes, for development
    .venv/bin/python bench/run.py --tiny --clients floor,kova   # the smoke test's size

It starts ``bench/mockserver.py`` in its own process, runs every client in its own
subprocess (``bench/worker.py``) so imports never interfere, and prints one markdown table per
scenario: medians with the min-max spread over the repeats, and each figure's ratio to the
floor (raw httpx2 under trio) and to kova. JSON goes to ``bench/results/latest.json``
(``--json``); ``--docs`` also rewrites the table section of ``docs/performance.md``.
Clients whose package is not installed are skipped.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import psutil  # noqa: E402

FLOOR = "httpx2 (trio)"
KOVA = "kova (trio)"
KOVA_ACTOR = "kova actor (trio)"
KOVA_AGENT = "kova agent (trio)"
AGENT_PROGRAM = (
    "import kova, kova.agent, kova.tools; "
    "from kova.providers.openai import OpenAiCompatibleProvider"
)


@dataclass(frozen=True)
class Client:
    name: str
    spec: str  # "module:Class" under bench/clients
    group: str  # floor | kova | peer
    apis: tuple[str, ...]
    scenarios: tuple[str, ...]
    requires: tuple[str, ...]  # importable modules it needs
    import_stmt: str  # what scenario (a) times
    repeats_d: int = 1  # (d) is the longest scenario: one round for the comparison rows
    target: bool = False  # floor/kova rows the targets use: one fresh process per round
    slow: bool = False  # ~20x the floor per event: one round per scenario
    d_apis: tuple[str, ...] | None = None  # formats it runs (d) in (None: all of its formats)
    d_seconds: float = 0.0  # what its (d) run takes at full size, for the time budget


CLIENTS = [
    Client(
        FLOOR,
        "floor:Httpx2Trio",
        "floor",
        ("openai", "anthropic", "gemini", "ollama", "responses"),
        ("b", "c", "d", "e", "g"),
        ("httpx2", "trio"),
        "import httpx2, trio",
        target=True,
    ),
    Client(
        "httpx2 (asyncio)",
        "floor:Httpx2Asyncio",
        "floor",
        ("openai", "anthropic"),
        ("b", "c", "e"),
        ("httpx2",),
        "import httpx2, asyncio",
    ),
    Client(
        "httpx (asyncio)",
        "floor:HttpxAsyncio",
        "floor",
        ("openai", "anthropic"),
        ("b", "c", "e"),
        ("httpx",),
        "import httpx, asyncio",
    ),
    Client(
        KOVA,
        "kova_client:Kova",
        "kova",
        ("openai", "anthropic", "gemini", "ollama", "responses"),
        ("b", "c", "d"),
        ("kova",),
        "import kova",
        target=True,
    ),
    Client(
        KOVA_AGENT,
        "kova_client:KovaAgent",
        "kova",
        ("openai", "anthropic", "gemini", "ollama", "responses"),
        ("b", "c", "d", "e", "g"),
        ("kova",),
        AGENT_PROGRAM,
        target=True,
    ),
    Client(
        "kova actor (trio)",
        "kova_client:KovaActor",
        "kova",
        ("openai", "anthropic", "gemini", "ollama", "responses"),
        ("b", "c", "d"),
        ("kova",),
        "",
        target=True,
    ),
    Client(
        "openai",
        "openai_sdk:OpenAiSdk",
        "peer",
        ("openai",),
        ("b", "c", "d"),
        ("openai",),
        "import openai",
    ),
    Client(
        "anthropic",
        "anthropic_sdk:AnthropicSdk",
        "peer",
        ("anthropic",),
        ("b", "c", "d"),
        ("anthropic",),
        "import anthropic",
    ),
    Client(
        "litellm",
        "litellm_client:LiteLlm",
        "peer",
        ("openai", "anthropic"),
        ("b", "c", "d"),
        ("litellm",),
        "import litellm",
        slow=True,
        d_apis=("openai",),
        d_seconds=130.0,
    ),
    Client(
        "pydantic-ai",
        "pydantic_ai_client:PydanticAi",
        "peer",
        ("openai", "anthropic"),
        ("b", "c", "d", "e"),
        ("pydantic_ai", "openai", "anthropic"),
        "import pydantic_ai",
        slow=True,
        d_apis=("anthropic",),
        d_seconds=130.0,
    ),
    Client(
        "openai-agents",
        "openai_agents_client:OpenAiAgents",
        "peer",
        ("openai",),
        ("e",),
        ("agents",),
        "import agents",
    ),
]

# Extra import rows (no target). The agent client's own row imports a whole agent program
# (kova, kova.agent, kova.tools and a provider), which is what a kova program really touches.
EXTRA_IMPORTS: dict[str, str] = {}

SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "import_runs": 5,
        "repeats": 3,
        "rounds_per_process": 2,
        "b": {"calls": 500, "answer": 20},
        "c": {"chunks": 20_000},
        "d": {"streams": 1000, "chunks": 200},
        "e": {"turns": 200, "answer": 20},
        "g": {"streams": 10_000, "chunks": 20},
        "f": {"chunks": 20_000, "repeats": 5},
        "hop": {"chunks": 20_000, "repeats": 5},
    },
    "quick": {
        "import_runs": 3,
        "repeats": 2,
        "rounds_per_process": 1,
        "b": {"calls": 100, "answer": 20},
        "c": {"chunks": 5_000},
        "d": {"streams": 200, "chunks": 200},
        "e": {"turns": 50, "answer": 20},
        "g": {"streams": 2000, "chunks": 20},
        "f": {"chunks": 5_000, "repeats": 3},
        "hop": {"chunks": 5_000, "repeats": 3},
    },
    "tiny": {
        "import_runs": 1,
        "repeats": 1,
        "rounds_per_process": 1,
        "b": {"calls": 5, "answer": 5},
        "c": {"chunks": 200},
        "d": {"streams": 10, "chunks": 20},
        "e": {"turns": 3, "answer": 5},
        "g": {"streams": 20, "chunks": 5},
        "f": {"chunks": 200, "repeats": 1},
        "hop": {"chunks": 200, "repeats": 1},
    },
}

WARMUP = {"calls": 3, "answer": 5, "chunks": 50, "streams": 5, "turns": 2}

SCENARIO_TITLES = {
    "a": "(a) Import time, s (median of fresh processes; lower is better)",
    "b": "(b) Sequential non-streaming calls, calls/s (higher is better)",
    "c": "(c) One long stream, events/s (higher is better)",
    "c_cpu": "(c) One long stream, client CPU s per 1,000 events (lower is better)",
    "d": "(d) Concurrent streams, wall s (lower is better)",
    "d_rss": "(d) Concurrent streams, peak client RSS, MB (lower is better)",
    "e": "(e) Agent turns with one tool round trip, turns/s (higher is better)",
    "f": "(f) Codec alone: SSE bytes to events, events/s (higher is better)",
    "g": "(g) 10,000 concurrent streams, all open at once, wall s (lower is better)",
    "g_rss": "(g) 10,000 concurrent streams, peak client RSS, MB (lower is better)",
}

G_APIS = ("openai",)
"""(g) runs in one format: it measures holding 10,000 connections, not a codec."""


def available(client: Client) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in client.requires)


# --------------------------------------------------------------------------- processes


class MockServer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "mockserver.py")],
            preexec_fn=_pin_server,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"mock server did not start: {line!r}")
        self.base_url = f"http://127.0.0.1:{int(line.split()[1])}"
        self.ps = psutil.Process(self.proc.pid)

    def prepare(self, api: str, bodies: list[dict[str, Any]]) -> None:
        """Have the server build (and cache) the responses to these request bodies."""
        paths = {
            "openai": "/v1/chat/completions",
            "ollama": "/api/chat",
            "responses": "/v1/responses",
        }
        path = "/prepare" + paths.get(api, "/v1/messages")
        host, port = self.base_url.rsplit("/", 1)[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            for body in bodies:
                if api == "gemini":
                    # The model and streaming are in the path; a tool result is a part.
                    method = "streamGenerateContent" if body.get("stream") else "generateContent"
                    path = f"/prepare/v1beta/models/{body['model']}:{method}"
                    answered = bool(body.get("messages"))
                    parts = [{"functionResponse": {}}] if answered else [{"text": "q"}]
                    body = {"contents": [{"role": "user", "parts": parts}]}
                elif api == "responses":
                    # The history is ``input``; a tool result is a function_call_output item.
                    answered = bool(body.get("messages"))
                    items = [{"type": "function_call_output"}] if answered else []
                    body = {"model": body["model"], "input": items, "stream": body.get("stream")}
                conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
                conn.getresponse().read()
        finally:
            conn.close()

    def stats(self) -> dict[str, int]:
        """Connections open now and the peak since the last call (then reset)."""
        host, port = self.base_url.rsplit("/", 1)[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            conn.request("GET", "/stats")
            data: dict[str, int] = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        return data

    def cpu(self) -> float:
        """CPU seconds of the server so far (nanosecond schedstat where Linux has it; psutil's
        clock ticks are too coarse for short runs)."""
        try:
            with open(f"/proc/{self.proc.pid}/schedstat") as f:
                return int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            t = self.ps.cpu_times()
            return float(t.user + t.system)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _cpus() -> tuple[set[int], set[int]] | None:
    """(server CPUs, client CPUs): the mock server and the client each get a core of their
    own, so a run never depends on whether the scheduler put them on the same one."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None
    if len(cpus) < 2:
        return None
    return {cpus[0]}, set(cpus[1:])


CPUS = _cpus()


def _pin_client() -> None:
    if CPUS is not None:
        os.sched_setaffinity(0, CPUS[1])


def _pin_server() -> None:
    if CPUS is not None:
        os.sched_setaffinity(0, CPUS[0])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


def run_worker(spec: dict[str, Any], server: MockServer, timeout: float) -> dict[str, Any]:
    server.stats()  # reset the peak
    cpu0 = server.cpu()
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "worker.py"), json.dumps(spec)],
        preexec_fn=_pin_client,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        check=False,
    )
    server_cpu = server.cpu() - cpu0
    peak = server.stats()["peak"]
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[7:])
            result["server_cpu"] = server_cpu
            result["peak_connections"] = peak
            return result
    raise RuntimeError(
        f"worker {spec['client']} {spec['api']} {spec['scenario']} failed:\n{proc.stderr[-3000:]}"
    )


def prepare_bodies(
    scenario: str, size: dict[str, int], warmup: dict[str, int]
) -> list[dict[str, Any]]:
    """The request bodies whose responses a scenario's rounds will ask for."""
    bodies: list[dict[str, Any]] = []
    for sz in (warmup, size):
        if scenario == "b":
            bodies.append({"model": f"bench-n{sz['answer']}", "messages": []})
        elif scenario in "cdg":
            bodies.append({"model": f"bench-n{sz['chunks']}", "messages": [], "stream": True})
        elif scenario == "e":
            model = f"bench-tool-n{sz['answer']}"
            done = [
                {"role": "tool", "content": [{"type": "tool_result"}]},
                {"role": "user", "content": [{"type": "tool_result"}]},
            ]
            for stream in (False, True):
                bodies.append({"model": model, "messages": [], "stream": stream})
                bodies.append({"model": model, "messages": done, "stream": stream})
    return bodies


def time_import(stmt: str, runs: int) -> list[float]:
    code = (
        "import time; t0 = time.perf_counter(); " + stmt + "; "
        "print('IMPORT', time.perf_counter() - t0)"
    )
    cmd = [sys.executable, "-c", code]
    # Warm the .pyc caches: this run must write bytecode even where the environment says
    # PYTHONDONTWRITEBYTECODE, or every timed run of a freshly edited checkout compiles
    # kova's changed modules from source while the floor's site-packages are compiled.
    warm_env = _env()
    warm_env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(cmd, capture_output=True, env=warm_env, check=False, preexec_fn=_pin_client)
    out = []
    for _ in range(runs):
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            env=_env(),
            check=False,
            preexec_fn=_pin_client,
        )
        for line in proc.stdout.splitlines():
            if line.startswith("IMPORT "):
                out.append(float(line.split()[1]))
        if proc.returncode:
            raise RuntimeError(f"import failed: {stmt}\n{proc.stderr[-2000:]}")
    return out


def run_inproc(module: str, fn: str, size: dict[str, Any]) -> dict[str, Any]:
    """Run an in-process micro-benchmark (codec, actor hop) in a fresh subprocess."""
    code = (
        f"import json, sys; sys.path.insert(0, {HERE!r}); import {module} as m; "
        f"print('RESULT ' + json.dumps(m.{fn}({size!r})))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=_pin_client,
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
        timeout=300,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[7:])
            return result
    raise RuntimeError(f"{module}.{fn} failed:\n{proc.stderr[-3000:]}")


# --------------------------------------------------------------------------- results


@dataclass
class Row:
    """One figure: the per-repeat samples of a client in one scenario/API."""

    client: str
    values: list[float]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.values)


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _peak_connections(row: Row) -> str:
    peaks = [p.get("peak_connections", 0) for p in row.extra.get("processes", [])]
    return str(max(peaks)) if peaks else "-"


def table(
    title: str,
    rows: list[Row],
    note: str = "",
    floor: str = FLOOR,
    kova: str = KOVA,
    extra_column: tuple[str, Any] | None = None,
) -> str:
    ref_floor = next((r.median for r in rows if r.client == floor), None)
    ref_kova = next((r.median for r in rows if r.client == kova), None)
    lines = [f"#### {title}", ""]
    if note:
        lines += [note, ""]
    head = "| client | median | min-max | x floor | x kova |"
    rule = "|---|---:|---:|---:|---:|"
    if extra_column is not None:
        head += f" {extra_column[0]} |"
        rule += "---:|"
    lines += [head, rule]
    for r in rows:
        spread = f"{_fmt(min(r.values))}-{_fmt(max(r.values))}"
        xf = f"{r.median / ref_floor:.2f}" if ref_floor else "-"
        xk = f"{r.median / ref_kova:.2f}" if ref_kova else "-"
        line = f"| {r.client} | {_fmt(r.median)} | {spread} | {xf} | {xk} |"
        if extra_column is not None:
            line += f" {extra_column[1](r)} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size_group = parser.add_mutually_exclusive_group()
    size_group.add_argument("--quick", action="store_true", help="smaller sizes (development)")
    size_group.add_argument("--tiny", action="store_true", help="smoke-test sizes")
    parser.add_argument(
        "--clients",
        default="all",
        help="comma list of client names or groups (floor, kova, peer); default all",
    )
    parser.add_argument("--scenarios", default="abcdefgh", help="letters; h = actor hop")
    parser.add_argument("--apis", default="openai,anthropic")
    parser.add_argument("--json", default=os.path.join(HERE, "results", "latest.json"))
    parser.add_argument(
        "--docs",
        action="store_true",
        help="update docs/performance.md and its chart (docs/img/performance-ratios.png)",
    )
    parser.add_argument(
        "--no-chart",
        action="store_true",
        help="skip the chart of the target ratios (drawn with matplotlib, a bench dependency)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=555.0,
        help="seconds; the slow peers' (d) runs go last and are skipped past this budget",
    )
    args = parser.parse_args(argv)

    size_name = "tiny" if args.tiny else "quick" if args.quick else "full"
    sizes = SIZES[size_name]
    wanted = {w.strip() for w in args.clients.split(",")}
    apis = [a.strip() for a in args.apis.split(",")]
    scenarios = set(args.scenarios)
    clients = [c for c in CLIENTS if "all" in wanted or c.name in wanted or c.group in wanted]
    skipped = [c.name for c in clients if not available(c)]
    clients = [c for c in clients if available(c)]
    started = time.perf_counter()
    log = sys.stderr
    for name in skipped:
        print(f"skipping {name}: not installed", file=log)

    results: dict[str, Any] = {
        "size": size_name,
        "sizes": sizes,
        "machine": machine(),
        "skipped": skipped,
        "scenarios": {},
    }
    sections: list[str] = []

    # (a) import time
    if "a" in scenarios:
        rows = []
        stmts = [(c.name, c.import_stmt) for c in clients if c.import_stmt]
        # The peers import in seconds: fewer fresh processes for them.
        fast = {c.name for c in clients if c.group != "peer"} | set(EXTRA_IMPORTS)
        if any(c.group == "kova" for c in clients):
            stmts += list(EXTRA_IMPORTS.items())
        for name, stmt in stmts:
            print(f"(a) {name}", file=log)
            try:
                runs = sizes["import_runs"] if name in fast else max(1, sizes["import_runs"] - 2)
                rows.append(Row(name, time_import(stmt, runs), {"stmt": stmt}))
            except RuntimeError as exc:
                print(f"  failed: {exc}", file=log)
        results["scenarios"]["a"] = [r.__dict__ for r in rows]
        note = "Statements: " + "; ".join(f"{r.client}: `{r.extra['stmt']}`" for r in rows)
        sections.append(table(SCENARIO_TITLES["a"], rows, note))

    server = MockServer()
    server_share: list[dict[str, Any]] = []
    try:
        # Jobs in table order, except that the slow peers' (d) runs (a minute or two each)
        # go last, after the hop, and only while the run is inside its time budget.
        # The target rows (floor, kova) run each round in a fresh process, interleaved
        # (floor, kova, kova actor, floor, ...), so the spread includes the variation between
        # processes and the time of the run; other clients run their rounds in one process.
        jobs: list[tuple[str, str, Client, int]] = []
        for scenario in "bcdeg":
            if scenario not in scenarios:
                continue
            for api in apis:
                here = [
                    c
                    for c in clients
                    if scenario in c.scenarios
                    and api in c.apis
                    and not (scenario == "d" and c.d_apis is not None and api not in c.d_apis)
                    and not (scenario == "g" and api not in G_APIS)
                ]
                split = [
                    c for c in here if c.target and not (scenario == "d" and c.name == KOVA_ACTOR)
                ]
                others = [c for c in here if c not in split]
                wide = scenario in ("d", "g")
                rounds_split = sizes["repeats"] if not wide else min(2, sizes["repeats"])
                per_process = 1 if wide else sizes["rounds_per_process"]
                for _ in range(rounds_split):
                    jobs += [(scenario, api, c, per_process) for c in split]
                for c in others:
                    repeats = 1 if c.slow else sizes["repeats"]
                    if scenario == "d":
                        repeats = min(repeats, c.repeats_d)
                    jobs.append((scenario, api, c, repeats))
        deferred = [j for j in jobs if j[2].slow and j[0] == "d"]
        table_rows: dict[tuple[str, str], list[Row]] = {}
        seconds: dict[tuple[str, str], list[Row]] = {}

        def add(rows: list[Row], client: str, values: list[float], extra: dict[str, Any]) -> None:
            for row in rows:
                if row.client == client:
                    row.values.extend(values)
                    row.extra["processes"].append(extra)
                    return
            rows.append(Row(client, values, {"processes": [extra]}))

        def run_job(scenario: str, api: str, c: Client, repeats: int) -> None:
            spec = {
                "client": c.spec,
                "api": api,
                "scenario": scenario,
                "base_url": server.base_url,
                "repeats": repeats,
                "warmup": WARMUP,
                "size": {**WARMUP, **sizes[scenario]},
            }
            print(f"({scenario}) {api} {c.name}", file=log)
            server.prepare(api, prepare_bodies(scenario, spec["size"], spec["warmup"]))
            try:
                res = run_worker(spec, server, timeout=1800 if scenario == "g" else 400)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"  failed: {exc}", file=log)
                results.setdefault("failures", []).append(
                    {"client": c.name, "api": api, "scenario": scenario, "error": str(exc)}
                )
                return
            rounds = res["rounds"]
            size = sizes[scenario]
            server_share.append(
                {
                    "client": c.name,
                    "api": api,
                    "scenario": scenario,
                    "server_cpu": res["server_cpu"],
                    "client_cpu": sum(r["cpu"] for r in rounds) + res["warm_cpu"],
                    "wall": sum(r["wall"] for r in rounds) + res["warm_wall"],
                }
            )
            keys = ("peak_rss", "rss_base", "import_s", "server_cpu", "peak_connections")
            extra = {k: res[k] for k in keys}
            extra["rounds"] = rounds
            main_rows = table_rows.setdefault((scenario, api), [])
            second_rows = seconds.setdefault((scenario, api), [])
            if scenario == "b":
                add(main_rows, c.name, [size["calls"] / r["wall"] for r in rounds], extra)
            elif scenario == "c":
                n = size["chunks"]
                add(main_rows, c.name, [n / r["wall"] for r in rounds], extra)
                add(second_rows, c.name, [r["cpu"] / n * 1000 for r in rounds], extra)
            elif scenario in ("d", "g"):
                add(main_rows, c.name, [r["wall"] for r in rounds], extra)
                add(second_rows, c.name, [res["peak_rss"] / 2**20], extra)
            else:
                add(main_rows, c.name, [size["turns"] / r["wall"] for r in rounds], extra)

        for job in jobs:
            if job not in deferred:
                run_job(*job)
        if "h" in scenarios and any(c.group == "kova" for c in clients):
            hops = []
            for api in apis:
                print(f"(hop) {api} kova actor hop", file=log)
                try:
                    size = {**sizes["hop"], "api": api, "base_url": server.base_url}
                    hops.append(run_inproc("hop", "actor_hop", size))
                except RuntimeError as exc:
                    print(f"  failed: {exc}", file=log)
            results["scenarios"]["hop"] = hops
        for job in deferred:
            elapsed = time.perf_counter() - started
            if elapsed + job[2].d_seconds > args.budget:
                note = f"skipped: {elapsed:.0f} s into a {args.budget:.0f} s budget"
                print(f"({job[0]}) {job[1]} {job[2].name}: {note}", file=log)
                results.setdefault("skipped_for_time", []).append(
                    {"client": job[2].name, "api": job[1], "scenario": job[0]}
                )
                continue
            run_job(*job)

        for (scenario, api), main_rows in table_rows.items():
            order = {c.name: i for i, c in enumerate(CLIENTS)}
            main_rows.sort(key=lambda r: order.get(r.client, 99))
            desc = ", ".join(f"{k}={v}" for k, v in sizes[scenario].items())
            results["scenarios"][f"{scenario}/{api}"] = [r.__dict__ for r in main_rows]
            sections.append(
                table(
                    f"{SCENARIO_TITLES[scenario]} — {api} format ({desc})",
                    main_rows,
                    extra_column=("peak connections", _peak_connections)
                    if scenario in ("d", "g")
                    else None,
                )
            )
            second_rows = sorted(seconds[(scenario, api)], key=lambda r: order.get(r.client, 99))
            if second_rows:
                second = "c_cpu" if scenario == "c" else f"{scenario}_rss"
                results["scenarios"][f"{second}/{api}"] = [
                    {"client": r.client, "values": r.values} for r in second_rows
                ]
                sections.append(
                    table(f"{SCENARIO_TITLES[second]} — {api} format ({desc})", second_rows)
                )
        if results["scenarios"].get("hop"):
            sections.append(hop_section(results["scenarios"]["hop"]))
    finally:
        server.close()

    # (f) codec alone and the actor hop: in-process micro-benchmarks
    if "f" in scenarios and any(c.group == "kova" for c in clients):
        floor_label, kova_label = "floor: split + json.loads", "kova codec"
        codec_rows: dict[str, list[dict[str, Any]]] = {}
        for api in apis:
            rows = []
            for label, fn in ((floor_label, "floor_codec"), (kova_label, "kova_codec")):
                print(f"(f) {api} {label}", file=log)
                try:
                    res = run_inproc("codec", fn, {**sizes["f"], "api": api})
                except RuntimeError as exc:
                    print(f"  failed: {exc}", file=log)
                    continue
                rows.append(Row(label, res["events_per_s"], res))
            codec_rows[api] = [r.__dict__ for r in rows]
            if rows:
                title = f"{SCENARIO_TITLES['f']} — {api} format (chunks={sizes['f']['chunks']})"
                sections.append(table(title, rows, floor=floor_label, kova=kova_label))
        results["scenarios"]["f"] = codec_rows

    if server_share:
        results["server_share"] = server_share
        sections.append(server_section(server_share))

    results["scenarios"]["_d_streams"] = sizes["d"]["streams"]
    results["scenarios"]["_g_streams"] = sizes["g"]["streams"]
    target_rows = evaluate_targets(results["scenarios"], apis)
    results["targets"] = target_rows
    if target_rows:
        sections.insert(0, targets_section(target_rows))

    elapsed = time.perf_counter() - started
    results["elapsed_s"] = elapsed
    header = (
        f"Run: {size_name} sizes, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{elapsed:.0f} s. Machine: {results['machine']['summary']}.\n"
    )
    if skipped:
        header += f"Not installed, skipped: {', '.join(skipped)}.\n"
    if results.get("skipped_for_time"):
        late = ", ".join(
            f"{j['client']} ({j['scenario']}, {j['api']})" for j in results["skipped_for_time"]
        )
        header += f"Skipped to stay inside the time budget: {late}.\n"
    if results.get("failures"):
        header += (
            "FAILED: "
            + ", ".join(f"{j['client']} ({j['scenario']}, {j['api']})" for j in results["failures"])
            + "\n"
        )
    markdown = header + "\n" + "\n".join(sections)
    print(markdown)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    md_path = os.path.splitext(args.json)[0] + ".md"
    with open(md_path, "w") as f:
        f.write(markdown)
    chart_path = os.path.splitext(args.json)[0] + ".png"
    if target_rows and not args.no_chart and chart(target_rows, chart_path):
        print(f"chart: {chart_path}", file=log)
        if args.docs:
            os.makedirs(os.path.join(ROOT, "docs", "img"), exist_ok=True)
            shutil.copyfile(chart_path, os.path.join(ROOT, "docs", "img", "performance-ratios.png"))
    if args.docs:
        update_docs(markdown)
    return 1 if results.get("failures") else 0


# (scenario key, label, comparison, limit, client[, only these apis]); ratios are the client's /
# floor medians. A target restricted to some apis replaces the unrestricted one of the same
# label for them.
# The provider rows (the provider called directly) and the agent rows (what users call:
# Agent.run / Agent.stream) come from the same run.
TARGETS = [
    ("a", "import: `import kova` vs `import httpx2, trio`", "<=", 1.5, KOVA),
    ("b/{api}", "provider: non-streaming calls/s (b), {api}", ">=", 0.8, KOVA),
    ("c/{api}", "provider: streaming events/s (c), {api}", ">=", 0.8, KOVA),
    # The Gemini and Ollama issue asks more of their streams: 0.9x the floor's events/s; the
    # Responses API issue asks 0.9x of its streams and of its non-streaming calls.
    (
        "c/{api}",
        "provider: streaming events/s (c), {api}",
        ">=",
        0.9,
        KOVA,
        ("gemini", "ollama", "responses"),
    ),
    ("b/{api}", "provider: non-streaming calls/s (b), {api}", ">=", 0.9, KOVA, ("responses",)),
    ("c_cpu/{api}", "provider: streaming CPU per 1,000 events (c), {api}", "<=", 1.25, KOVA),
    ("d/{api}", "provider: concurrent streams, wall (d), {api}", "<=", 1.3, KOVA),
    ("d_rss/{api}", "provider: concurrent streams, peak RSS (d), {api}", "<=", 1.2, KOVA),
    ("a", "agent: import of a whole agent program vs `import httpx2, trio`", "<=", 1.1, KOVA_AGENT),
    # The provider actor issue (24) asks 0.9x of Agent.run and 0.85x of the tool turn.
    ("b/{api}", "agent: `Agent.run` calls/s (b), {api}", ">=", 0.9, KOVA_AGENT),
    ("c/{api}", "agent: `Agent.stream` events/s (c), {api}", ">=", 0.9, KOVA_AGENT),
    (
        "c_cpu/{api}",
        "agent: `Agent.stream` CPU per 1,000 events (c), {api}",
        "<=",
        1.15,
        KOVA_AGENT,
    ),
    ("d/{api}", "agent: concurrent `Agent.stream`, wall (d), {api}", "<=", 1.2, KOVA_AGENT),
    ("d_rss/{api}", "agent: concurrent `Agent.stream`, peak RSS (d), {api}", "<=", 1.2, KOVA_AGENT),
    (
        "d_conn/{api}",
        "agent: concurrent `Agent.stream`, peak connections / streams (d), {api}",
        ">=",
        1.0,
        KOVA_AGENT,
    ),
    (
        "e/{api}",
        "agent: turn with one tool round trip vs hand-written loop (e), {api}",
        ">=",
        0.85,
        KOVA_AGENT,
    ),
    ("g/{api}", "agent: 10,000 concurrent `Agent.stream`, wall (g), {api}", "<=", 1.2, KOVA_AGENT),
    (
        "g_rss/{api}",
        "agent: 10,000 concurrent `Agent.stream`, peak RSS (g), {api}",
        "<=",
        1.2,
        KOVA_AGENT,
    ),
    (
        "g_conn/{api}",
        "agent: 10,000 concurrent `Agent.stream`, peak connections / streams (g), {api}",
        ">=",
        1.0,
        KOVA_AGENT,
    ),
]


def _median_of(rows: list[dict[str, Any]], client: str) -> float | None:
    for row in rows:
        if row["client"] == client:
            return float(statistics.median(row["values"]))
    return None


def _connections(scenarios: dict[str, Any], key: str, client: str) -> float | None:
    """Peak connections the mock server saw during the client's (d) or (g) runs, per
    stream."""
    scenario = key.split("_conn/", 1)[0]
    rows = scenarios.get(key.replace("_conn/", "/")) or []
    streams = scenarios.get(f"_{scenario}_streams")
    for row in rows:
        if row["client"] == client and streams:
            peaks = [p.get("peak_connections", 0) for p in row["extra"].get("processes", [])]
            return max(peaks) / streams if peaks else None
    return None


def evaluate_targets(scenarios: dict[str, Any], apis: list[str]) -> list[dict[str, Any]]:
    """Each target of the issue with the measured ratio to the floor (same run)."""
    out: list[dict[str, Any]] = []
    overridden = {(target[1], api) for target in TARGETS if len(target) > 5 for api in target[5]}
    for key_t, label_t, op, limit, client, *only in TARGETS:
        for api in apis if "{api}" in key_t else [""]:
            if (only and api not in only[0]) or (not only and (label_t, api) in overridden):
                continue
            key, label = key_t.format(api=api), label_t.format(api=api)
            if "_conn/" in key:
                ratio = _connections(scenarios, key, client)
                if ratio is None:
                    continue
                actor = None
            else:
                rows = scenarios.get(key)
                if not rows:
                    continue
                floor, value = _median_of(rows, FLOOR), _median_of(rows, client)
                if floor is None or value is None:
                    continue
                ratio = value / floor
                actor_value = _median_of(rows, KOVA_ACTOR) if client == KOVA else None
                actor = None if actor_value is None else actor_value / floor
            met = ratio >= limit if op == ">=" else ratio <= limit
            out.append(
                {
                    "target": label,
                    "limit": f"{op} {limit}",
                    "ratio": ratio,
                    "met": met,
                    "actor_ratio": actor,
                    "client": client,
                    "key": key,
                }
            )
    for hop in scenarios.get("hop", []):
        out.append(
            {
                "target": f"actor hop per streamed event, {hop['api']}",
                "limit": "< 5%",
                "ratio": hop["hop_share"],
                "met": hop["hop_share"] < 0.05,
                "actor_ratio": None,
                "client": KOVA_ACTOR,
                "key": f"hop/{hop['api']}",
            }
        )
    return out


def chart(rows: list[dict[str, Any]], path: str) -> bool:
    """Draw the target ratios as a bar chart (PNG at ``path``); False without matplotlib.

    Each bar is one target's measured ratio to the floor, green when met, red when not, with
    the target's limit as a tick on the bar; provider and agent rows side by side.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in rows if not r["limit"].endswith("%")]
    if not rows:
        return False
    labels = [r["target"].replace("`", "") for r in rows]
    ratios = [r["ratio"] for r in rows]
    limits = [float(r["limit"].split()[1]) for r in rows]
    colors = ["#2e7d32" if r["met"] else "#c62828" for r in rows]
    height = 0.32 * len(rows) + 1.2
    fig, ax = plt.subplots(figsize=(10, height))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, ratios, color=colors, height=0.6)
    ax.scatter(limits, y, marker="|", s=300, color="black", zorder=3, label="target")
    ax.axvline(1.0, color="#777777", linewidth=0.8, linestyle="--")
    for yy, ratio in zip(y, ratios, strict=True):
        ax.text(ratio + 0.02, yy, f"{ratio:.2f}x", va="center", fontsize=7)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("ratio to the raw httpx2 floor, same run (green: target met)")
    ax.set_xlim(0, max([*ratios, *limits]) * 1.15)
    ax.legend(loc="lower right", fontsize=7)
    ax.set_title("kova vs the floor: provider path and agent path", fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def targets_section(rows: list[dict[str, Any]]) -> str:
    lines = [
        "#### Targets (kova / floor, same run)",
        "",
        "| target | goal | kova | met | via provider actor |",
        "|---|---:|---:|:---:|---:|",
    ]
    for row in rows:
        hop = row["limit"].endswith("%")
        ratio = f"{row['ratio'] * 100:.1f}%" if hop else f"{row['ratio']:.2f}x"
        actor = "" if row["actor_ratio"] is None else f"{row['actor_ratio']:.2f}x"
        met = "yes" if row["met"] else "**no**"
        lines.append(f"| {row['target']} | {row['limit']} | {ratio} | {met} | {actor} |")
    return "\n".join(lines) + "\n"


def server_section(shares: list[dict[str, Any]]) -> str:
    """How busy the mock server was: it must never be the bottleneck."""

    def util(s: dict[str, Any]) -> float:
        return float(s["server_cpu"] / max(s["wall"], 1e-9))

    def per_client(s: dict[str, Any]) -> float:
        return float(s["server_cpu"] / max(s["client_cpu"], 1e-9))

    busiest = max(shares, key=util)
    worst = max(shares, key=per_client)
    total = sum(s["server_cpu"] for s in shares) / max(sum(s["client_cpu"] for s in shares), 1e-9)
    return (
        "#### Mock server CPU\n\n"
        "The server runs in its own process (the other core). Busiest: "
        f"{util(busiest) * 100:.0f}% of one core during {busiest['client']} "
        f"({busiest['api']}, scenario {busiest['scenario']}); at most "
        f"{per_client(worst):.2f} server CPU s per client CPU s ({worst['client']}, "
        f"{worst['api']}, scenario {worst['scenario']}); {total:.3f} over the whole run.\n"
    )


def hop_section(hops: list[dict[str, Any]]) -> str:
    lines = [
        "#### Actor hop (agent -> provider actor -> back), CPU us per streamed event "
        "(lower is better)",
        "",
        "The batches kova's provider produced for one real stream from the mock server "
        f"({hops[0]['chunks']} chunks) replayed with no I/O, read directly and through a "
        "provider actor (`spawn_provider` + `ProviderRef`); the difference is the hop. "
        '"Stream" is the CPU per event of the real stream the batches came from.',
        "",
        "| format | events/batch | stream | replay direct | replay via actor | hop | "
        "hop / stream event |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for res in hops:
        med = {k: statistics.median(res[k]) for k in ("stream", "direct", "actor")}
        lines.append(
            f"| {res['api']} | {res['events_per_batch']:.1f} | {_fmt(med['stream'])} | "
            f"{_fmt(med['direct'])} | {_fmt(med['actor'])} | {res['hop_us']:.2f} | "
            f"{res['hop_share'] * 100:.1f}% |"
        )
    if any(res["hop_us"] < 0 for res in hops):
        lines += ["", "A negative hop is below what the measurement resolves (noise)."]
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = os.cpu_count() or 0
    mem = psutil.virtual_memory().total / 2**30
    py = platform.python_version()
    summary = f"{cpu}, {cores} cores, {mem:.0f} GiB RAM, Linux {platform.release()}, Python {py}"
    return {"cpu": cpu, "cores": cores, "mem_gib": mem, "python": py, "summary": summary}


DOCS_BEGIN = "<!-- bench:begin -->"
DOCS_END = "<!-- bench:end -->"


def update_docs(markdown: str) -> None:
    path = os.path.join(ROOT, "docs", "performance.md")
    with open(path) as f:
        text = f.read()
    start = text.index(DOCS_BEGIN) + len(DOCS_BEGIN)
    end = text.index(DOCS_END)
    with open(path, "w") as f:
        f.write(text[:start] + "\n" + markdown + "\n" + text[end:])


if __name__ == "__main__":
    sys.exit(main())
