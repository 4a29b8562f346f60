"""The JSON messages of kova's web view, version 1 (documented in ``docs/web.md``).

Server to page: every WebSocket text frame is one object ``{"v": 1, "events": [...]}``; the
events in a frame are in order, and a frame holds as many as piled up since the last one (a
page is sent at most one frame per flush interval). Every event is an object with a
``"type"``. Page to server: one object per frame, ``{"v": 1, "type": ..., ...}``, validated
here; anything else closes that page's connection.

Encoding is done once per event (not once per page): an event becomes a JSON string that
every page's buffer shares.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .._json import loads, utf8_safe
from .._models import StopKind, StopReason, TextDelta, ThinkingDelta, ToolAnnotations, Usage
from .._record import Record
from ..telemetry import (
    ActorRestarted,
    ModelCallFinished,
    ModelCallRetrying,
    ModelFirstToken,
    SupervisorGaveUp,
    ToolFinished,
    TurnFinished,
)

if TYPE_CHECKING:
    from .._models import JSONValue, ToolResult, ToolUse
    from ..telemetry import TelemetryEvent

__all__ = [
    "PROTOCOL_VERSION",
    "ChatInput",
    "Decision",
    "ListSessions",
    "OpenSession",
    "PageMessage",
    "PageMessageError",
    "Stop",
    "annotations_json",
    "encode",
    "frame",
    "parse_page_message",
    "telemetry_json",
    "tool_finished",
    "tool_started",
    "usage_json",
]

PROTOCOL_VERSION = 1
"""The version of the message schema; every frame in both directions carries it as ``v``."""

_MAX_ID = 200
_MAX_REASON = 2_000


def encode(event: dict[str, Any]) -> str:
    """One event as compact JSON (encoded once, shared by every page's buffer); a lone
    surrogate in a model's text goes as its JSON escape (a WebSocket text frame is UTF-8)."""
    return utf8_safe(json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str))


def frame(encoded: list[str]) -> str:
    """A server-to-page frame holding these already-encoded events."""
    return f'{{"v":{PROTOCOL_VERSION},"events":[{",".join(encoded)}]}}'


def usage_json(usage: Usage) -> dict[str, Any]:
    """The usage fields a page shows (``cost``: exact USD as a string, when priced)."""
    shown: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cost is not None:
        shown["cost"] = format(usage.cost.normalize(), "f")
    return shown


def annotations_json(annotations: ToolAnnotations | None) -> dict[str, Any] | None:
    """A tool's annotations (``None`` when the tool declares none)."""
    if annotations is None:
        return None
    return {
        "title": annotations.title,
        "read_only": annotations.read_only,
        "destructive": annotations.destructive,
        "idempotent": annotations.idempotent,
        "open_world": annotations.open_world,
    }


def _arguments(call: ToolUse) -> JSONValue:
    if call.raw_arguments is not None:
        return call.raw_arguments
    return dict(call.input)


