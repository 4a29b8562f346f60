"""Recovery by design, on trio's MockClock: a server that goes away and comes back.

``FlakyTransport`` wraps the in-process transport: ``kill()`` cuts the current connection
(the client's read stream ends, as when a process dies or a socket drops) and ``down``
makes every connection attempt fail with ``ConnectionRefusedError``, as a stopped server
would. Everything runs in one process on virtual time, so a one-minute outage takes
milliseconds and the backoff schedule is asserted exactly.
"""

from __future__ import annotations

import datetime
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import pytest
import structlog.testing
import trio
import trio.testing
from mcp.client._memory import InMemoryTransport
from mcp_test_server import build_server

import kova
from kova.mcp import McpClient, McpConnectionState, ReconnectPolicy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

GUARD = 3600  # virtual seconds; a hang guard

NO_JITTER = ReconnectPolicy(initial=1.0, factor=2.0, maximum=8.0, jitter=0)


@attrs.define(eq=False)
class FlakyTransport:
    """An in-process server that can be killed and kept down."""

    server: Any
    down: bool = False
    opened: int = 0
    refused_after: float = 0.0
    """How long an attempt takes to be refused while down (a slow network, a loaded host)."""
    _kill: trio.Event = attrs.field(factory=trio.Event)

    def kill(self) -> None:
        """Cut the live connection (the server "crashed")."""
        self._kill.set()

    def open(self) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Any]:
        if self.down:
            await trio.sleep(self.refused_after)
            raise ConnectionRefusedError("connection refused (the test server is down)")
        self.opened += 1
        kill = self._kill = trio.Event()
        async with InMemoryTransport(self.server) as (read_stream, write_stream):
            send, receive = anyio.create_memory_object_stream[Any](0)

            async def pump() -> None:
                async with send, trio.open_nursery() as nursery:

                    async def forward() -> None:
                        async for item in read_stream:
                            await send.send(item)
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(forward)
                    await kill.wait()
                    nursery.cancel_scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump)
                try:
                    yield receive, write_stream
                finally:
                    nursery.cancel_scope.cancel()
                    receive.close()


async def test_a_one_minute_outage_does_not_end_the_block(autojump_clock):
    transport = FlakyTransport(build_server())
    states: list[McpConnectionState] = []
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(
            transport, name="flaky", reconnect=NO_JITTER, on_state_change=states.append
        ) as client:
            assert (await client.tools_call("echo", {"text": "up"})).text == "up"
            transport.down = True
            transport.kill()
            start = trio.current_time()
            state = await client.wait_for_state("unavailable")
            assert state.attempts == 1
            # Calls fail fast, naming the server and since when; nothing waits a timeout.
            with pytest.raises(kova.McpUnavailableError, match="'flaky' is unavailable since"):
                await client.tools_call("echo", {"text": "down"})
            assert trio.current_time() == start
            await trio.sleep(60)
            with pytest.raises(kova.McpUnavailableError) as caught:
                await client.tools_list()
            assert caught.value.server == "flaky"
            assert caught.value.since == state.since
            assert caught.value.attempts == 10  # at 0, 1, 3, 7, 15, 23, ... 55 s
            assert "ConnectionRefusedError" in str(caught.value)
            transport.down = False
            state = await client.wait_for_state("connected")
            assert trio.current_time() - start == 63  # the next attempt after 55 s + 8 s
            assert state.session == 2
            assert (await client.tools_call("echo", {"text": "back"})).text == "back"
    attempts = [entry for entry in logs if entry["event"] == "mcp.reconnect.failed"]
    assert [entry["retry_in"] for entry in attempts] == [1, 2, 4, 8, 8, 8, 8, 8, 8, 8]
    assert [state.status for state in states] == [
        "connected",
        "connecting",
        *["unavailable", "connecting"] * 10,
        "connected",
        "closed",
    ]
    assert "actor.restarted" not in [entry["event"] for entry in logs]


async def test_a_call_while_the_actor_tries_again_fails_at_once(autojump_clock):
    # Each attempt takes 5 s to be refused. The first attempt after the loss is waited for
    # (the server may be back at once); once one has failed the server is known to be down,
    # and a call made while the actor tries again does not wait on that attempt.
    transport = FlakyTransport(build_server(), refused_after=5.0)
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport, reconnect=NO_JITTER) as client:
            transport.down = True
            transport.kill()
            await client.wait_for_state("connecting")
            start = trio.current_time()
            with pytest.raises(kova.McpUnavailableError, match="is unavailable since"):
                await client.tools_call("echo", {"text": "first attempt"})
            assert trio.current_time() - start == 5  # waited for the first attempt
            await trio.sleep(1.5)  # the 1 s backoff after it: the second attempt is under way
            assert (client.state.status, client.state.attempts) == ("connecting", 1)
            start = trio.current_time()
            with pytest.raises(kova.McpUnavailableError, match="is unavailable since"):
                await client.tools_call("echo", {"text": "retry"})
            assert trio.current_time() == start


