"""Actor and ActorRef: call, cast, send, stream, request errors, cancellation."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import trio
import trio.testing

from kova import ActorError, ActorFailed, InvalidRequest, MailboxClosed
from kova.actors import LATER, Actor, ActorRef, Backoff, open_runtime


class Echo(Actor):
    async def handle_call(self, message: Any) -> Any:
        match message:
            case ("sleep", seconds, reply):
                await trio.sleep(seconds)
                return reply
            case ("bad-request", text):
                raise InvalidRequest(text)
            case ("crash", text):
                raise RuntimeError(text)
            case _:
                return message


async def test_call_returns_reply() -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Echo, name="echo")
        assert ref.name == "echo"
        assert await ref.call("hello") == "hello"


async def test_concurrent_calls_are_served_in_parallel(autojump_clock: trio.testing.MockClock):
    finished: dict[str, float] = {}

    async with open_runtime() as runtime:
        ref = await runtime.spawn(Echo)

        async def ask(label: str, seconds: float) -> None:
            assert await ref.call(("sleep", seconds, label)) == label
            finished[label] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "slow", 10)
            nursery.start_soon(ask, "fast", 1)
    assert finished == {"slow": 10.0, "fast": 1.0}


class Sequential(Echo):
    concurrent = False


async def test_non_concurrent_actor_serves_in_mailbox_order(
    autojump_clock: trio.testing.MockClock,
):
    finished: dict[str, float] = {}
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Sequential)

        async def ask(label: str, seconds: float) -> None:
            await ref.call(("sleep", seconds, label))
            finished[label] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "slow", 10)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ask, "fast", 1)
    assert finished == {"slow": 10.0, "fast": 11.0}


async def test_request_error_goes_to_caller_and_actor_keeps_running() -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Echo)
        with pytest.raises(InvalidRequest, match="nope"):
            await ref.call(("bad-request", "nope"))
        assert await ref.call("still here") == "still here"


async def test_crash_fails_every_pending_caller_with_actor_failed(
    autojump_clock: trio.testing.MockClock,
):
    outcomes: list[BaseException] = []
    async with open_runtime(backoff=Backoff.none()) as runtime:
        ref = await runtime.spawn(Echo, name="echo")

        async def waiter() -> None:
            try:
                await ref.call(("sleep", 100, "never"))
            except ActorFailed as exc:
                outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(ActorFailed) as crashed:
                await ref.call(("crash", "boom"))
        assert isinstance(crashed.value.__cause__, RuntimeError)
        assert crashed.value.actor == "echo"
        assert len(outcomes) == 2
        assert all(isinstance(exc.__cause__, RuntimeError) for exc in outcomes)
        # permanent child: restarted, the same ref works
        assert await ref.call("again") == "again"


class Tracked(Actor):
    def __init__(self, log: list[tuple[str, float]]) -> None:
        self.log = log

    async def handle_call(self, message: Any) -> Any:
        self.log.append(("started", trio.current_time()))
        try:
            await trio.sleep(message)
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(1)  # slow cleanup: call() must wait for it
            self.log.append(("finally", trio.current_time()))
        return "done"


async def test_cancelling_caller_cancels_actor_work_and_waits_for_its_finally(
    autojump_clock: trio.testing.MockClock,
):
    log: list[tuple[str, float]] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Tracked(log), name="tracked")
        with trio.move_on_after(5) as scope:
            await ref.call(100)
        log.append(("call returned", trio.current_time()))
        assert scope.cancelled_caught
        # the actor is still alive and serving
        assert await ref.call(0) == "done"
    assert log[:3] == [("started", 0.0), ("finally", 6.0), ("call returned", 6.0)]


class Blocked(Actor):
    concurrent = False

    def __init__(self) -> None:
        self.served: list[Any] = []

    async def handle_call(self, message: Any) -> Any:
        self.served.append(message)
        if message == "block":
            await trio.sleep(100)
        return message


async def test_caller_cancelled_before_actor_starts_request_abandons_it(
    autojump_clock: trio.testing.MockClock,
):
    actor = Blocked()
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: actor, name="blocked")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ref.call, "block")
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(1):
                await ref.call("queued")
            # the caller left at once: the queued request never ran
            assert trio.current_time() == 1.0
            nursery.cancel_scope.cancel()
        assert await ref.call("after") == "after"
    assert actor.served == ["block", "after"]


class Counter(Actor):
    concurrent = False

    def __init__(self) -> None:
        self.count = 0

    async def handle_cast(self, message: Any) -> None:
        if message == "bad":
            raise ActorError("not a number")
        self.count += message

    async def handle_call(self, message: Any) -> Any:
        return self.count


async def test_cast_and_send_are_fire_and_forget() -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Counter)
        ref.cast(1)
        ref.cast("bad")  # a request error in a cast is logged, the actor carries on
        await ref.send(2)
        assert await ref.call("count") == 3


class Parked(Actor):
    concurrent = False

    async def handle_call(self, message: Any) -> Any:
        await trio.sleep_forever()

    async def handle_cast(self, message: Any) -> None:
        pass


async def test_cast_into_full_mailbox_raises_would_block(
    autojump_clock: trio.testing.MockClock,
):
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Parked, mailbox_size=2, shutdown_grace=1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ref.call, "park")
            await trio.testing.wait_all_tasks_blocked()
            ref.cast(1)
            ref.cast(2)
            with pytest.raises(trio.WouldBlock):
                ref.cast(3)
            with trio.move_on_after(3):
                await ref.send(3)  # waits for room: backpressure
            assert trio.current_time() == 3.0
            nursery.cancel_scope.cancel()


async def test_stopped_actor_raises_mailbox_closed() -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Echo, name="echo")
        await runtime.stop(ref)
        assert runtime.supervisor.children == ()
        with pytest.raises(MailboxClosed):
            await ref.call("x")
        with pytest.raises(MailboxClosed):
            ref.cast("x")
    with pytest.raises(MailboxClosed):
        await ref.call("x")


class Numbers(Actor):
    def __init__(self, log: list[tuple[str, Any, float]] | None = None) -> None:
        self.log = log if log is not None else []

    async def handle_stream(self, message: Any, send: trio.MemorySendChannel[Any]) -> None:
        count, fail_at = message
        try:
            for number in range(count):
                if number == fail_at:
                    raise InvalidRequest("bad number")
                await send.send(number)
                self.log.append(("sent", number, trio.current_time()))
        finally:
            self.log.append(("producer stopped", None, trio.current_time()))


async def test_stream_delivers_items_in_order() -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Numbers)
        async with ref.stream((5, None)) as items:
            assert [item async for item in items] == [0, 1, 2, 3, 4]


async def test_stream_backpressure_holds_producer(autojump_clock: trio.testing.MockClock):
    log: list[tuple[str, Any, float]] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Numbers(log), name="numbers")
        async with ref.stream((6, None), buffer=2) as items:
            await trio.testing.wait_all_tasks_blocked()
            # 2 items buffered, producer blocked on the third
            assert [entry[1] for entry in log] == [0, 1]
            received = []
            async for item in items:
                received.append(item)
                await trio.sleep(1)
        assert received == [0, 1, 2, 3, 4, 5]


async def test_leaving_stream_early_stops_producer_before_block_exits(
    autojump_clock: trio.testing.MockClock,
):
    log: list[tuple[str, Any, float]] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Numbers(log), name="numbers")
        async with ref.stream((1000, None), buffer=1) as items:
            async for item in items:
                if item == 2:
                    break
        assert log[-1][0] == "producer stopped"
        assert len(log) < 10
        # the actor is fine afterwards
        async with ref.stream((2, None)) as items:
            assert [item async for item in items] == [0, 1]


async def test_cancelled_consumer_stops_producer(autojump_clock: trio.testing.MockClock):
    log: list[tuple[str, Any, float]] = []

    class SlowNumbers(Numbers):
        async def handle_stream(self, message: Any, send: trio.MemorySendChannel[Any]) -> None:
            try:
                for number in range(1000):
                    await trio.sleep(1)
                    await send.send(number)
            finally:
                with trio.CancelScope(shield=True):
                    await trio.sleep(0.5)
                self.log.append(("producer stopped", None, trio.current_time()))

    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: SlowNumbers(log), name="numbers")
        with trio.move_on_after(3.5):
            async with ref.stream(None) as items:
                async for _item in items:
                    pass
        assert trio.current_time() == 4.0
        assert log == [("producer stopped", None, 4.0)]


async def test_stream_request_error_raises_from_iteration() -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Numbers)
        received = []
        with pytest.raises(InvalidRequest, match="bad number"):
            async with ref.stream((5, 3)) as items:
                async for item in items:
                    received.append(item)
        assert received == [0, 1, 2]


class Resourceful(Actor):
    def __init__(self, events: list[str]) -> None:
        self.events = events

    @contextlib.asynccontextmanager
    async def _open(self) -> Any:
        self.events.append("open")
        try:
            yield
        finally:
            self.events.append("close")

    def resources(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._open()

    async def handle_call(self, message: Any) -> Any:
        return list(self.events)


async def test_resources_are_entered_before_start_and_left_on_stop() -> None:
    events: list[str] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Resourceful(events), name="res")
        assert events == ["open"]
        assert await ref.call("x") == ["open"]
    assert events == ["open", "close"]


async def test_actor_runs_standalone_with_nursery_start() -> None:
    from kova.actors import Mailbox

    mailbox = Mailbox(name="solo")
    async with trio.open_nursery() as nursery:
        await nursery.start(Echo().run, mailbox)
        ref = ActorRef(mailbox=mailbox)
        assert await ref.call(7) == 7
        mailbox.close()


class Connection(Actor):
    """Holds a resource whose own task fails after one second (a dropped connection)."""

    @contextlib.asynccontextmanager
    async def _connection(self) -> Any:
        async def watchdog() -> None:
            await trio.sleep(1)
            raise ConnectionResetError("peer went away")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watchdog)
            yield

    def resources(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._connection()

    async def handle_call(self, message: Any) -> Any:
        await trio.sleep(message)
        return "answered"


async def test_resource_failure_fails_in_flight_callers_with_actor_failed(
    autojump_clock: trio.testing.MockClock,
):
    async with open_runtime(backoff=Backoff.none()) as runtime:
        ref = await runtime.spawn(Connection, name="connection")
        with pytest.raises(ActorFailed) as failed:
            await ref.call(10)
        assert trio.current_time() == 1.0
        cause = failed.value.__cause__
        assert isinstance(cause, BaseExceptionGroup)
        assert cause.subgroup(ConnectionResetError) is not None
        # restarted: a short call fits before the new connection drops
        assert await ref.call(0.5) == "answered"
        await runtime.stop(ref)


async def test_frozen_attrs_actor_works() -> None:
    import attrs

    @attrs.frozen
    class Constant(Actor):
        value: int

        async def handle_call(self, message: Any) -> Any:
            return self.value

    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Constant(value=42), name="constant")
        assert await ref.call(None) == 42


async def test_crash_mid_stream_raises_actor_failed_from_iteration(
    autojump_clock: trio.testing.MockClock,
):
    class Fragile(Actor):
        async def handle_stream(self, message: Any, send: trio.MemorySendChannel[Any]) -> None:
            await send.send(1)
            await trio.sleep(1)
            raise KeyError("bug")

    received = []
    async with open_runtime(backoff=Backoff.none()) as runtime:
        ref = await runtime.spawn(Fragile, name="fragile")
        with pytest.raises(ActorFailed) as failed:
            async with ref.stream(None) as items:
                async for item in items:
                    received.append(item)
        assert isinstance(failed.value.__cause__, KeyError)
        assert trio.current_time() == 1.0
    assert received == [1]


async def test_random_cancellations_never_leave_work_running(
    autojump_clock: trio.testing.MockClock,
):
    import random

    rng = random.Random(1234)
    running: set[int] = set()
    violations: list[str] = []

    class Worker(Actor):
        async def handle_call(self, message: Any) -> Any:
            number, seconds = message
            running.add(number)
            try:
                await trio.sleep(seconds)
                return number
            finally:
                with trio.CancelScope(shield=True):
                    await trio.sleep(0.01)
                running.discard(number)

    async with open_runtime() as runtime:
        ref = await runtime.spawn(Worker, mailbox_size=4)

        async def caller(number: int) -> None:
            await trio.sleep(rng.random())
            with trio.move_on_after(rng.random() * 2):
                result = await ref.call((number, rng.random() * 2))
                if result != number:
                    violations.append(f"{number} got {result}")
            if number in running:
                violations.append(f"{number} still running after call() returned")

        async with trio.open_nursery() as nursery:
            for number in range(300):
                nursery.start_soon(caller, number)
    assert violations == []
    assert running == set()


class Busy(Actor):
    """Each call stays in flight for a fixed number of scheduler passes."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0

    async def handle_call(self, message: Any) -> Any:
        self.active += 1
        self.peak = max(self.peak, self.active)
        for _ in range(5):
            await trio.lowlevel.checkpoint()
        self.active -= 1
        return message


