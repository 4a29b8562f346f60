"""A fake Amazon Bedrock (runtime and control plane) on loopback, driven by a
:class:`~kova.testing.Script`.

It speaks the real wire format, so the real :class:`~kova.providers.bedrock.BedrockProvider`
or boto3's ``bedrock-runtime`` client can be pointed at it::

    async with open_bedrock_server(Script([reply_text("Hi")])) as server:
        config = BedrockConfig(region="us-east-1", model_id="anthropic.claude-x-v1:0",
                               endpoint_url=server.base_url, **server.credentials)
        ...

Every request must be signed: SigV4 for service ``bedrock`` in the server's region, checked
with botocore's signer against the server's keys (or a Bedrock API key as ``Authorization:
Bearer``). A bad signature is a 403 ``InvalidSignatureException``, an unknown key a 403
``UnrecognizedClientException``, as AWS answers.

Endpoints: ``POST /model/{modelId}/converse`` (JSON), ``/converse-stream`` (AWS event-stream
frames: ``messageStart``, text and reasoning deltas without a start event, ``toolUse`` blocks
with ``contentBlockStart`` and input fragments, ``messageStop``, ``metadata`` with usage, every
event padded with ``"p"`` as the service does), ``/count-tokens``, and ``GET
/foundation-models`` and ``/inference-profiles`` (paged with ``maxResults``/``nextToken``).

Scripted replies map to the wire like this:

* a :class:`~kova.providers.ModelResponse` is the message; its signed ``Thinking`` and
  ``RedactedThinking`` blocks become ``reasoningContent`` with their signatures;
* an :class:`~kova.testing.ErrorReply` is an HTTP error with ``x-amzn-ErrorType`` (its
  ``error_type``, else the exception AWS sends for the status) and ``{"message"}``;
* a :class:`~kova.testing.StreamReply` chunks the text, may stream exact ``events`` (an
  :class:`~kova.providers.ErrorEvent` among them becomes an ``:message-type: exception``
  message named by its ``error_type``) and may cut the connection after ``cut_after`` kova events.

Every request is recorded in :attr:`FakeBedrockServer.requests`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import InvalidResponse
from .._models import (
    ErrorEvent,
    Message,
    ModelInfo,
    RedactedThinking,
    SignedThinking,
    StopEvent,
    StopReason,
    StreamEvent,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolDefinition,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    Usage,
    UsageEvent,
)
from ..providers._base import heuristic_count_tokens
from ._fake_server import FakeServer, opener, script_request, scripted_stream
from ._http_server import FakeResponse, FakeStream, RecordedRequest, json_response
from ._script import ErrorReply, ScriptLike, StreamReply
from ._wire.bedrock import (
    decode_request,
    event_message,
    exception_message,
    model_id_of,
    response_json,
    stop_to_wire,
    usage_to_wire,
    verify_sigv4,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence

    from .._models import JSONValue

__all__ = [
    "DEFAULT_BEDROCK_MODELS",
    "DEFAULT_BEDROCK_PROFILES",
    "FAKE_ACCESS_KEY_ID",
    "FAKE_SECRET_ACCESS_KEY",
    "FakeBedrockServer",
    "open_bedrock_server",
]

FAKE_ACCESS_KEY_ID = "AKIAFAKEKOVATESTING1"
FAKE_SECRET_ACCESS_KEY = "fake/secret+key/for/kova/testing/only00000"

DEFAULT_BEDROCK_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(
        id="anthropic.claude-sonnet-4-20250514-v1:0",
        display_name="Claude Sonnet 4",
        owned_by="Anthropic",
    ),
    ModelInfo(id="amazon.nova-pro-v1:0", display_name="Nova Pro", owned_by="Amazon"),
    ModelInfo(id="meta.llama3-70b-instruct-v1:0", display_name="Llama 3 70B", owned_by="Meta"),
)
DEFAULT_BEDROCK_PROFILES: tuple[ModelInfo, ...] = (
    ModelInfo(
        id="us.anthropic.claude-sonnet-4-20250514-v1:0",
        object="inference_profile",
        display_name="US Claude Sonnet 4",
    ),
    ModelInfo(
        id="global.anthropic.claude-sonnet-4-20250514-v1:0",
        object="inference_profile",
        display_name="Global Claude Sonnet 4",
    ),
)

_ERROR_NAMES = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}

_ACCOUNT = "123456789012"
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"


def _error(status: int, message: str, error_type: str | None = None) -> FakeResponse:
    name = error_type or _ERROR_NAMES.get(status, "InternalServerException")
    return json_response(
        {"message": message},
        status=status,
        headers={
            "x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/",
            "x-amzn-requestid": "00000000-0000-4000-8000-000000000000",
        },
    )


class _EventWriter:
    """Turns kova stream events into ConverseStream event-stream messages."""

    def __init__(self) -> None:
        self.index = -1
        self.open_kind: str | None = None
        self.stop: StopReason | None = None
        self.usage_sent = False
        self.padding = 0

    def _event(self, event_type: str, data: dict[str, JSONValue]) -> bytes:
        # The service pads every event with a random-length "p" (a side-channel defence).
        self.padding = (self.padding + 7) % len(_PADDING)
        data["p"] = _PADDING[: self.padding + 1]
        return event_message(event_type, data)

    def start(self) -> bytes:
        return self._event("messageStart", {"role": "assistant"})

    def _close(self) -> bytes:
        if self.open_kind is None:
            return b""
        self.open_kind = None
        return self._event("contentBlockStop", {"contentBlockIndex": self.index})

    def _open(self, kind: str) -> bytes:
        out = self._close()
        self.index += 1
        self.open_kind = kind
        return out

    def _delta(self, delta: dict[str, JSONValue]) -> bytes:
        return self._event("contentBlockDelta", {"contentBlockIndex": self.index, "delta": delta})

    def encode(self, event: StreamEvent) -> bytes:
        out = b""
        match event:
            case TextDelta(text=text):
                if self.open_kind != "text":
                    out += self._open("text")
                out += self._delta({"text": text})
            case ThinkingDelta(text=text):
                if self.open_kind != "reasoning":
                    out += self._open("reasoning")
                out += self._delta({"reasoningContent": {"text": text}})
            case SignedThinking(block=Thinking(text=text, signature=signature)):
                if self.open_kind != "reasoning":
                    out += self._open("reasoning")
                    if text:
                        out += self._delta({"reasoningContent": {"text": text}})
                if signature:
                    out += self._delta({"reasoningContent": {"signature": signature}})
                out += self._close()
            case SignedThinking(block=RedactedThinking(data=data)):
                out += self._open("reasoning")
                out += self._delta({"reasoningContent": {"redactedContent": data}})
                out += self._close()
            case ToolUseStart(id=id_, name=name):
                out += self._open("tool")
                out += self._event(
                    "contentBlockStart",
                    {
                        "contentBlockIndex": self.index,
                        "start": {"toolUse": {"toolUseId": id_, "name": name}},
                    },
                )
            case ToolUseDelta(partial_json=fragment):
                out += self._delta({"toolUse": {"input": fragment}})
            case ToolUseEnd():
                out += self._close()
            case StopEvent(stop_reason=stop):
                out += self._close()
                out += self._event("messageStop", {"stopReason": stop_to_wire(stop)})
                self.stop = stop
            case UsageEvent(usage=usage):
                out += self._event(
                    "metadata", {"usage": usage_to_wire(usage), "metrics": {"latencyMs": 1}}
                )
                self.usage_sent = True
            case ErrorEvent(message=message, error_type=error_type):
                out += exception_message(error_type or "internalServerException", message)
        return out

    def finish(self) -> bytes:
        """A stream that ended without a stop or usage event still gets both, as the
        service always sends them."""
        if self.usage_sent:
            return b""
        out = b""
        if self.stop is None:
            out += self.encode(StopEvent(stop_reason=StopReason.END_TURN))
        return out + self.encode(UsageEvent(usage=Usage()))


def _summary(model: ModelInfo, region: str) -> dict[str, JSONValue]:
    return {
        "modelArn": f"arn:aws:bedrock:{region}::foundation-model/{model.id}",
        "modelId": model.id,
        "modelName": model.display_name or model.id,
        "providerName": model.owned_by or "Amazon",
        "inputModalities": ["TEXT"],
        "outputModalities": ["TEXT"],
        "responseStreamingSupported": True,
        "customizationsSupported": [],
        "inferenceTypesSupported": ["ON_DEMAND"],
        "modelLifecycle": {"status": "ACTIVE"},
    }


def _profile(model: ModelInfo, region: str) -> dict[str, JSONValue]:
    base = model.id.split(".", 1)[-1]
    return {
        "inferenceProfileName": model.display_name or model.id,
        "inferenceProfileArn": f"arn:aws:bedrock:{region}:{_ACCOUNT}:inference-profile/{model.id}",
        "inferenceProfileId": model.id,
        "models": [{"modelArn": f"arn:aws:bedrock:{region}::foundation-model/{base}"}],
        "status": "ACTIVE",
        "type": "SYSTEM_DEFINED",
    }


class FakeBedrockServer(FakeServer):
    """A fake Bedrock: :meth:`serve` it in a nursery and point a client at the URL.

    Args:
        script: the replies to Converse and ConverseStream, in order: a
            :class:`~kova.testing.Script`, a list of replies or a function of the request.
        region: the region it serves (the SigV4 scope must name it).
        access_keys: secret access key by access key id (requests must be signed with one);
            by default :data:`FAKE_ACCESS_KEY_ID`/:data:`FAKE_SECRET_ACCESS_KEY`.
        session_tokens: the session token a temporary access key id must send.
        api_key: a Bedrock API key accepted as ``Authorization: Bearer`` (``None``: none).
        models: what ListFoundationModels lists.
        profiles: what ListInferenceProfiles lists.
        count_tokens: computes CountTokens answers from the request's messages and tools;
            defaults to :func:`~kova.providers.heuristic_count_tokens`. A ``ValueError`` it
            raises is answered as a ``ValidationException`` with its message.
        count_tokens_models: model ids CountTokens supports (``None``: all); others get a
            ``ValidationException``.
        structured_output_models: model ids that take ``outputConfig.textFormat`` (``None``:
            all); others get a ``ValidationException``.
        host, port: where :meth:`serve` listens unless told otherwise (0: a free port).
    """

    __slots__ = (
        "access_keys",
        "api_key",
        "count_tokens",
        "count_tokens_models",
        "models",
        "profiles",
        "region",
        "session_tokens",
        "structured_output_models",
    )

    def __init__(
        self,
        script: ScriptLike,
        region: str = "us-east-1",
        access_keys: Mapping[str, str] | None = None,
        session_tokens: Mapping[str, str] | None = None,
        api_key: str | None = None,
        models: Sequence[ModelInfo] = DEFAULT_BEDROCK_MODELS,
        profiles: Sequence[ModelInfo] = DEFAULT_BEDROCK_PROFILES,
        count_tokens: Callable[[list[Message], list[ToolDefinition]], int] | None = None,
        count_tokens_models: Collection[str] | None = None,
        structured_output_models: Collection[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(script, host=host, port=port)
        self.region = region
        self.access_keys: Mapping[str, str] = (
            {FAKE_ACCESS_KEY_ID: FAKE_SECRET_ACCESS_KEY} if access_keys is None else access_keys
        )
        self.session_tokens: Mapping[str, str] = {} if session_tokens is None else session_tokens
        self.api_key = api_key
        self.models = models
        self.profiles = profiles
        self.count_tokens = count_tokens
        self.count_tokens_models = count_tokens_models
        self.structured_output_models = structured_output_models

    @property
    def credentials(self) -> dict[str, Any]:
        """``access_key_id``/``secret_access_key`` of the first key, as
        :class:`~kova.providers.bedrock.BedrockConfig` keywords (``**server.credentials``;
        typed ``Any`` so the splat type-checks against the config's other fields)."""
        key, secret = next(iter(self.access_keys.items()))
        return {"access_key_id": key, "secret_access_key": secret}

    def converse_requests(self) -> list[RecordedRequest]:
        """The Converse and ConverseStream requests received."""
        return [r for r in self.requests if r.path.endswith(("/converse", "/converse-stream"))]

    def _authenticate(self, request: RecordedRequest) -> FakeResponse | None:
        authorization = request.headers.get("authorization", "")
        if authorization.startswith("Bearer "):
            if self.api_key is not None and authorization[len("Bearer ") :] == self.api_key:
                return None
            return _error(403, "Invalid API key", "UnrecognizedClientException")
        check = verify_sigv4(
            request, self.access_keys, region=self.region, session_tokens=self.session_tokens
        )
        if check.error is not None:
            return _error(403, check.error, check.error_type)
        return None

    async def _route(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        rejected = self._authenticate(request)
        if rejected is not None:
            return rejected
        parts = request.path.split("/")
        if request.method == "POST" and len(parts) == 4 and parts[1] == "model":
            model_id = model_id_of(parts[2])
            if parts[3] in ("converse", "converse-stream"):
                return await self._converse(request, model_id, stream=parts[3] != "converse")
            if parts[3] == "count-tokens":
                return self._count_tokens(request, model_id)
        if request.method == "GET" and request.path == "/foundation-models":
            return json_response(
                {"modelSummaries": [_summary(model, self.region) for model in self.models]}
            )
        if request.method == "GET" and request.path == "/inference-profiles":
            return self._list_profiles(request)
        return _error(404, f"no route {request.method} {request.path}", "UnknownOperationException")

    async def _converse(
        self, request: RecordedRequest, model_id: str, *, stream: bool
    ) -> FakeResponse | FakeStream:
        if request.headers.get("content-type", "").split(";")[0] != "application/json":
            return _error(400, "content-type must be application/json")
        try:
            decoded = decode_request(request.json(), model=model_id)
            asked = script_request(decoded, stream=stream, recorded=request)
        except (ValueError, TypeError, InvalidResponse) as exc:  # the client's fault
            return _error(400, f"Malformed input request: {exc}")
        if (
            decoded.config.response_format is not None
            and self.structured_output_models is not None
            and model_id not in self.structured_output_models
        ):
            return _error(400, "This model doesn't support the outputConfig.textFormat field.")
        reply = await self._reply(asked)
        if isinstance(reply, ErrorReply):
            return _error(reply.status_code, reply.message, reply.error_type)
        response = reply.response if isinstance(reply, StreamReply) else reply
        if not stream:
            return json_response(response_json(response))
        return scripted_stream(
            reply,
            _EventWriter(),
            headers={
                "content-type": "application/vnd.amazon.eventstream",
                "x-amzn-requestid": "00000000-0000-4000-8000-000000000001",
            },
        )

    def _count_tokens(self, request: RecordedRequest, model_id: str) -> FakeResponse:
        if self.count_tokens_models is not None and model_id not in self.count_tokens_models:
            return _error(400, "The provided model doesn't support counting tokens.")
        body = request.json()
        converse = None
        if isinstance(body, dict):
            wire_input = body.get("input")
            if isinstance(wire_input, dict):
                converse = wire_input.get("converse")
        try:
            decoded = decode_request(converse, model=model_id)
        except (ValueError, TypeError, InvalidResponse) as exc:
            return _error(400, f"Malformed input request: {exc}")
        counter = self.count_tokens or heuristic_count_tokens
        try:
            count = counter(list(decoded.messages), list(decoded.tools))
        except ValueError as exc:  # the counter refuses the input, as AWS does a too long one
            return _error(400, str(exc))
        return json_response({"inputTokens": count})

    def _list_profiles(self, request: RecordedRequest) -> FakeResponse:
        try:
            limit = int(request.query.get("maxResults", "1000"))
            start = int(request.query.get("nextToken", "0"))
        except ValueError:
            return _error(400, "maxResults and nextToken must be numbers here")
        if not 1 <= limit <= 1000:
            return _error(400, "maxResults must be 1..1000")
        page = self.profiles[start : start + limit]
        body: dict[str, JSONValue] = {
            "inferenceProfileSummaries": [_profile(model, self.region) for model in page]
        }
        if start + limit < len(self.profiles):
            body["nextToken"] = str(start + limit)
        return json_response(body)


open_bedrock_server = opener(FakeBedrockServer, "open_bedrock_server", "Bedrock")
