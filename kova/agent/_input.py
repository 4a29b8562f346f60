"""The agent's public boundary: what a turn accepts, checked in the caller's task.

No caller input may crash an actor. The provider actor serves many agents and turns at
once, so a malformed history that reached one of them as an ``AttributeError``
would crash it, fail every request it was serving, and, repeated, make the supervisor give up
on the whole runtime. Every public entry point of :class:`~kova.agent.Agent` therefore checks
its input here first and raises ``TypeError`` in the caller, naming the bad item by its index.

The checks are plain ``isinstance`` tests over the messages and their blocks (about a
microsecond for a short history), so every turn pays them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._models import (
    Audio,
    Document,
    File,
    Image,
    InferenceConfig,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)

__all__ = [
    "HistoryInput",
    "block_problem",
    "check_call_options",
    "check_messages",
    "coerce_history",
]

HistoryInput = str | Message | Sequence[Message]
"""What a turn accepts: one user message as text, one :class:`~kova.Message`, or a sequence of
them (the caller's history, never modified)."""


def coerce_history(history: object) -> tuple[Message, ...]:
    """``history`` as a tuple of checked messages.

    A ``str`` becomes one user message; a :class:`~kova.Message` a one-message history.

    Raises:
        TypeError: ``history`` is none of the accepted forms, or one of its messages (or
            blocks) has the wrong type; the message names the index and the type found.
    """
    if isinstance(history, tuple | list):  # the usual forms, without the ABC check (~10x dearer)
        messages: tuple[Message, ...] = tuple(history)
    elif isinstance(history, str):
        return (Message.user(history),)
    elif isinstance(history, Message):
        messages = (history,)
    elif isinstance(history, Sequence) and not isinstance(history, bytes | bytearray):
        messages = tuple(history)
    else:
        raise TypeError(
            "history must be a str, a kova.Message or a sequence of kova.Message, "
            f"got {type(history).__name__}"
        )
    check_messages(messages)
    return messages


def check_messages(messages: Sequence[object]) -> None:
    """Check that every item is a :class:`~kova.Message` whose blocks are well typed.

    Raises:
        TypeError: naming the first bad item's index (and block index) and its type.
    """
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(
                f"history[{index}] must be a kova.Message, got {type(message).__name__}"
                + _hint(message)
            )
        for block_index, block in enumerate(message.content):
            problem = block_problem(block)
            if problem is not None:
                raise TypeError(f"history[{index}].content[{block_index}]: {problem}")


def check_call_options(config: object, cancel: object) -> None:
    """Check the keyword options every turn takes.

    Raises:
        TypeError: ``config`` is not an :class:`~kova.InferenceConfig` (or ``None``), or
            ``cancel`` is not a :class:`~kova.agent.CancelToken` (or ``None``).
    """
    if config is not None and not isinstance(config, InferenceConfig):
        raise TypeError(f"config must be a kova.InferenceConfig, got {type(config).__name__}")
    if cancel is not None and not _is_token(cancel):
        raise TypeError(f"cancel must be a kova.CancelToken, got {type(cancel).__name__}")


def _hint(item: object) -> str:
    if isinstance(item, Mapping):
        return " (a dict: build it with Message.user(...) or Message.from_dict(...))"
    if isinstance(item, str):
        return " (a str: wrap it with Message.user(...))"
    return ""


def _is(value: object, kind: type | tuple[type, ...]) -> bool:
    # Through a function on purpose: the fields are typed, and mypy would call a check of
    # a value the caller built without type checking "unreachable".
    return isinstance(value, kind)


def _optional_str(value: object) -> bool:
    return value is None or _is(value, str)


def block_problem(block: object) -> str | None:
    """Why ``block`` cannot be sent to a provider, or None."""
    if type(block) is ToolResult and type(block.content) is type(block.tool_use_id) is str:
        return None  # the usual tool result
    match block:
        case Text(text=text):
            if not _is(text, str):
                return f"Text.text must be a str, got {type(text).__name__}"
        case ToolUse(id=call_id, name=name, input=arguments):
            if not _is(call_id, str) or not _is(name, str):
                return "ToolUse.id and ToolUse.name must be str"
            if not _is(arguments, Mapping):
                return f"ToolUse.input must be a mapping, got {type(arguments).__name__}"
        case ToolResult(content=content, tool_use_id=tool_use_id):
            if not _is(tool_use_id, str):
                return f"ToolResult.tool_use_id must be a str, got {type(tool_use_id).__name__}"
            if not _is(content, str):
                if not _is(content, tuple):
                    return (
                        "ToolResult.content must be a str or a tuple of Text, Image and "
                        "Document, "
                        f"got {type(content).__name__}"
                    )
                for part in content:
                    if not _is(part, (Text, Image, Document)):
                        return (
                            "a ToolResult part must be Text, Image or Document, "
                            f"got {type(part).__name__}"
                        )
                    if isinstance(part, Text) and not _is(part.text, str):
                        return f"Text.text must be a str, got {type(part.text).__name__}"
        case Image(media_type=media_type, data=data, url=url):
            if not (_optional_str(media_type) and _optional_str(data) and _optional_str(url)):
                return "Image fields must be str or None"
        case Document() | Audio() | File():
            pass  # checked in full when made; their fields cannot be changed afterwards
        case Thinking(text=text, signature=signature):
            if not _is(text, str) or not _optional_str(signature):
                return "Thinking.text must be a str and its signature a str or None"
        case RedactedThinking(data=data):
            if not _is(data, str):
                return f"RedactedThinking.data must be a str, got {type(data).__name__}"
        case _:
            return (
                "a content block must be Text, Image, Document, Audio, File, ToolUse, "
                "ToolResult, Thinking or "
                f"RedactedThinking, got {type(block).__name__}"
            )
    return None


def _is_token(cancel: object) -> bool:
    from ._cancel import CancelToken  # trio: not loaded with the pure turn core

    return isinstance(cancel, CancelToken)
