"""A fake OpenAI Responses API server on loopback, driven by a :class:`~kova.testing.Script`.

Real HTTP/1.1, the real wire format: kova's :class:`~kova.providers.openai.OpenAiResponsesProvider`,
the official ``openai`` package (``client.responses.create`` / ``responses.stream``) or any
other Responses client can talk to it::

    async with open_responses_server(Script([reply_text("Hello!")])) as server:
        provider = OpenAiResponsesProvider(
            OpenAiResponsesConfig(base_url=server.base_url, model="gpt-fake", api_key="test")
        )
        ...
        assert server.requests[0].json()["store"] is False

Routes (matched by path suffix, so Azure's ``/openai/v1`` and ``/openai`` prefixes work too):

* ``POST …/responses``: the next scripted reply, as a ``response`` object, or with
  ``"stream": true`` as the named SSE events OpenAI sends (``response.created``, items added,
  text / argument / reasoning-summary deltas, items done, ``response.completed`` or
  ``response.incomplete``; no ``[DONE]``). A :class:`~kova.Thinking` block (or a reply's
  ``thinking``) becomes a ``reasoning`` item with a summary and an ``encrypted_content`` blob
  bound to its id. An :class:`~kova.testing.ErrorReply` answers with its status and an
  OpenAI error body (and ``retry-after`` headers); an ``ErrorEvent`` in a
  :class:`~kova.testing.StreamReply` becomes an ``error`` event in the shape
  :attr:`FakeResponsesServer.stream_error_shape` says; ``cut_after`` drops the connection
  before the terminal event.
* ``POST …/responses/input_tokens``: ``{"object": "response.input_tokens", "input_tokens": n}``
  (kova's offline estimate of the decoded request, deterministic).
* ``GET …/models``: the configured model ids.

Like the real API it refuses (400/404, OpenAI's messages) what a stateless client gets
wrong: a reasoning item without its ``encrypted_content`` under ``store: false``, a blob that
does not belong to the item's id, a reasoning item sent without the item that followed it
(or the other way round), a call without exactly one output or an output without its call,
``input_text`` in an assistant message, Chat-shaped tools, ``max_output_tokens`` below 16.
Every request is recorded in :attr:`FakeResponsesServer.requests`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, assert_never

from .._json import utf8_safe
from .._models import (
    ErrorEvent,
    MediaOutput,
    ModelResponse,
    RedactedThinking,
    SignedThinking,
    StopEvent,
    StopKind,
    StopReason,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolUse,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
)
from ..providers._base import heuristic_count_tokens
from ..providers.openai._convert import encode_arguments
from ..providers.openai._responses_convert import ITEM_KEY, encode_usage
from ._fake_server import FakeServer, opener, script_request, scripted_stream
from ._http_server import FakeResponse, FakeStream, RecordedRequest, json_response
from ._script import ErrorReply, ScriptLike, StreamReply
from ._wire.openai import SSE_HEADERS, error_code, error_response, model_list
from ._wire.openai_responses import DecodedRequest, RequestRejected, decode_request

if TYPE_CHECKING:
    from .._models import JSONValue, StreamEvent, Usage

__all__ = ["FakeResponsesServer", "open_responses_server"]

_CREATED = 1_767_225_600
_ERROR_CATEGORIES = {
    "rate_limit_exceeded": "tokens",
    "server_error": "server_error",
    "insufficient_quota": "insufficient_quota",
    "context_length_exceeded": "invalid_request_error",
    "invalid_api_key": "invalid_request_error",
    "model_not_found": "invalid_request_error",
}
"""The codes an ``ErrorEvent.error_type`` may name, and the ``type`` OpenAI sends them with."""
_BLOB_PREFIX = "gAAAAkova"
REFUSE_ENCRYPTED_REASONING = ("gpt-4o", "gpt-4.1-mini", "gpt-5-chat-latest")
"""Models seen refusing ``reasoning.encrypted_content`` live (pydantic-ai #2865, #3326, #2915)."""


def _blob(item_id: str, summary: str) -> str:
    """The fake ``encrypted_content`` of a reasoning item: bound to its id, as OpenAI's is."""
    raw = json.dumps({"id": item_id, "summary": summary}).encode()
    return _BLOB_PREFIX + base64.urlsafe_b64encode(raw).decode("ascii")


def _blob_id(blob: str) -> str | None:
    if not blob.startswith(_BLOB_PREFIX):
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(blob[len(_BLOB_PREFIX) :]))
    except ValueError:
        return None
    return value.get("id") if isinstance(value, dict) else None


