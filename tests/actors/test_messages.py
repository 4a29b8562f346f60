"""Typed messages and one answer to an unknown message, in every actor kind."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from kova.actors import Actor, Call, UnknownMessage, open_runtime, supervisor_spec
from kova.actors._subtree import ListChildren
from kova.telemetry import open_metrics

if TYPE_CHECKING:
    import trio.testing


class Strange:
    """A message no actor knows."""


class Plain(Actor):
    pass


class Echo(Call[str]):
    """A message the concurrent actor knows."""

    __slots__ = ()


class Concurrent(Actor):
    """A concurrent actor that serves calls and streams."""

    concurrent = True

    async def handle_call(self, message: Any) -> Any:
        if type(message) is Echo:
            return "echo"
        return await super().handle_call(message)

    async def handle_stream(self, message: Any, send: trio.MemorySendChannel[Any]) -> None:
        if type(message) is Echo:
            await send.send("echo")
            return
        await super().handle_stream(message, send)


async def test_a_call_names_its_reply_type_and_unknown_messages_fail_only_the_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_runtime() as runtime:
        plain = await runtime.spawn(Plain)
        pool = await runtime.spawn(Concurrent)
        subtree = await runtime.spawn(supervisor_spec("tree", []))  # type: ignore[arg-type]
        async with open_metrics(runtime=runtime) as metrics:
            for ref in (plain, pool, subtree, metrics.ref):
                with pytest.raises(UnknownMessage, match="does not handle call Strange"):
                    await ref.call(Strange())
            with pytest.raises(UnknownMessage, match="does not handle stream Strange"):
                async with pool.stream(Strange()) as items:
                    await items.receive()
            # Every actor is still serving.
            assert await pool.call(Echo()) == "echo"
            async with pool.stream(Echo()) as items:
                assert [item async for item in items] == ["echo"]
            assert await subtree.call(ListChildren()) == ()
            assert (await metrics.snapshot()).llm_request_count == 0


def test_call_is_a_marker_base() -> None:
    class Ask(Call[int]):
        __slots__ = ()

    assert isinstance(Ask(), Call)