async def test_calls_can_wait_for_the_server_instead(autojump_clock):
    transport = FlakyTransport(build_server())
    with trio.fail_after(GUARD):
        async with McpClient.connect(
            transport, reconnect=NO_JITTER, wait_for_connection=True
        ) as client:
            transport.down = True
            transport.kill()
            await client.wait_for_state("unavailable")
            start = trio.current_time()

            async def bring_back() -> None:
                await trio.sleep(5)
                transport.down = False

            async with trio.open_nursery() as nursery:
                nursery.start_soon(bring_back)
                result = await client.tools_call("echo", {"text": "waited"})
            assert result.text == "waited"
            assert trio.current_time() - start == 7  # attempts at 1, 3 and 7 s into the outage
            # Past its own timeout, a waiting call still says what is wrong.
            transport.down = True
            transport.kill()
            await client.wait_for_state("unavailable")
            with pytest.raises(kova.McpUnavailableError, match="is unavailable since"):
                await client.tools_call_with_timeout("echo", {"text": "late"}, 2)


async def test_read_only_call_in_flight_is_replayed_on_the_new_session(autojump_clock):
    events: list[str] = []
    transport = FlakyTransport(build_server(events))
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(transport, reconnect=NO_JITTER) as client:
            results: list[str] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    result = await client.tools_call("wait", {"seconds": 5, "tag": "r"})
                    results.append(result.text)

                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                transport.kill()
            assert results == ["waited 5.0"]
    assert events.count("started r") == 2
    assert transport.opened == 2
    (replayed,) = [entry for entry in logs if entry["event"] == "mcp.request.replayed"]
    assert (replayed["tool"], replayed["delivered"]) == ("wait", True)  # it had reached the server


async def test_call_that_may_have_run_fails_saying_so(autojump_clock):
    events: list[str] = []
    transport = FlakyTransport(build_server(events))
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport, reconnect=NO_JITTER) as client:
            failures: list[kova.McpCallInterruptedError] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    with pytest.raises(kova.McpCallInterruptedError) as caught:
                        await client.tools_call("write_after", {"seconds": 5, "tag": "w"})
                    failures.append(caught.value)

                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                transport.kill()
            assert failures[0].tool == "write_after"
            assert "may or may not have run" in str(failures[0])
            assert failures[0].replayed is False
            await client.wait_for_state("connected")
            # The host may opt in for this one tool.
    assert events.count("started w") == 1


async def test_a_call_in_flight_waits_for_the_server_to_come_back_and_is_replayed(
    autojump_clock,
):
    # The tools were never listed: the annotations are fetched on the new session. While the
    # server is down the call waits to be sent again (failing fast would say "nothing was
    # sent" about a call the server ran).
    events: list[str] = []
    transport = FlakyTransport(build_server(events))
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport, reconnect=NO_JITTER) as client:
            results: list[str] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    result = await client.tools_call("wait", {"seconds": 5, "tag": "r"})
                    results.append(result.text)

                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                start = trio.current_time()
                transport.down = True
                transport.kill()
                await trio.sleep(2)
                transport.down = False
            assert results == ["waited 5.0"]
            # Reconnect attempts at 0, 1 and 3 s (up at 3), then the 5 s call again.
            assert trio.current_time() - start == 8
    assert events.count("started r") == 2


async def test_a_call_lost_past_its_timeout_may_have_run_and_says_so(autojump_clock):
    transport = FlakyTransport(build_server())
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport, reconnect=NO_JITTER) as client:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    with pytest.raises(kova.McpCallInterruptedError) as caught:
                        await client.tools_call_with_timeout("wait", {"seconds": 5}, 4)
                    assert trio.current_time() - start == 4  # its own timeout, exactly
                    assert caught.value.why == "no new session came up within the call's 4s timeout"
                    assert "may or may not have run" in str(caught.value)

                start = trio.current_time()
                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                transport.down = True
                transport.kill()


async def test_an_unannotated_call_is_refused_for_what_its_annotations_say(autojump_clock):
    # Never listed before: the listing on the new session says it is not annotated, which
    # the error now says because it is true (not because the listing failed).
    transport = FlakyTransport(build_server())
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport, reconnect=NO_JITTER) as client:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    with pytest.raises(kova.McpCallInterruptedError) as caught:
                        await client.tools_call("write_after", {"seconds": 5})
                    assert caught.value.why == "the tool is not annotated read-only or idempotent"

                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                transport.down = True
                transport.kill()
                await trio.sleep(2)
                transport.down = False


