"""Supervisor: OTP restart strategies, restart types, intensity, backoff, orderly shutdown."""

from __future__ import annotations

import contextlib
import traceback
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import structlog.testing
import trio
import trio.testing

from kova import ActorError, ActorFailed, MailboxClosed
from kova.actors import (
    Actor,
    Backoff,
    ChildSpec,
    RestartType,
    Strategy,
    open_runtime,
    open_supervisor,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable


@attrs.define
class Journal:
    """What every child did, with trio times: shared by the test and its actors."""

    entries: list[tuple[str, str, float]] = attrs.field(factory=list)

    def add(self, name: str, what: str) -> None:
        self.entries.append((name, what, trio.current_time()))

    def times(self, name: str, what: str) -> list[float]:
        return [time for who, did, time in self.entries if who == name and did == what]

    def order(self, what: str) -> list[str]:
        return [who for who, did, _ in self.entries if did == what]


class Worker(Actor):
    """Records its lifecycle; crashes or stops on command."""

    def __init__(self, label: str, journal: Journal, crash_on_start: int = 0) -> None:
        self.label = label
        self.journal = journal
        self.crash_on_start = crash_on_start

    @contextlib.asynccontextmanager
    async def _lifetime(self) -> AsyncIterator[None]:
        self.journal.add(self.label, "start")
        try:
            yield
        finally:
            self.journal.add(self.label, "stop")

    def resources(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._lifetime()

    async def background(self) -> None:
        if len(self.journal.times(self.label, "start")) <= self.crash_on_start:
            raise RuntimeError(f"{self.label} failed at start")

    async def handle_cast(self, message: Any) -> None:
        match message:
            case "crash":
                raise RuntimeError(f"{self.label} crashed")
            case "stop":
                self.request_stop()

    async def handle_call(self, message: Any) -> Any:
        match message:
            case ("sleep", seconds):
                await trio.sleep(seconds)
                return "slept"
            case _:
                return self.label


def worker(label: str, journal: Journal, **kwargs: Any) -> Callable[[], Worker]:
    return lambda: Worker(label, journal, **kwargs)


async def test_one_for_one_restarts_only_the_crashed_child(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    async with open_supervisor(backoff=Backoff.none()) as supervisor:
        refs = [await supervisor.spawn(worker(n, journal), name=n) for n in ("a", "b", "c")]
        refs[1].cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        assert [await ref.call("who") for ref in refs] == ["a", "b", "c"]
        assert [len(journal.times(n, "start")) for n in "abc"] == [1, 2, 1]


@pytest.mark.parametrize(
    ("strategy", "stopped", "restarted"),
    [
        ("one_for_all", ["b", "c", "a"], ["a", "b", "c"]),
        ("rest_for_one", ["b", "c"], ["b", "c"]),
    ],
)
async def test_strategy_restarts_the_right_siblings(
    autojump_clock: trio.testing.MockClock,
    strategy: Strategy,
    stopped: list[str],
    restarted: list[str],
):
    journal = Journal()
    async with open_supervisor(strategy=strategy, backoff=Backoff.none()) as supervisor:
        refs = [await supervisor.spawn(worker(n, journal), name=n) for n in ("a", "b", "c")]
        refs[1].cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        # the crashed child first, then its siblings in reverse start order; restarted in
        # start order
        assert journal.order("stop") == stopped
        assert journal.order("start")[3:] == restarted
        assert [await ref.call("who") for ref in refs] == ["a", "b", "c"]
        assert supervisor.children == ("a", "b", "c")


async def test_one_for_all_does_not_restart_temporary_siblings(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    async with open_supervisor(strategy="one_for_all", backoff=Backoff.none()) as supervisor:
        temp = await supervisor.spawn(worker("t", journal), name="t", restart="temporary")
        crashing = await supervisor.spawn(worker("p", journal), name="p")
        crashing.cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        assert supervisor.children == ("p",)
        with pytest.raises(MailboxClosed):
            await temp.call("who")


@pytest.mark.parametrize(
    ("restart", "how", "restarted"),
    [
        ("permanent", "crash", True),
        ("permanent", "stop", True),
        ("transient", "crash", True),
        ("transient", "stop", False),
        ("temporary", "crash", False),
        ("temporary", "stop", False),
    ],
)
async def test_restart_types(
    autojump_clock: trio.testing.MockClock, restart: RestartType, how: str, restarted: bool
):
    journal = Journal()
    async with open_supervisor(backoff=Backoff.none()) as supervisor:
        ref = await supervisor.spawn(worker("x", journal), name="x", restart=restart)
        ref.cast(how)
        await trio.testing.wait_all_tasks_blocked()
        assert len(journal.times("x", "start")) == (2 if restarted else 1)
        if restarted:
            assert await ref.call("who") == "x"
            assert supervisor.children == ("x",)
        else:
            assert supervisor.children == ()
            with pytest.raises(MailboxClosed):
                await ref.call("who")


async def test_restart_intensity_exceeded_escalates_at_exact_time(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    cancelled_at = None
    with pytest.RaisesGroup(pytest.RaisesExc(ActorFailed, match="exceeded 2 restarts")) as info:
        async with open_supervisor(
            name="root", max_restarts=2, within=10.0, backoff=Backoff.none()
        ) as supervisor:
            ref = await supervisor.spawn(worker("x", journal), name="x")
            other = await supervisor.spawn(worker("y", journal), name="y")
            try:
                for _ in range(5):
                    await trio.sleep(3)
                    ref.cast("crash")
                await trio.sleep_forever()
            finally:
                cancelled_at = trio.current_time()
    # crashes at 3 and 6 are restarted; the one at 9 is the third within 10 s
    assert cancelled_at == 9.0
    assert journal.times("x", "start") == [0.0, 3.0, 6.0]
    assert journal.times("y", "stop") == [9.0]
    failure = info.value.exceptions[0]
    assert failure.actor == "root"
    assert isinstance(failure.__cause__, RuntimeError)
    with pytest.raises(MailboxClosed):
        await other.call("who")


async def test_restarts_outside_the_window_do_not_count(autojump_clock: trio.testing.MockClock):
    journal = Journal()
    async with open_supervisor(max_restarts=2, within=10.0, backoff=Backoff.none()) as sup:
        ref = await sup.spawn(worker("x", journal), name="x")
        for _ in range(6):
            await trio.sleep(6)
            ref.cast("crash")
        await trio.testing.wait_all_tasks_blocked()
        assert journal.times("x", "start") == [0.0, 6.0, 12.0, 18.0, 24.0, 30.0, 36.0]


async def test_backoff_delays_are_exact(autojump_clock: trio.testing.MockClock):
    journal = Journal()
    backoff = Backoff(initial=1.0, factor=2.0, maximum=3.0)
    async with open_supervisor(max_restarts=10, within=100.0, backoff=backoff) as supervisor:
        # the first four incarnations crash as soon as they start
        await supervisor.spawn(worker("x", journal, crash_on_start=4), name="x")
        await trio.sleep(50)
    assert journal.times("x", "start") == [0.0, 1.0, 3.0, 6.0, 9.0]


async def test_shutdown_stops_children_in_reverse_start_order() -> None:
    journal = Journal()
    async with open_runtime() as runtime:
        for name in ("first", "second", "third"):
            await runtime.spawn(worker(name, journal), name=name)
    assert journal.order("stop") == ["third", "second", "first"]


async def test_shutdown_lets_in_flight_and_queued_work_finish_within_grace(
    autojump_clock: trio.testing.MockClock,
):
    class OneAtATime(Worker):
        concurrent = False

    journal = Journal()
    replies: list[tuple[str, float]] = []
    async with trio.open_nursery() as callers:
        async with open_runtime() as runtime:
            ref = await runtime.spawn(lambda: OneAtATime("w", journal), name="w", shutdown_grace=5)

            async def ask() -> None:
                replies.append((await ref.call(("sleep", 1)), trio.current_time()))

            for _ in range(3):
                callers.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
        assert trio.current_time() == 3.0
    assert replies == [("slept", 1.0), ("slept", 2.0), ("slept", 3.0)]


async def test_shutdown_cancels_a_child_after_its_grace_period(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    failures: list[tuple[type[BaseException], float]] = []
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as callers:
            async with open_runtime() as runtime:
                ref = await runtime.spawn(worker("w", journal), name="w", shutdown_grace=3)

                async def ask() -> None:
                    try:
                        await ref.call(("sleep", 100))
                    except MailboxClosed as exc:
                        failures.append((type(exc), trio.current_time()))

                callers.start_soon(ask)
                await trio.sleep(1)
            assert trio.current_time() == 4.0
    assert failures == [(MailboxClosed, 4.0)]
    assert journal.times("w", "stop") == [4.0]
    assert any(entry["event"] == "actor.shutdown_timed_out" for entry in logs)


async def test_crash_reaches_supervisor_with_traceback_and_is_logged_once(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    with structlog.testing.capture_logs() as logs:
        async with open_supervisor(name="sup", backoff=Backoff.none()) as supervisor:
            ref = await supervisor.spawn(worker("x", journal), name="x")
            ref.cast("crash")
            await trio.testing.wait_all_tasks_blocked()
    crashes = [entry for entry in logs if entry["event"] == "actor.crashed"]
    assert len(crashes) == 1
    crash = crashes[0]
    assert crash["log_level"] == "error"
    assert crash["actor"] == "x"
    assert crash["supervisor"] == "sup"
    error = crash["exc_info"]
    assert isinstance(error, RuntimeError)
    assert str(error) == "x crashed"
    frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
    assert "handle_cast" in frames
    restarted = [entry for entry in logs if entry["event"] == "actor.restarted"]
    assert [(entry["actor"], entry["restarts"]) for entry in restarted] == [("x", 1)]


async def test_ref_stays_valid_across_restarts_and_queued_calls_survive(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    async with open_supervisor(backoff=Backoff(initial=2.0)) as supervisor:
        ref = await supervisor.spawn(worker("x", journal), name="x")
        ref.cast("crash")
        # queued while the child waits out its backoff: served by the next incarnation
        assert await ref.call("who") == "x"
        assert trio.current_time() == 2.0


async def test_failed_startup_raises_from_spawn() -> None:
    class Broken(Actor):
        def resources(self) -> contextlib.AbstractAsyncContextManager[None]:
            raise ActorError("cannot open")

    async with open_runtime() as runtime:
        with pytest.raises(ActorError, match="cannot open"):
            await runtime.spawn(Broken)
        assert runtime.supervisor.children == ()
        # the name is free again
        await runtime.spawn(lambda: Worker("b", Journal()), name="Broken")


async def test_failed_restart_counts_as_another_crash(autojump_clock: trio.testing.MockClock):
    journal = Journal()
    starts = 0

    def flaky() -> Worker:
        nonlocal starts
        starts += 1
        if starts == 2:
            raise RuntimeError("factory failed")
        return Worker("x", journal)

    with structlog.testing.capture_logs() as logs:
        async with open_supervisor(max_restarts=5, backoff=Backoff(initial=1.0)) as sup:
            ref = await sup.spawn(flaky, name="x")
            ref.cast("crash")
            assert await ref.call("who") == "x"
            # restart 1 waited 1 s and failed to start; restart 2 waited 2 s
            assert trio.current_time() == 3.0
    assert starts == 3
    assert [entry.get("during") for entry in logs if entry["event"] == "actor.crashed"] == [
        None,
        "start",
    ]


async def test_duplicate_names_are_rejected_and_defaults_are_unique() -> None:
    async with open_runtime() as runtime:
        await runtime.spawn(ChildSpec(factory=lambda: Worker("a", Journal()), name="a"))
        with pytest.raises(ValueError, match="already has a child"):
            await runtime.spawn(lambda: Worker("a", Journal()), name="a")
        first = await runtime.spawn(lambda: Worker("w", Journal()))
        second = await runtime.spawn(lambda: Worker("w", Journal()))
        assert first.name == "<lambda>"
        assert second.name == "<lambda>-2"


async def test_stop_child_leaves_siblings_running() -> None:
    journal = Journal()
    async with open_runtime() as runtime:
        a = await runtime.spawn(worker("a", journal), name="a")
        b = await runtime.spawn(worker("b", journal), name="b")
        await runtime.stop("a")
        await runtime.stop("a")  # already gone: nothing happens
        assert runtime.supervisor.children == ("b",)
        assert await b.call("who") == "b"
        with pytest.raises(MailboxClosed):
            await a.call("who")


async def test_the_blocks_own_exception_passes_through_unwrapped() -> None:
    journal = Journal()
    with pytest.raises(KeyError, match="mine"):
        async with open_runtime() as runtime:
            await runtime.spawn(worker("w", journal), name="w")
            raise KeyError("mine")
    assert journal.order("stop") == ["w"]


async def test_outside_cancellation_of_the_block_stops_children(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    with trio.move_on_after(2) as scope:
        async with open_runtime() as runtime:
            await runtime.spawn(worker("w", journal), name="w")
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert journal.times("w", "stop") == [2.0]


async def test_shutdown_during_restart_backoff_is_prompt(autojump_clock: trio.testing.MockClock):
    journal = Journal()
    async with open_supervisor(backoff=Backoff(initial=10.0)) as supervisor:
        ref = await supervisor.spawn(worker("x", journal), name="x")
        ref.cast("crash")
        await trio.sleep(1)
    assert trio.current_time() == 1.0
    assert journal.times("x", "start") == [0.0]
    with pytest.raises(ActorError, match="shutting down"):
        await supervisor.spawn(worker("y", journal), name="y")


async def test_stop_child_during_restart_backoff_prevents_the_restart(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    async with open_supervisor(backoff=Backoff(initial=10.0)) as supervisor:
        ref = await supervisor.spawn(worker("x", journal), name="x")
        other = await supervisor.spawn(worker("y", journal), name="y")
        ref.cast("crash")
        await trio.sleep(1)
        await supervisor.stop_child(ref)
        await trio.sleep(20)
        assert journal.times("x", "start") == [0.0]
        assert supervisor.children == ("y",)
        assert await other.call("who") == "y"


class SlowToStop(Actor):
    """Takes one virtual second to release its resources on an orderly stop."""

    @contextlib.asynccontextmanager
    async def _lifetime(self) -> AsyncIterator[None]:
        yield
        await trio.sleep(1.0)

    def resources(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._lifetime()


async def test_give_up_in_progress_surfaces_when_the_block_ends(
    autojump_clock: trio.testing.MockClock,
):
    """The block ends while the supervisor is stopping its children to give up (which takes
    a second here): the block raises ActorFailed instead of exiting cleanly."""
    journal = Journal()
    with pytest.RaisesGroup(pytest.RaisesExc(ActorFailed, match="exceeded 0 restarts")) as info:
        async with open_supervisor(
            name="root", max_restarts=0, within=10.0, backoff=Backoff.none()
        ) as supervisor:
            await supervisor.spawn(SlowToStop, name="slow")
            ref = await supervisor.spawn(worker("x", journal), name="x")
            ref.cast("crash")
            await trio.sleep(0.5)  # the give-up has started; "slow" is still stopping
            assert trio.current_time() == 0.5
    assert trio.current_time() == 1.0
    assert isinstance(info.value.exceptions[0].__cause__, RuntimeError)


async def test_crash_queued_before_the_block_ends_still_gives_up(
    autojump_clock: trio.testing.MockClock,
):
    """A crash reported before the shutdown began, still queued because the supervisor was
    busy (waiting out a restart backoff), counts: past the intensity, the block raises."""
    journal = Journal()
    with pytest.RaisesGroup(pytest.RaisesExc(ActorFailed, match="exceeded 1 restarts")) as info:
        async with open_supervisor(
            name="root", max_restarts=1, within=10.0, backoff=Backoff(initial=5.0)
        ) as supervisor:
            first = await supervisor.spawn(worker("a", journal), name="a")
            second = await supervisor.spawn(worker("b", journal), name="b")
            first.cast("crash")  # restart 1 of 1: the supervisor waits 5 s before it
            await trio.testing.wait_all_tasks_blocked()
            second.cast("crash")  # queued behind the backoff
            await trio.testing.wait_all_tasks_blocked()
            assert trio.current_time() == 0.0
    assert str(info.value.exceptions[0].__cause__) == "b crashed"


async def test_body_error_and_late_give_up_are_both_raised(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    with pytest.RaisesGroup(
        pytest.RaisesExc(ActorFailed), pytest.RaisesExc(KeyError, match="mine")
    ):
        async with open_supervisor(max_restarts=0, backoff=Backoff.none()) as supervisor:
            await supervisor.spawn(SlowToStop, name="slow")
            ref = await supervisor.spawn(worker("x", journal), name="x")
            ref.cast("crash")
            await trio.sleep(0.5)
            raise KeyError("mine")


async def test_clean_exit_without_crashes_raises_nothing(autojump_clock: trio.testing.MockClock):
    journal = Journal()
    async with open_supervisor(max_restarts=0) as supervisor:
        await supervisor.spawn(SlowToStop, name="slow")
        await supervisor.spawn(worker("x", journal), name="x")
    assert trio.current_time() == 1.0
