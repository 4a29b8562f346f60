"""Supervision trees: a supervisor as a child, escalation to the parent."""

from __future__ import annotations

import pytest
import structlog.testing
import trio
import trio.testing

from kova import ActorError, ActorFailed, MailboxClosed
from kova.actors import (
    Backoff,
    ChildSpec,
    GetChild,
    ListChildren,
    SpawnChild,
    StopChild,
    Strategy,
    open_supervisor,
    supervisor_spec,
)

from .test_supervisor import Journal, worker


def leaf_tree(
    journal: Journal,
    *,
    max_restarts: int = 1,
    within: float = 10.0,
    strategy: Strategy = "one_for_one",
) -> ChildSpec:
    return supervisor_spec(
        "tree",
        [
            ChildSpec(factory=worker("leaf", journal), name="leaf"),
            ChildSpec(factory=worker("twig", journal), name="twig"),
        ],
        strategy=strategy,
        max_restarts=max_restarts,
        within=within,
        backoff=Backoff.none(),
    )


async def test_subtree_gives_up_and_the_parent_restarts_it(
    autojump_clock: trio.testing.MockClock,
):
    journal = Journal()
    with structlog.testing.capture_logs() as logs:
        async with open_supervisor(name="root", backoff=Backoff(initial=2.0)) as root:
            tree = await root.spawn(leaf_tree(journal))
            assert await tree.call(ListChildren()) == ("leaf", "twig")
            leaf = await tree.call(GetChild(name="leaf"))
            await trio.sleep(1)
            leaf.cast("crash")  # t=1: the subtree restarts its child
            await trio.sleep(1)
            leaf.cast("crash")  # t=2: second restart within 10 s: the subtree gives up
            await trio.sleep(1)
            with pytest.raises(MailboxClosed):
                await leaf.call("who")
            # the root restarts the subtree after its 2 s backoff; calls queue meanwhile
            fresh = await tree.call(GetChild(name="leaf"))
            assert trio.current_time() == 4.0
            assert await fresh.call("who") == "leaf"
    assert journal.times("leaf", "start") == [0.0, 1.0, 4.0]
    assert journal.times("twig", "stop") == [2.0, 4.0]  # at the give-up, and at the end
    gave_up = [entry for entry in logs if entry["event"] == "supervisor.gave_up"]
    assert [entry["supervisor"] for entry in gave_up] == ["tree"]
    tree_crash = [
        entry for entry in logs if entry["event"] == "actor.crashed" and entry["actor"] == "tree"
    ]
    assert len(tree_crash) == 1
    assert tree_crash[0]["supervisor"] == "root"
    assert tree_crash[0]["exc_info"].subgroup(ActorFailed) is not None


async def test_escalation_reaches_the_top(autojump_clock: trio.testing.MockClock):
    journal = Journal()
    with pytest.RaisesGroup(pytest.RaisesExc(ActorFailed, match="'root'")) as info:
        async with open_supervisor(name="root", max_restarts=0) as root:
            tree = await root.spawn(leaf_tree(journal, max_restarts=0))
            leaf = await tree.call(GetChild(name="leaf"))
            await trio.sleep(5)
            leaf.cast("crash")
            await trio.sleep_forever()
    failure = info.value.exceptions[0]
    # the root failed from the subtree's failure, which failed from the leaf's crash
    inner = failure.__cause__
    assert isinstance(inner, BaseExceptionGroup)
    tree_failure = inner.subgroup(ActorFailed).exceptions[0]
    assert tree_failure.actor == "tree"
    assert isinstance(tree_failure.__cause__, RuntimeError)
    assert journal.times("leaf", "stop") == [5.0]
    assert journal.times("twig", "stop") == [5.0]


async def test_subtree_spawn_stop_and_unknown_child() -> None:
    journal = Journal()
    async with open_supervisor() as root:
        tree = await root.spawn(leaf_tree(journal))
        extra = await tree.call(SpawnChild(spec=ChildSpec(factory=worker("x", journal), name="x")))
        assert await extra.call("who") == "x"
        await tree.call(StopChild(name="leaf"))
        assert await tree.call(ListChildren()) == ("twig", "x")
        with pytest.raises(ActorError, match="no child"):
            await tree.call(GetChild(name="leaf"))
    # the subtree stopped its children in reverse start order when the root closed
    assert journal.order("stop") == ["leaf", "x", "twig"]


async def test_subtree_keeps_its_own_strategy_and_window(autojump_clock: trio.testing.MockClock):
    journal = Journal()
    async with open_supervisor(name="root") as root:
        # one_for_all: the leaf's crash restarts the twig too; a 1 s window: crashes 2 s
        # apart never exceed one restart in it.
        tree = await root.spawn(leaf_tree(journal, within=1.0, strategy="one_for_all"))
        for _ in range(3):
            await trio.sleep(2)
            (await tree.call(GetChild(name="leaf"))).cast("crash")
        await trio.sleep(1)
    assert journal.times("twig", "start") == [0.0, 2.0, 4.0, 6.0]
    assert journal.times("leaf", "start") == [0.0, 2.0, 4.0, 6.0]
