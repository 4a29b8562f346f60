"""Mailbox: bounded queue of requests, orderly close, drain."""

from __future__ import annotations

import pytest
import trio

from kova import MailboxClosed
from kova.actors import Mailbox
from kova.actors._mailbox import Request, RequestKind


def call(payload: object) -> Request:
    return Request(kind=RequestKind.CALL, payload=payload)


async def test_put_nowait_raises_would_block_when_full() -> None:
    mailbox = Mailbox(name="m", size=1)
    mailbox.put_nowait(call(1))
    with pytest.raises(trio.WouldBlock):
        mailbox.put_nowait(call(2))
    assert mailbox.statistics().current_buffer_used == 1


async def test_close_refuses_new_messages_but_delivers_queued_ones() -> None:
    mailbox = Mailbox(name="m")
    first = call(1)
    await mailbox.put(first)
    mailbox.close()
    assert mailbox.closed
    with pytest.raises(MailboxClosed):
        await mailbox.put(call(2))
    with pytest.raises(MailboxClosed):
        mailbox.put_nowait(call(2))
    assert await mailbox.receive_channel.receive() is first
    with pytest.raises(trio.EndOfChannel):
        await mailbox.receive_channel.receive()


async def test_drain_fails_queued_requests_and_skips_abandoned_ones() -> None:
    mailbox = Mailbox(name="m")
    waiting, abandoned = call(1), call(2)
    await mailbox.put(waiting)
    await mailbox.put(abandoned)
    assert abandoned.abandon()
    assert mailbox.drain() == 2
    assert waiting.done.is_set()
    assert waiting.result is not None
    with pytest.raises(MailboxClosed, match="'m'"):
        waiting.result.unwrap()
    assert not abandoned.done.is_set()


def test_negative_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="size"):
        Mailbox(name="m", size=-1)