async def test_a_burst_of_requests_is_admitted_at_once() -> None:
    """Queued requests are taken without a checkpoint each: 300 callers arriving together are
    all in flight at once, though each call lasts only five scheduler passes (one admission
    per pass let only a handful overlap: the cause of 1,000 agent streams holding ~32
    connections)."""
    actors: list[Busy] = []

    def factory() -> Busy:
        actors.append(Busy())
        return actors[-1]

    async with open_runtime() as runtime:
        ref = await runtime.spawn(factory, name="busy")
        async with trio.open_nursery() as nursery:
            for number in range(300):
                nursery.start_soon(ref.call, number)
    assert actors[0].peak == 300


class Quick(Actor):
    """Answers lookups at once (``handle_now``); anything else in a task of its own."""

    def __init__(self) -> None:
        self.tasks: list[trio.lowlevel.Task] = []
        self.slow_served = 0

    def handle_now(self, message: Any) -> Any:
        self.tasks.append(trio.lowlevel.current_task())
        match message:
            case ("get", key):
                return {"a": 1}.get(key)
            case ("bad-request", text):
                raise InvalidRequest(text)
            case ("crash", text):
                raise RuntimeError(text)
            case _:
                return LATER

    async def handle_call(self, message: Any) -> Any:
        self.tasks.append(trio.lowlevel.current_task())
        await trio.sleep(1)
        self.slow_served += 1
        return ("slow", message)