def _status(stop_reason: StopReason) -> tuple[str, JSONValue]:
    match stop_reason.kind:
        case StopKind.MAX_TOKENS:
            return "incomplete", {"reason": "max_output_tokens"}
        case StopKind.UNKNOWN if stop_reason.raw not in ("", "refusal", "stop"):
            return "incomplete", {"reason": stop_reason.raw}
        case _:
            return "completed", None


def _finished(
    shell: Mapping[str, JSONValue], stop_reason: StopReason, output: JSONValue, usage: Usage | None
) -> dict[str, JSONValue]:
    """The ``response`` object of an answer that ended (whole, or a stream's last event)."""
    status, incomplete = _status(stop_reason)
    return {
        **shell,
        "status": status,
        "completed_at": _CREATED + 1 if status == "completed" else None,
        "incomplete_details": incomplete,
        "output": output,
        "usage": encode_usage(usage) if usage is not None else None,
    }


def _error(
    status: int,
    message: str,
    *,
    error_type: str | None = None,
    code: str | None = None,
    retry_after: float | None = None,
) -> FakeResponse:
    # The Responses API's code: the one given, else the type, else the status's
    # (``server_error`` for a 5xx).
    if code is None:
        code = error_type or error_code(status) or ("server_error" if status >= 500 else None)
    return error_response(
        status, message, error_type=error_type, code=code, retry_after=retry_after
    )


class _Items:
    """Output item ids of one response, and which item followed each reasoning item."""

    def __init__(self, prefix: str, followers: dict[str, str]) -> None:
        self._prefix = prefix
        self._count = 0
        self._followers = followers
        self._pending: list[str] = []

    def reasoning(self) -> str:
        item_id = self._new_id("rs")
        self._pending.append(item_id)
        return item_id

    def follower(self, kind: str) -> str:
        item_id = self._new_id(kind)
        for reasoning_id in self._pending:
            self._followers[reasoning_id] = item_id
        self._pending = []
        return item_id

    def _new_id(self, kind: str) -> str:
        self._count += 1
        return f"{kind}_{self._prefix}{self._count:02d}"


def _reasoning_item(item_id: str, summary: str) -> dict[str, JSONValue]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}] if summary else [],
        "encrypted_content": _blob(item_id, summary),
    }


def _message_item(
    item_id: str, text: str, *, refusal: bool, phase: JSONValue
) -> dict[str, JSONValue]:
    part: dict[str, JSONValue] = (
        {"type": "refusal", "refusal": text}
        if refusal
        else {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    )
    item: dict[str, JSONValue] = {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "content": [part],
        "role": "assistant",
    }
    if isinstance(phase, str):
        item["phase"] = phase
    return item


def _call_item(item_id: str, call: ToolUse | ToolUseStart, arguments: str) -> dict[str, JSONValue]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "arguments": arguments,
        "call_id": call.id,
        "name": call.name,
    }


def _phase(metadata: object) -> JSONValue:
    if isinstance(metadata, Mapping):
        meta = metadata.get(ITEM_KEY)
        if isinstance(meta, Mapping):
            phase = meta.get("phase")
            return phase if isinstance(phase, str) else None
    return None


def output_items(response: ModelResponse, items: _Items) -> list[JSONValue]:
    """A scripted response's ``output`` list."""
    output: list[JSONValue] = []
    refusal = response.stop_reason == StopReason.unknown("refusal")
    if response.thinking and not any(
        isinstance(b, Thinking | RedactedThinking) for b in response.content
    ):
        item_id = items.reasoning()
        output.append(_reasoning_item(item_id, response.thinking))
    for block in response.content:
        if isinstance(block, Thinking | RedactedThinking):
            item_id = items.reasoning()
            output.append(
                _reasoning_item(item_id, block.text if isinstance(block, Thinking) else "")
            )
        elif isinstance(block, Text):
            item_id = items.follower("msg")
            output.append(
                _message_item(
                    item_id, block.text, refusal=refusal, phase=_phase(block.provider_metadata)
                )
            )
        elif isinstance(block, ToolUse):
            item_id = items.follower("fc")
            output.append(_call_item(item_id, block, encode_arguments(block)))
    return output


