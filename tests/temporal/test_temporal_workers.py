"""Workers in processes of their own: one is killed with SIGKILL in the middle of a tool
step, and a second worker finishes the turn. Tool calls that finished are not run again;
the one annotated idempotent is run again, with the same idempotency key, its effect
happening once; the unannotated one that was in flight is answered in-band (it may or may
not have taken effect), never run twice."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio
from temporal_helpers import fake_openai, run, tied_popen, unique
from temporalio.client import Client

import kova.temporal
from kova import Message
from kova.testing import ScriptRequest, reply_text, reply_tool_calls

HERE = Path(__file__).parent


def _worker(
    address: str, queue: str, url: str, effects: Path, slow: float, *, wait: bool = False
) -> subprocess.Popen[str]:
    """A worker process, polling once it returns; ``wait``: loaded, and polling once
    :func:`_go` is called (``_go`` returns when it polls)."""
    process = _spawn(address, queue, url, effects, slow, wait=wait)
    _expect(process, "LOADED" if wait else "READY")
    return process


def _spawn(
    address: str, queue: str, url: str, effects: Path, slow: float, *, wait: bool = False
) -> subprocess.Popen[str]:
    # Started from this (the main) thread: a tied process ends with the thread that started it.
    return tied_popen(
        [
            sys.executable,
            str(HERE / "worker_process.py"),
            address,
            queue,
            url,
            str(effects),
            str(slow),
            *(["wait"] if wait else []),
        ],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE if wait else None,
        text=True,
    )


def _expect(process: subprocess.Popen[str], word: str) -> None:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip() == word, line


def _go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()
    _expect(process, "READY")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _marked_started(handle: Any) -> dict[str, int]:
    """The turn's pending tool activities whose "started" heartbeat the server holds, by
    tool, with their attempt (an attempt over 1 means one was retried before the kill)."""
    description = await handle.describe()
    marked: dict[str, int] = {}
    for pending in description.raw_description.pending_activities:
        details = [payload.data for payload in pending.heartbeat_details.payloads]
        if b'"kova: tool call started"' in details:
            marked[pending.activity_type.name.rsplit(".", 1)[-1]] = pending.attempt
    return marked


def test_a_worker_killed_mid_tool_and_a_second_worker_completes_the_turn(
    temporal_address: str, tmp_path: Path
) -> None:
    requests: list[ScriptRequest] = []

    def script(request: ScriptRequest) -> Any:
        requests.append(request)
        last = request.messages[-1]
        if last.role.value == "tool":
            return reply_text(" | ".join(block.text for block in last.content))
        return reply_tool_calls(
            ("note", {"text": "start"}), ("report", {"month": "May"}), ("pay", {"amount": 40})
        )

    queue = unique("killed")
    started, done = tmp_path / "started", tmp_path / "done"
    with fake_openai(script) as url:
        first = _worker(temporal_address, queue, url, tmp_path, slow=60)
        second = None
        try:

            async def main() -> Any:
                nonlocal second
                client = await Client.connect(temporal_address)
                handle = await kova.temporal.start_turn(
                    client,
                    agent="ops",
                    history="Do the monthly work",
                    task_queue=queue,
                    id=unique("turn"),
                    # Long enough that a loaded machine's late heartbeat does not time the
                    # calls out (and retry them) before the kill; the second worker takes
                    # over this long after it.
                    heartbeat_timeout=2,
                )
                # Kill once the server holds the "started" heartbeat of report and pay (the
                # mark a retried attempt reads) and their tools have begun, not after a time:
                # a kill in between would rightly count as not having started them.
                deadline = time.monotonic() + 60
                while True:
                    marked = await _marked_started(handle)
                    begun = sorted(line.split()[0] for line in _lines(started))
                    if marked == {"report": 1, "pay": 1} and begun == ["note", "pay", "report"]:
                        break
                    assert all(attempt == 1 for attempt in marked.values()), (
                        f"a call was retried before the kill (a heartbeat over 2 s late): {marked}"
                    )
                    assert time.monotonic() < deadline, (marked, begun)
                    await asyncio.sleep(0.05)
                os.kill(first.pid, signal.SIGKILL)  # mid-tool: report and pay are running
                first.wait()
                second = _worker(temporal_address, queue, url, tmp_path, slow=0)
                return await kova.temporal.response(handle)

            response = run(main)
        finally:
            for process in (first, second):
                if process is not None:
                    if process.poll() is None:
                        process.kill()
                        process.wait()
                    assert process.stdout is not None
                    process.stdout.close()
    results = {block.tool_use_id: block for block in response.new_messages[1].content}
    assert results["call_1"].text == "noted start"
    assert results["call_2"].text == "report for May"
    assert results["call_3"].is_error
    assert "may or may not have taken effect" in results["call_3"].text
    # note ran once (its result was recorded before the kill); report ran twice, with the
    # same idempotency key, and its effect happened once; pay started once and never again.
    names = [line.split()[0] for line in _lines(started)]
    assert sorted(names) == ["note", "pay", "report", "report"]
    keys = {line.split()[1] for line in _lines(started) if line.startswith("report")}
    assert len(keys) == 1
    assert [line.split()[0] for line in _lines(done)] == ["note", "report"]
    assert len(requests) == 2


def test_a_worker_killed_after_a_summary_and_the_next_worker_does_not_summarize_again(
    temporal_address: str, tmp_path: Path
) -> None:
    """The summary a context policy asked for is an activity: its result is in the
    workflow's history, so the worker that takes the turn over sends the same compacted
    history and never asks the summarizer again (counted at the model server)."""
    summaries: list[ScriptRequest] = []
    calls: list[ScriptRequest] = []

    async def script(request: ScriptRequest) -> Any:
        if request.messages[-1].text.startswith("<conversation>"):
            summaries.append(request)
            return reply_text("The user keeps bees and wants a name for the queen.")
        calls.append(request)
        if len(calls) == 1:
            await trio.sleep(60)  # the first worker dies in this call
        return reply_text("Call her Beatrix.")

    history = []
    for day in range(6):
        history.append(Message.user(f"Day {day}: the hive is busy. " + "buzz " * 60))
        history.append(Message.assistant(f"Noted for day {day}. " + "ok " * 60))
    history.append(Message.user("Name the queen."))
    queue = unique("summary")
    with fake_openai(script) as url:
        first = second = None
        try:
            # Both loaded at once (each takes seconds to import): the second polls only
            # once the first is dead.
            first = _spawn(temporal_address, queue, url, tmp_path, 0)
            second = _spawn(temporal_address, queue, url, tmp_path, 0, wait=True)
            _expect(first, "READY")
            _expect(second, "LOADED")

            async def main() -> Any:
                client = await Client.connect(temporal_address)
                handle = await kova.temporal.start_turn(
                    client,
                    agent="summing",
                    history=history,
                    task_queue=queue,
                    id=unique("turn"),
                    heartbeat_timeout=2,
                )
                deadline = time.monotonic() + 60
                while not calls:  # the summary is in; the first call with it is on its way
                    assert time.monotonic() < deadline, "the model was never called"
                    await asyncio.sleep(0.02)
                assert first is not None
                assert second is not None
                os.kill(first.pid, signal.SIGKILL)
                first.wait()
                _go(second)
                return await kova.temporal.response(handle)

            response = run(main)
        finally:
            for process in (first, second):
                if process is not None:
                    if process.poll() is None:
                        process.kill()
                        process.wait()
                    for stream in (process.stdout, process.stdin):
                        if stream is not None:
                            stream.close()
    assert response.text == "Call her Beatrix."
    assert len(summaries) == 1
    assert len(calls) == 2
    # Both workers sent the same compacted history: the summary, then what it kept.
    assert calls[0].messages == calls[1].messages
    assert calls[0].messages[0].text.startswith("Summary of the earlier conversation:")
    assert "bees" in calls[0].messages[0].text
    assert calls[0].messages[-1].text.endswith("Name the queen.")
    assert len(calls[0].messages) == 1  # the summary leads the kept prompt's message
    assert response.compaction is not None
    assert response.compaction.strategy == "summarize"
    assert response.llm_calls == 2