async def test_a_call_made_while_the_server_is_down_was_not_sent_and_says_so(autojump_clock):
    transport = FlakyTransport(build_server())
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport, reconnect=NO_JITTER) as client:
            transport.down = True
            transport.kill()
            await client.wait_for_state("unavailable")
            with pytest.raises(kova.McpUnavailableError):
                await client.tools_call("write_after", {"seconds": 1})


async def test_host_opts_in_to_replay_by_name(autojump_clock):
    events: list[str] = []
    transport = FlakyTransport(build_server(events))
    with trio.fail_after(GUARD):
        async with McpClient.connect(
            transport, reconnect=NO_JITTER, replay_tools=["write_after"]
        ) as client:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    result = await client.tools_call("write_after", {"seconds": 5, "tag": "o"})
                    assert result.text == "wrote o"

                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                transport.kill()
    assert events.count("started o") == 2
    assert events.count("wrote o") == 1


async def test_giving_up_is_available_and_hands_over_to_the_supervisor(autojump_clock):
    transport = FlakyTransport(build_server())
    policy = ReconnectPolicy(initial=1.0, jitter=0, give_up_after=10)
    with trio.fail_after(GUARD), pytest.raises(kova.ActorFailed) as caught:
        async with McpClient.connect(transport, reconnect=policy):
            transport.down = True
            transport.kill()
            await trio.sleep_forever()
    # The block ends with ActorFailed itself (as documented), not a group around it.
    assert type(caught.value) is kova.ActorFailed
    # Restarted within the client's supervisor intensity, then given up on.
    assert "exceeded 3 restarts" in str(caught.value)


def test_backoff_is_capped_and_jittered():
    policy = ReconnectPolicy(initial=0.5, factor=3, maximum=10, jitter=0.2)
    import random

    rng = random.Random(7)
    delays = [policy.delay(failures, rng) for failures in range(1, 8)]
    for failures, delay in enumerate(delays, start=1):
        base = min(10, 0.5 * 3 ** (failures - 1))
        assert base * 0.8 <= delay <= base * 1.2
    assert len(set(delays)) == len(delays)
    assert ReconnectPolicy(jitter=0).delay(1) == 0.1
    with pytest.raises(ValueError, match="max_attempts"):
        ReconnectPolicy(max_attempts=0)


def test_unavailable_error_names_the_server_and_since_when():
    since = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    error = kova.McpUnavailableError(server="files", since=since, reason="refused", attempts=3)
    assert str(error) == (
        "MCP server 'files' is unavailable since 2026-01-02 03:04:05 UTC "
        "(3 reconnect attempts failed; last error: refused)"
    )
    assert isinstance(error, kova.KovaConnectionError)
    assert error.is_retryable


async def test_a_call_waiting_for_a_session_when_the_policy_gives_up_is_unavailable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """It never reached a server: McpUnavailableError, not "may or may not have run"."""
    events: list[str] = []
    transport = FlakyTransport(build_server(events))
    policy = ReconnectPolicy(initial=1.0, jitter=0, give_up_after=10)
    errors: list[BaseException] = []
    with trio.fail_after(GUARD), pytest.raises(kova.ActorFailed):
        async with McpClient.connect(
            transport, reconnect=policy, wait_for_connection=True
        ) as client:
            transport.down = True
            transport.kill()
            await trio.testing.wait_all_tasks_blocked()
            assert client.state.status == "unavailable"
            # Made while the actor backs off: it waits for the session that never comes.
            with pytest.raises(kova.KovaError) as caught:
                await client.tools_call_with_timeout("write_after", {"seconds": 0}, 60)
            errors.append(caught.value)
            await trio.sleep_forever()
    assert type(errors[0]) is kova.McpUnavailableError, repr(errors[0])
    # Issue 44, item 5: the reason is not nested twice (it named the server and the
    # attempts a second time, inside "last error: ...").
    message = str(errors[0])
    assert message.count("MCP server") == 1, message
    assert message.count("reconnect attempts") == 1, message
    assert message.endswith("; the reconnect policy gave up)"), message
    assert events == []  # nothing ran


async def test_a_sent_call_waiting_to_be_replayed_when_the_policy_gives_up_may_have_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    events: list[str] = []
    transport = FlakyTransport(build_server(events))
    policy = ReconnectPolicy(initial=1.0, jitter=0, give_up_after=10)
    errors: list[BaseException] = []
    with trio.fail_after(GUARD), pytest.raises(kova.ActorFailed):
        async with McpClient.connect(transport, reconnect=policy) as client:
            await client.tools_list()  # 'wait' is read-only: a lost call is sent again
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    with pytest.raises(kova.KovaError) as caught:
                        await client.tools_call_with_timeout("wait", {"seconds": 5, "tag": "r"}, 60)
                    errors.append(caught.value)

                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                assert events == ["started r"]
                transport.down = True
                transport.kill()
            await trio.sleep_forever()
    error = errors[0]
    assert type(error) is kova.McpCallInterruptedError, repr(error)
    assert "gave up" in str(error)