class FakeResponsesServer(FakeServer):
    """A scripted OpenAI Responses API server. :meth:`serve` it in a nursery (or use
    :func:`open_responses_server`) and point any Responses client at :attr:`base_url` (the
    official SDK wants ``base_url + "/v1"``).

    Args:
        script: the replies to ``POST /v1/responses``, in order.
        model: the ``model`` reported when a request names none.
        models: ids listed by ``GET /v1/models``.
        stream_error_shape: how an ``ErrorEvent`` of a scripted stream is sent: ``"nested"``
            (``{"type": "error", "error": {...}}``, what OpenAI sends), ``"flat"`` (the
            documented ``{"type": "error", "code": ..., "message": ...}``) or ``"failed"``
            (a ``response.failed`` event).
        snapshot_suffix: appended to the requested model in responses, as OpenAI answers an
            alias with its dated snapshot (``gpt-5.4`` -> ``gpt-5.4-2026-03-05``).
        refuse_encrypted_reasoning: models that answer a request asking for
            ``include: ["reasoning.encrypted_content"]`` with OpenAI's 400 "Encrypted content
            is not supported with this model." (non-reasoning models do, live). By default
            the ones seen doing it: ``gpt-4o``, ``gpt-4.1-mini``, ``gpt-5-chat-latest``.
        host, port: where :meth:`serve` listens unless told otherwise (0: a free port).
    """

    __slots__ = (
        "_followers",
        "_responses",
        "model",
        "models",
        "refuse_encrypted_reasoning",
        "snapshot_suffix",
        "stream_error_shape",
    )

    def __init__(
        self,
        script: ScriptLike,
        model: str = "gpt-fake",
        models: Sequence[str] = ("gpt-fake",),
        stream_error_shape: Literal["nested", "flat", "failed"] = "nested",
        snapshot_suffix: str = "",
        refuse_encrypted_reasoning: Sequence[str] = REFUSE_ENCRYPTED_REASONING,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(script, host=host, port=port)
        self.refuse_encrypted_reasoning = tuple(refuse_encrypted_reasoning)
        self.model = model
        self.models = models
        self.stream_error_shape = stream_error_shape
        self.snapshot_suffix = snapshot_suffix
        self._responses = 0
        self._followers: dict[str, str] = {}
        """reasoning item id -> the id of the item that followed it (across all responses)."""

    def responses_requests(self) -> list[RecordedRequest]:
        """The ``POST …/responses`` requests received, in order."""
        return [
            r
            for r in self.requests
            if r.method == "POST" and r.path.rstrip("/").endswith("/responses")
        ]

    async def _route(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        path = request.path.rstrip("/")
        if request.method == "POST" and path.endswith("/responses/input_tokens"):
            return self._input_tokens(request)
        if request.method == "POST" and path.endswith("/responses"):
            return await self._create(request)
        if request.method == "GET" and path.endswith("/models"):
            return model_list(self.models, created=_CREATED)
        return _error(404, f"no route for {request.method} {request.path}")

    def _decode(self, request: RecordedRequest) -> DecodedRequest | FakeResponse:
        try:
            body = request.json()
            decoded = decode_request(body)
            self._check_reasoning(decoded.items)
            self._check_include(body, decoded.config.model or self.model)
        except RequestRejected as exc:
            return _error(exc.status, str(exc), code=exc.code)
        except ValueError as exc:
            return _error(400, f"invalid request body: {exc}")
        return decoded

    def _check_include(self, body: JSONValue, model: str) -> None:
        include = body.get("include") if isinstance(body, Mapping) else None
        if (
            isinstance(include, list)
            and "reasoning.encrypted_content" in include
            and model in self.refuse_encrypted_reasoning
        ):
            raise RequestRejected("Encrypted content is not supported with this model.")

    def _check_reasoning(self, items: Sequence[Mapping[str, JSONValue]]) -> None:
        ids = {item.get("id") for item in items if isinstance(item.get("id"), str)}
        leaders = {follower: leader for leader, follower in self._followers.items()}
        for item in items:
            item_id = item.get("id")
            kind = item.get("type", "message")
            if kind == "reasoning":
                blob = item.get("encrypted_content")
                if isinstance(blob, str) and _blob_id(blob) != item_id:
                    raise RequestRejected(
                        "The encrypted content for item "
                        f"{item_id} could not be verified. Reason: item_id did not match.",
                        code="invalid_encrypted_content",
                    )
                follower = self._followers.get(str(item_id))
                if follower is not None and follower not in ids:
                    raise RequestRejected(
                        f"Item '{item_id}' of type 'reasoning' was provided without its "
                        "required following item."
                    )
            elif isinstance(item_id, str) and item_id in leaders and leaders[item_id] not in ids:
                raise RequestRejected(
                    f"Item '{item_id}' of type '{kind}' was provided without its required "
                    f"'reasoning' item: '{leaders[item_id]}'."
                )

    def _input_tokens(self, request: RecordedRequest) -> FakeResponse:
        decoded = self._decode(request)
        if isinstance(decoded, FakeResponse):
            return decoded
        count = heuristic_count_tokens(decoded.messages, decoded.tools)
        return json_response({"object": "response.input_tokens", "input_tokens": count})

    async def _create(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        decoded = self._decode(request)
        if isinstance(decoded, FakeResponse):
            return decoded
        body = request.json()
        assert isinstance(body, Mapping)
        model = (decoded.config.model or self.model) + self.snapshot_suffix
        reply = await self._reply(script_request(decoded, stream=decoded.stream, recorded=request))
        self._responses += 1
        number = self._responses
        shell = _response_shell(f"resp_kova{number:04d}", model, body)
        items = _Items(f"kova{number:04d}", self._followers)
        if isinstance(reply, ErrorReply):
            return _error(
                reply.status_code,
                reply.message,
                error_type=reply.error_type,
                retry_after=reply.retry_after,
            )
        if not decoded.stream:
            response = reply.response if isinstance(reply, StreamReply) else reply
            output = output_items(response, items)
            return json_response(_finished(shell, response.stop_reason, output, response.usage))
        return scripted_stream(
            reply,
            _EventEncoder(shell, items, self.stream_error_shape),
            headers=SSE_HEADERS,
            hold=True,
        )


def _response_shell(
    response_id: str, model: str, body: Mapping[str, JSONValue]
) -> dict[str, JSONValue]:
    """The fields of a ``response`` object that echo the request."""
    text = body.get("text")
    return {
        "id": response_id,
        "object": "response",
        "created_at": _CREATED,
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": text if isinstance(text, Mapping) else {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None,
        "metadata": {},
    }


class _EventEncoder:
    """kova stream events -> Responses SSE events (named, numbered, no ``[DONE]``)."""

    def __init__(self, shell: dict[str, JSONValue], items: _Items, error_shape: str) -> None:
        self._shell = shell
        self._items = items
        self._error_shape = error_shape
        self._sequence = 0
        self._output: list[JSONValue] = []
        self._open: dict[str, JSONValue] | None = None
        """The item being streamed (its ``done`` form is built as it goes)."""
        self._text: list[str] = []
        self._calls: dict[int, tuple[ToolUseStart, int, str, list[str]]] = {}
        """kova index -> (start, output_index, item id, argument pieces)."""
        self._stop: StopReason = StopReason.END_TURN
        self._usage: Usage | None = None

    def _event(self, kind: str, **fields: JSONValue) -> bytes:
        data: dict[str, JSONValue] = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        # A lone surrogate (a model's text, a hostile call id) goes as its JSON escape.
        text = utf8_safe(json.dumps(data, separators=(",", ":"), ensure_ascii=False))
        return f"event: {kind}\ndata: {text}\n\n".encode()

    def start(self) -> bytes:
        return self._event("response.created", response=self._shell) + self._event(
            "response.in_progress", response=self._shell
        )

    def _close(self) -> bytes:
        item = self._open
        if item is None:
            return b""
        self._open = None
        index = len(self._output)
        item_id = str(item["id"])
        out = b""
        if item["type"] == "reasoning":
            summary = "".join(self._text)
            if summary:
                part: JSONValue = {"type": "summary_text", "text": summary}
                out += self._event(
                    "response.reasoning_summary_text.done",
                    item_id=item_id,
                    output_index=index,
                    summary_index=0,
                    text=summary,
                )
                out += self._event(
                    "response.reasoning_summary_part.done",
                    item_id=item_id,
                    output_index=index,
                    summary_index=0,
                    part=part,
                )
            done = _reasoning_item(item_id, summary)
        else:  # message
            text = "".join(self._text)
            done = _message_item(item_id, text, refusal=False, phase=item.get("phase"))
            content = done["content"]
            assert isinstance(content, list)
            out += self._event(
                "response.output_text.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            out += self._event(
                "response.content_part.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=content[0],
            )
        self._text = []
        self._output.append(done)
        return out + self._event("response.output_item.done", output_index=index, item=done)

    def _open_reasoning(self) -> bytes:
        item_id = self._items.reasoning()
        self._open = {"id": item_id, "type": "reasoning"}
        index = len(self._output)
        added: JSONValue = {"id": item_id, "type": "reasoning", "summary": []}
        return self._event("response.output_item.added", output_index=index, item=added)

    def _open_message(self, phase: JSONValue) -> bytes:
        item_id = self._items.follower("msg")
        self._open = {"id": item_id, "type": "message", "phase": phase}
        index = len(self._output)
        added: dict[str, JSONValue] = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        if isinstance(phase, str):
            added["phase"] = phase
        part: JSONValue = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return self._event("response.output_item.added", output_index=index, item=added) + (
            self._event(
                "response.content_part.added",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=part,
            )
        )

    def encode(self, event: StreamEvent) -> bytes:
        match event:
            case TextDelta(text=text, provider_metadata=metadata):
                out = b""
                if self._open is None or self._open["type"] != "message":
                    out += self._close() + self._open_message(_phase(metadata))
                if text:
                    self._text.append(text)
                    item_id = str(self._open_id())
                    out += self._event(
                        "response.output_text.delta",
                        item_id=item_id,
                        output_index=len(self._output),
                        content_index=0,
                        delta=text,
                        logprobs=[],
                    )
                if metadata is not None:
                    out += self._close()  # the piece that ends a part
                return out
            case ThinkingDelta(text=text):
                out = b""
                if self._open is None or self._open["type"] != "reasoning":
                    out += self._close() + self._open_reasoning()
                    out += self._event(
                        "response.reasoning_summary_part.added",
                        item_id=self._open_id(),
                        output_index=len(self._output),
                        summary_index=0,
                        part={"type": "summary_text", "text": ""},
                    )
                self._text.append(text)
                return out + self._event(
                    "response.reasoning_summary_text.delta",
                    item_id=self._open_id(),
                    output_index=len(self._output),
                    summary_index=0,
                    delta=text,
                )
            case SignedThinking():
                if self._open is not None and self._open["type"] == "reasoning":
                    return self._close()
                return self._close() + self._open_reasoning() + self._close()
            case ToolUseStart(index=index):
                out = self._close()
                item_id = self._items.follower("fc")
                output_index = len(self._output)
                self._output.append(None)  # its place; filled when the call ends
                self._calls[index] = (event, output_index, item_id, [])
                added = _call_item(item_id, event, "")
                added["status"] = "in_progress"
                return out + self._event(
                    "response.output_item.added", output_index=output_index, item=added
                )
            case ToolUseDelta(index=index, partial_json=piece):
                _start, output_index, item_id, pieces = self._calls[index]
                pieces.append(piece)
                return self._event(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=output_index,
                    delta=piece,
                )
            case ToolUseEnd(index=index):
                return self._end_call(index)
            case StopEvent(stop_reason=stop_reason):
                self._stop = stop_reason
                out = self._close()
                for index in list(self._calls):
                    out += self._end_call(index)
                return out
            case UsageEvent(usage=usage):
                self._usage = usage
                return b""
            case ErrorEvent(message=message, error_type=error_type):
                # A code kova knows goes in ``code`` under its category, as OpenAI sends
                # it; any other error_type is the ``type`` (with no code).
                code: str | None = error_type or "server_error"
                kind = _ERROR_CATEGORIES.get(code or "")
                if kind is None:
                    kind, code = code or "server_error", None
                error: JSONValue = {"type": kind, "code": code, "message": message, "param": None}
                if self._error_shape == "flat":
                    return self._event("error", code=code or kind, message=message, param=None)
                if self._error_shape == "failed":
                    failed = {
                        **self._shell,
                        "status": "failed",
                        "output": self._done_output(),
                        "error": {"code": code or kind, "message": message},
                    }
                    return self._event("response.failed", response=failed)
                return self._event("error", error=error)
            case MediaOutput():
                return b""  # the fake answers no generated images yet
            case _:
                assert_never(event)

    def _open_id(self) -> str:
        assert self._open is not None
        return str(self._open["id"])

    def _end_call(self, index: int) -> bytes:
        if index not in self._calls:
            return b""
        start, output_index, item_id, pieces = self._calls.pop(index)
        arguments = "".join(pieces)
        done = _call_item(item_id, start, arguments)
        self._output[output_index] = done
        return self._event(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=output_index,
            arguments=arguments,
        ) + self._event("response.output_item.done", output_index=output_index, item=done)

    def _done_output(self) -> list[JSONValue]:
        return [item for item in self._output if item is not None]

    def finish(self) -> bytes:
        out = self._close()
        for index in list(self._calls):
            out += self._end_call(index)
        final = _finished(self._shell, self._stop, self._done_output(), self._usage)
        kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
        return out + self._event(kind, response=final)


open_responses_server = opener(FakeResponsesServer, "open_responses_server", "OpenAI Responses")