async def test_handle_now_answers_in_the_actor_task_and_later_falls_back_to_handle_call(
    autojump_clock: trio.testing.MockClock,
):
    actors: list[Quick] = []

    def factory() -> Quick:
        actors.append(Quick())
        return actors[-1]

    async with open_runtime() as runtime:
        ref = await runtime.spawn(factory, name="quick")
        assert await ref.call(("get", "a")) == 1
        assert await ref.call(("get", "b")) is None  # a reply of None is still a reply
        assert trio.current_time() == 0.0
        assert await ref.call("other") == ("slow", "other")
        assert trio.current_time() == 1.0
    quick = actors[0]
    # the two quick answers came from one task (the actor's own loop); the slow call was
    # offered to handle_now first, there, and then served in a task of its own
    main_task = quick.tasks[0]
    assert quick.tasks[:3] == [main_task] * 3
    assert quick.tasks[3] is not main_task
    assert quick.slow_served == 1
    assert repr(LATER) == "kova.actors.LATER"


async def test_handle_now_request_error_fails_that_call_and_a_crash_restarts_the_actor() -> None:
    actors: list[Quick] = []

    def factory() -> Quick:
        actors.append(Quick())
        return actors[-1]

    async with open_runtime(backoff=Backoff.none()) as runtime:
        ref = await runtime.spawn(factory, name="quick")
        with pytest.raises(InvalidRequest, match="no such key"):
            await ref.call(("bad-request", "no such key"))
        assert await ref.call(("get", "a")) == 1
        assert len(actors) == 1  # a request error is not a crash
        with pytest.raises(ActorFailed) as failed:
            await ref.call(("crash", "bug in a quick handler"))
        assert isinstance(failed.value.__cause__, RuntimeError)
        assert await ref.call(("get", "a")) == 1
    assert len(actors) == 2  # restarted


async def test_a_call_made_already_cancelled_is_never_served(
    autojump_clock: trio.testing.MockClock,
):
    """A call is queued without a scheduler pass of its own (its wait for the reply is the
    checkpoint), but one made under a cancelled scope is not queued at all."""
    actor = Blocked()
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: actor, name="blocked")
        with trio.CancelScope() as scope:
            scope.cancel()
            await ref.call("never")
        assert scope.cancelled_caught
        assert await ref.call("after") == "after"
    assert actor.served == ["after"]
