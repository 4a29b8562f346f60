"""Tool-call ids unique within a turn, whatever the provider sent.

A turn keys everything about a call by its id: its result, a person's decision, the journal's
record of it, and ``ToolContext.idempotency_key``. Providers do not all keep ids unique: an
OpenAI-compatible server that sends none gets ids by position (``call_0`` in every reply), a
stream may repeat an item, a hostile server may send the same id twice in one reply. So when
a model's reply reaches the turn (:meth:`kova.agent.Turn.model_replied`), a call whose id the
turn has already seen (in its history, an earlier reply, or earlier in this reply) gets a new
one: the wire id with ``_2``, ``_3`` ... appended, the first such that is free. Every other id
is kept exactly as the provider sent it, so a well-behaved provider's ids make the round trip
untouched; a renamed call goes back to the provider under its new id, in the assistant
message and in its result alike, so the history stays consistent.

The renaming depends only on the turn's messages, so a journal or a workflow that restores the
turn (or replays its model replies) gets the same ids again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._messages import ToolUse
from .._record import evolve

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .._messages import Message
    from .._responses import ModelResponse

__all__ = ["call_ids_of", "unique_call_ids"]


def call_ids_of(messages: Iterable[Message]) -> set[str]:
    """The ids of the tool calls ``messages`` hold."""
    return {
        block.id for message in messages for block in message.content if isinstance(block, ToolUse)
    }


def unique_call_ids(
    response: ModelResponse, calls: tuple[ToolUse, ...], seen: set[str]
) -> tuple[ModelResponse, tuple[ToolUse, ...]]:
    """``response`` (whose tool calls are ``calls``) with each call's id unique among
    ``seen`` and the reply's other calls (``seen`` is updated with the reply's ids), and its
    calls: the same objects when nothing repeats."""
    ids = [call.id for call in calls]
    if seen.isdisjoint(ids) and len(set(ids)) == len(ids):
        seen.update(ids)
        return response, calls
    # A first occurrence the turn has not seen keeps its wire id; reserve those first, so a
    # renamed call never takes an id a later call of the same reply arrives with.
    taken = seen | set(ids)
    kept: set[str] = set()
    renamed: dict[int, str] = {}
    for position, call_id in enumerate(ids):
        if call_id not in seen and call_id not in kept:
            kept.add(call_id)
            continue
        number = 2
        while f"{call_id}_{number}" in taken:
            number += 1
        new_id = f"{call_id}_{number}"
        taken.add(new_id)
        renamed[position] = new_id
    seen.update(taken)
    content = []
    position = 0
    for block in response.content:
        if isinstance(block, ToolUse):
            fresh = renamed.get(position)
            position += 1
            if fresh is not None:
                block = evolve(block, id=fresh)
        content.append(block)
    response = evolve(response, content=tuple(content))
    return response, response.tool_uses