def _with_path(event: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """``event`` with ``path`` (an inner agent's event, ``agent.as_tool()``); nothing is
    added for the streaming agent's own."""
    if path:
        event["path"] = list(path)
    return event


def tool_started(turn: int, call: ToolUse, path: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``tool_started`` event."""
    started = {
        "type": "tool_started",
        "turn": turn,
        "id": call.id,
        "tool": call.name,
        "arguments": _arguments(call),
    }
    return _with_path(started, path)


def tool_finished(
    turn: int, call: ToolUse, result: ToolResult, path: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The ``tool_finished`` event (``is_error`` covers denials and failures)."""
    finished = {
        "type": "tool_finished",
        "turn": turn,
        "id": call.id,
        "tool": call.name,
        "result": result.text,
        "is_error": result.is_error,
    }
    return _with_path(finished, path)


def tool_deferred(turn: int, call: ToolUse, path: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``tool_deferred`` event: the call waits for a decision after the turn."""
    deferred = {"type": "tool_deferred", "turn": turn, "id": call.id, "tool": call.name}
    return _with_path(deferred, path)


def delta(turn: int, event: TextDelta | ThinkingDelta) -> dict[str, Any]:
    """A ``text`` or ``thinking`` event."""
    kind = "text" if isinstance(event, TextDelta) else "thinking"
    return _with_path({"type": kind, "turn": turn, "text": event.text}, event.path)


# -- page to server ------------------------------------------------------------------------


class PageMessageError(ValueError):
    """A message from a page does not follow the schema (the page is disconnected)."""


class Decision(Record):
    """``{"v": 1, "type": "decision", "id": ..., "approve": bool, "reason"?: str}``."""

    id: str
    approve: bool
    reason: str | None = None


class ChatInput(Record):
    """``{"v": 1, "type": "chat", "text": str}``: a person's prompt (``kova serve``)."""

    text: str


class Stop(Record):
    """``{"v": 1, "type": "stop", "turn"?: int}``: a person pressed Stop (cancel the turn
    running now; ``turn`` names the one the page saw, so a late press stops nothing newer)."""

    turn: int | None = None


class ListSessions(Record):
    """``{"v": 1, "type": "sessions"}``: the page asks for the sessions it can open
    (answered to that page with a ``sessions`` event)."""


class OpenSession(Record):
    """``{"v": 1, "type": "open", "session": str | null}``: open a stored session (its history
    shown on every page, the next prompts continuing it), or a new one (``null``)."""

    session: str | None = None


PageMessage = Decision | ChatInput | Stop | ListSessions | OpenSession


def _string(message: dict[str, Any], key: str, limit: int, *, required: bool = True) -> str | None:
    value = message.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise PageMessageError(f"{key!r} must be a string")
    if len(value) > limit:
        raise PageMessageError(f"{key!r} is longer than {limit} characters")
    return value


def parse_page_message(text: str | bytes, *, max_chat_chars: int) -> PageMessage:
    """Validate one frame from a page.

    Raises:
        PageMessageError: not JSON, not an object, the wrong version, an unknown type, a
            missing or mistyped field, an unexpected field, or a value over its limit.
    """
    if isinstance(text, bytes):
        raise PageMessageError("binary frames are not part of the schema")
    try:
        message = loads(text)
    except ValueError as exc:  # not JSON, or nested too deeply to read (JsonNestingError)
        raise PageMessageError(f"not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise PageMessageError("a message must be a JSON object")
    version = message.get("v")
    if version != PROTOCOL_VERSION or isinstance(version, bool):
        raise PageMessageError(f"unsupported version {version!r} (this server speaks 1)")
    kind = message.get("type")
    if kind == "decision":
        _only(message, {"v", "type", "id", "approve", "reason"})
        identifier = _string(message, "id", _MAX_ID)
        approve = message.get("approve")
        if not isinstance(approve, bool):
            raise PageMessageError("'approve' must be true or false")
        reason = _string(message, "reason", _MAX_REASON, required=False)
        assert identifier is not None
        return Decision(id=identifier, approve=approve, reason=reason or None)
    if kind == "chat":
        _only(message, {"v", "type", "text"})
        prompt = _string(message, "text", max_chat_chars)
        assert prompt is not None
        if not prompt.strip():
            raise PageMessageError("'text' is empty")
        return ChatInput(text=prompt)
    if kind == "stop":
        _only(message, {"v", "type", "turn"})
        turn = message.get("turn")
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int)):
            raise PageMessageError("'turn' must be an integer")
        return Stop(turn=turn)
    if kind == "sessions":
        _only(message, {"v", "type"})
        return ListSessions()
    if kind == "open":
        _only(message, {"v", "type", "session"})
        return OpenSession(session=_string(message, "session", 512, required=False))
    raise PageMessageError(f"unknown message type {kind!r}")


def _only(message: dict[str, Any], allowed: set[str]) -> None:
    extra = set(message) - allowed
    if extra:
        raise PageMessageError(f"unexpected fields: {', '.join(sorted(extra))}")


def stop_reason(reason: StopReason) -> str:
    """``end_turn``, ``tool_use``, ``max_tokens``, ``stop_sequence``, or the provider's own."""
    if reason.kind is StopKind.UNKNOWN and reason.raw:
        return reason.raw
    return str(reason.kind.value)


def telemetry_json(event: TelemetryEvent) -> dict[str, Any] | None:
    """A ``telemetry`` event for the pages (``kind``, fields, a one-line ``summary``)."""
    match event:
        case ModelCallRetrying():
            return {
                "type": "telemetry",
                "kind": "retry",
                "attempt": event.attempt,
                "error_type": event.error_type,
                "wait_s": round(event.wait, 3),
                "summary": f"retry {event.attempt} after {event.error_type}, "
                f"waiting {event.wait:.2f} s",
            }
        case ModelFirstToken():
            return {
                "type": "telemetry",
                "kind": "first_token",
                "latency_s": round(event.latency, 6),
                "summary": f"first token after {event.latency:.2f} s",
            }
        case ModelCallFinished():
            usage = None if event.usage is None else usage_json(event.usage)
            tokens = "" if usage is None else f", {usage['total_tokens']} tokens"
            if usage is not None and "cost" in usage:
                tokens += f", ${usage['cost']}"
            error = f" ({event.error_type})" if event.error_type else ""
            return {
                "type": "telemetry",
                "kind": "model_call",
                "outcome": event.outcome,
                "latency_s": round(event.latency, 6),
                "usage": usage,
                "stop_reason": event.stop_reason,
                "error_type": event.error_type,
                "summary": f"model call {event.outcome}{error} in {event.latency:.2f} s{tokens}",
            }
        case ToolFinished():
            took = "" if event.duration is None else f" in {event.duration:.2f} s"
            return {
                "type": "telemetry",
                "kind": "tool",
                "tool": event.call.name,
                "id": event.call.id,
                "outcome": event.outcome,
                "approved": event.approved,
                "duration_s": event.duration,
                "summary": f"tool {event.call.name}: {event.outcome}{took}",
            }
        case TurnFinished(outcome="error" | "cancelled"):
            return {
                "type": "telemetry",
                "kind": "turn",
                "outcome": event.outcome,
                "error_type": event.error_type,
                "summary": f"turn {event.outcome}: {event.error_type or ''}".rstrip(": "),
            }
        case ActorRestarted():
            return {
                "type": "telemetry",
                "kind": "restart",
                "actor": event.actor,
                "restarts": event.restarts,
                "summary": f"actor {event.actor} restarted ({event.restarts})",
            }
        case SupervisorGaveUp():
            return {
                "type": "telemetry",
                "kind": "gave_up",
                "actor": event.actor,
                "error_type": event.error_type,
                "summary": f"supervisor {event.supervisor} gave up on {event.actor}",
            }
        case _:
            return None


def tool_arguments(
    turn: int, call_id: str, tool: str, text: str, path: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The ``tool_arguments`` event: a call's arguments so far, as the model writes them."""
    return _with_path(
        {"type": "tool_arguments", "turn": turn, "id": call_id, "tool": tool, "text": text}, path
    )


def note(turn: int, text: str, path: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``note`` event: something the turn did by itself (a tool search, a compaction),
    shown dimmed."""
    return _with_path({"type": "note", "turn": turn, "text": text}, path)
