"""Pure translation between kova values and the Gemini ``generateContent`` wire format.

No I/O and no clock: every function maps values to values, so wire fidelity is tested against
the payloads in ``wire/gemini.md`` without a network. The stream decoder lives in
:mod:`._stream`, the codec in :mod:`._codec` (the HTTP side is the shared
:class:`~kova.providers.HttpProvider`).

History rules:

* system messages become ``systemInstruction``; ``assistant`` is ``model``; tool results go
  in a ``user`` turn as ``functionResponse`` parts (``{"output": ...}`` or
  ``{"error": ...}``), with the call's name and, where the model gave one, its id;
  adjacent turns of the same role are merged (Gemini wants them alternating);
* a function call goes back as the model sent it, ``thoughtSignature`` included (kept in
  :attr:`~kova.ToolUse.provider_metadata` under :data:`THOUGHT_SIGNATURE_KEY`); so does a
  signed text part (the signature in :attr:`~kova.Text.provider_metadata`, under the same
  key), which ends its text block, and a signed thought part (a :class:`~kova.Thinking`
  whose ``provider_metadata`` holds the signature), which goes back as ``thought: true``
  with its signature: Google asks for every signature to be returned on the part it came on;
* other thinking blocks (Gemini's unsigned thoughts are display text; other providers' are
  theirs) are dropped.
"""

from __future__ import annotations

import json
import mimetypes
import re
from typing import TYPE_CHECKING, assert_never

from ..._errors import InvalidResponse, ProviderErrorClass
from ..._messages import AUDIO_FORMATS
from ..._models import (
    Audio,
    Document,
    File,
    Image,
    JSONValue,
    Message,
    ModelInfo,
    ModelResponse,
    RedactedThinking,
    Role,
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from .._classify import provider_error
from .._codec import call_id, count_of, inline_image, optional_str
from .._http import ErrorDetails
from .._media import MB, check_inline_total, check_size, refuse
from ._schema import sanitize_schema

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..._errors import ProviderError
    from ..._models import ChatRequest, ContentBlock
    from ._config import GeminiConfig

__all__ = [
    "FOREIGN_SIGNATURE",
    "PROVIDER",
    "SYNTHETIC_ID_KEY",
    "THOUGHT_SIGNATURE_KEY",
    "decode_count_tokens",
    "decode_model_page",
    "decode_response",
    "decode_usage",
    "encode_contents",
    "encode_count_tokens",
    "encode_request",
    "encode_tools",
    "error_details",
    "finish_reason_to_stop",
    "function_call_part",
    "model_id",
    "model_path",
    "parse_retry_delay",
    "signature_metadata",
    "stream_error",
    "text_part",
    "thought_part",
    "validates_signatures",
]

PROVIDER = "gemini"

THOUGHT_SIGNATURE_KEY = "gemini_thought_signature"
"""``ToolUse.provider_metadata`` / ``Text.provider_metadata`` key of the part's
``thoughtSignature`` (echoed unchanged, only to Gemini)."""

FOREIGN_SIGNATURE = "skip_thought_signature_validator"
"""The ``thoughtSignature`` Google documents for function calls Gemini did not make (another
provider's history, hand-built turns). Gemini 3 answers 400 ("Function call is missing a
thought_signature") when the first ``functionCall`` of a step in the current turn has none."""

SYNTHETIC_ID_KEY = "gemini_synthetic_id"
"""``ToolUse.provider_metadata`` flag: the model sent no call id, kova made this one (it is
never sent back to Gemini; results are matched to the call by it, and sent by name)."""

_FINISH_REASONS: Mapping[str, StopReason] = {
    "STOP": StopReason.END_TURN,
    "MAX_TOKENS": StopReason.MAX_TOKENS,
}


def model_id(config: GeminiConfig, model: str | None) -> str:
    """The bare model id of a call (a ``models/`` prefix on the id is tolerated)."""
    return (model or config.model).removeprefix("models/")


def model_path(config: GeminiConfig, model: str | None, method: str) -> str:
    """``/v1beta/models/{model}:{method}``."""
    return f"/{config.api_version}/models/{model_id(config, model)}:{method}"


def finish_reason_to_stop(reason: str | None, *, has_tool_calls: bool) -> StopReason:
    """``finishReason`` → :class:`~kova.StopReason`. Gemini says ``STOP`` after function
    calls too: a stop with calls is a tool use. Safety and other reasons keep their raw name."""
    if reason is None or reason == "STOP":
        return StopReason.TOOL_USE if has_tool_calls else StopReason.END_TURN
    known = _FINISH_REASONS.get(reason)
    return known if known is not None else StopReason.unknown(reason)


# ---------------------------------------------------------------------------------------------
# Requests


_URLSAFE = str.maketrans("+/", "-_")


def _image_part(image: Image) -> dict[str, JSONValue]:
    inline = inline_image(image)
    if inline is not None:
        return _media_part(inline[0], inline[1], None)
    # As google-genai's Part.from_uri: a type not given is guessed from the URL's extension
    # (the API wants one, except for a Files API URI, whose upload has its own).
    media_type = image.media_type
    if not media_type and image.url:
        media_type = mimetypes.guess_type(image.url)[0]
    return _media_part(media_type, None, image.url)


MAX_INLINE_BYTES = 100 * MB
"""The Gemini API's limit on inline data in one request (larger files go by the Files API
or a URL)."""
MAX_PDF_BYTES = 50 * MB
"""The Gemini API's limit on one PDF."""

_AUDIO_TYPES: Mapping[str, str] = {
    # The formats Gemini documents for audio understanding, by their documented MIME types.
    "wav": "audio/wav",
    "mp3": "audio/mp3",
    "aiff": "audio/aiff",
    "aac": "audio/aac",
    "ogg": "audio/ogg",
    "flac": "audio/flac",
}
_PCM = "audio/L16;codec=pcm;rate=24000"
"""What Gemini's speech models answer with: 16-bit PCM at 24 kHz (an ``Audio`` of format
``pcm16``)."""


def _media_part(media_type: str | None, data: str | None, uri: str | None) -> dict[str, JSONValue]:
    """``inlineData`` for bytes, ``fileData`` for a URI: what ``Part.from_bytes`` and
    ``Part.from_uri`` send. google-genai writes bytes as URL-safe base64 (pydantic's bytes
    serializer); the API's JSON reads both alphabets, and kova sends what the SDK sends."""
    if data is not None:
        return {"inlineData": {"mimeType": media_type, "data": data.translate(_URLSAFE)}}
    file_data: dict[str, JSONValue] = {"fileUri": uri}
    if media_type:
        file_data = {"mimeType": media_type, "fileUri": uri}
    return {"fileData": file_data}


def _document_part(document: Document) -> dict[str, JSONValue]:
    if document.media_type != "application/pdf" and not document.media_type.startswith("text/"):
        raise refuse(
            PROVIDER, document, "Gemini reads PDF and text documents (convert it to PDF first)"
        )
    if document.media_type == "application/pdf":
        check_size(PROVIDER, document, MAX_PDF_BYTES, "per PDF")
    return _media_part(document.media_type, document.data, document.url or document.file_id)


def _audio_part(audio: Audio, *, model: bool = False) -> dict[str, JSONValue] | None:
    media_type = _AUDIO_TYPES.get(audio.format)
    if media_type is None and model and audio.format == "pcm16":
        media_type = _PCM  # a speech model's own answer, sent back as it came
    if media_type is None:
        if model:
            return None  # the model's own output in a form Gemini takes no more (_media.py)
        raise refuse(
            PROVIDER, audio, f"Gemini takes audio as one of {sorted(_AUDIO_TYPES)}, convert it"
        )
    return _media_part(media_type, audio.data, audio.url)


def function_call_part(block: ToolUse) -> dict[str, JSONValue]:
    """A ``functionCall`` part (a kova-made id is not sent; a thought signature is)."""
    metadata = block.provider_metadata or {}
    call: dict[str, JSONValue] = {}
    if not metadata.get(SYNTHETIC_ID_KEY):
        call["id"] = block.id
    call["name"] = block.name
    call["args"] = block.input
    part: dict[str, JSONValue] = {"functionCall": call}
    signature = metadata.get(THOUGHT_SIGNATURE_KEY)
    if isinstance(signature, str):
        part["thoughtSignature"] = signature
    return part


def text_part(text: str, metadata: Mapping[str, JSONValue] | None) -> dict[str, JSONValue] | None:
    """A text part, with the ``thoughtSignature`` kept in ``metadata`` (None for an empty text
    without one)."""
    signature = metadata.get(THOUGHT_SIGNATURE_KEY) if metadata else None
    if isinstance(signature, str):
        return {"text": text, "thoughtSignature": signature}
    return {"text": text} if text else None


def thought_part(text: str, metadata: Mapping[str, JSONValue] | None) -> dict[str, JSONValue]:
    """A ``thought: true`` part, with the ``thoughtSignature`` kept in ``metadata``, if any."""
    part: dict[str, JSONValue] = {"text": text, "thought": True}
    signature = metadata.get(THOUGHT_SIGNATURE_KEY) if metadata else None
    if isinstance(signature, str):
        part["thoughtSignature"] = signature
    return part


def _function_response_parts(
    result: ToolResult, calls: Mapping[str, ToolUse]
) -> list[dict[str, JSONValue]]:
    call = calls.get(result.tool_use_id)
    if call is None:
        raise provider_error(
            f"a tool result answers {result.tool_use_id!r}, but no earlier assistant turn "
            "has a tool call with that id (Gemini needs the call's name)",
            provider=PROVIDER,
            error_class=ProviderErrorClass.INVALID_REQUEST,
        )
    response: dict[str, JSONValue] = {"id": call.id}
    if (call.provider_metadata or {}).get(SYNTHETIC_ID_KEY):
        response = {}
    response["name"] = call.name
    response["response"] = {"error" if result.is_error else "output": result.text}
    parts: list[dict[str, JSONValue]] = [{"functionResponse": response}]
    if not isinstance(result.content, str):
        for part in result.content:
            if isinstance(part, Image):
                parts.append(_image_part(part))
            elif isinstance(part, Document):
                parts.append(_document_part(part))
    return parts


def _parts(
    content: Sequence[ContentBlock], calls: dict[str, ToolUse], *, model: bool = False
) -> list[dict[str, JSONValue]]:
    results: list[dict[str, JSONValue]] = []
    parts: list[dict[str, JSONValue]] = []
    for block in content:
        match block:
            case Text(text=text, provider_metadata=metadata):
                if (part := text_part(text, metadata)) is not None:
                    parts.append(part)
            case Image():
                parts.append(_image_part(block))
            case Document():
                parts.append(_document_part(block))
            case Audio():
                if (audio := _audio_part(block, model=model)) is not None:
                    parts.append(audio)
            case File(file_id=file_id, media_type=media_type):
                parts.append(_media_part(media_type, None, file_id))
            case ToolUse():
                calls[block.id] = block
                parts.append(function_call_part(block))
            case ToolResult():
                results.extend(_function_response_parts(block, calls))
            case Thinking(text=text, provider_metadata=metadata):
                # Only Gemini's signed thought parts go back; unsigned thoughts are display
                # text, and a signature of another provider's means nothing here.
                if metadata and isinstance(metadata.get(THOUGHT_SIGNATURE_KEY), str):
                    parts.append(thought_part(text, metadata))
            case RedactedThinking():
                pass  # another provider's encrypted reasoning: not sent
            case _:
                assert_never(block)
    # Function responses lead their turn: it must directly answer the model's call turn.
    return results + parts


def _current_turn_start(messages: Sequence[Message]) -> int:
    """The index after the last user message that is not only tool results: the steps the
    model took since are the current turn, the only one Gemini 3 validates."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role is Role.USER and any(
            not isinstance(block, ToolResult) for block in message.content
        ):
            return index + 1
    return 0


def _sign_first_call(parts: list[dict[str, JSONValue]]) -> None:
    # Only a step that carries no Gemini signature at all: a signed step is sent as received.
    if any("thoughtSignature" in part for part in parts):
        return
    for part in parts:
        if "functionCall" in part:
            part["thoughtSignature"] = FOREIGN_SIGNATURE
            return


def validates_signatures(model: str) -> bool:
    """Whether ``model`` checks the thought signatures of the current turn's calls (Gemini 3
    and later; an alias without a version, such as ``gemini-flash-latest``, counts as new)."""
    return re.match(r"gemini-[12][.-]", model.removeprefix("models/")) is None


def encode_contents(
    messages: Sequence[Message], *, sign_foreign_calls: bool = False
) -> tuple[dict[str, JSONValue] | None, list[dict[str, JSONValue]]]:
    """``(systemInstruction, contents)`` of a kova history (see the module docstring).

    With ``sign_foreign_calls`` (Gemini 3), a step of the current turn whose calls carry no
    Gemini signature gets :data:`FOREIGN_SIGNATURE` on its first call.
    """
    check_inline_total(PROVIDER, messages, MAX_INLINE_BYTES, "of inline data per request")
    system: list[JSONValue] = []
    contents: list[dict[str, JSONValue]] = []
    calls: dict[str, ToolUse] = {}
    turn_start = _current_turn_start(messages) if sign_foreign_calls else len(messages)
    for index, message in enumerate(messages):
        if message.role is Role.SYSTEM:
            system.extend({"text": b.text} for b in message.content if isinstance(b, Text))
            continue
        role = "model" if message.role is Role.ASSISTANT else "user"
        parts = _parts(message.content, calls, model=role == "model")
        if not parts:
            continue
        if role == "model" and index >= turn_start:
            _sign_first_call(parts)
        if contents and contents[-1]["role"] == role:
            previous = contents[-1]["parts"]
            assert isinstance(previous, list)
            previous.extend(parts)
        else:
            contents.append({"role": role, "parts": list(parts)})
    # The role is optional; google-genai sends "user", and so does kova.
    instruction: dict[str, JSONValue] | None = {"parts": system, "role": "user"} if system else None
    return instruction, contents


def encode_tools(tools: Sequence[ToolDefinition]) -> list[JSONValue]:
    """Tool definitions as one ``functionDeclarations`` tool, the parameters as plain JSON
    Schema in ``parametersJsonSchema`` (what the newest google-genai sends for a JSON Schema;
    no keyword rewriting needed)."""
    declarations: list[JSONValue] = []
    for tool in tools:
        declaration: dict[str, JSONValue] = {"name": tool.name}
        if tool.description:
            declaration["description"] = tool.description
        declaration["parametersJsonSchema"] = tool.parameters
        declarations.append(declaration)
    return [{"functionDeclarations": declarations}]


def encode_request(request: ChatRequest, config: GeminiConfig) -> dict[str, JSONValue]:
    """The JSON body of one ``generateContent`` / ``streamGenerateContent`` request.

    ``request.config`` wins over ``config`` for ``max_tokens`` and ``temperature``.
    """
    instruction, contents = encode_contents(
        request.messages,
        sign_foreign_calls=validates_signatures(model_id(config, request.config.model)),
    )
    body: dict[str, JSONValue] = {"contents": list(contents)}
    if instruction is not None:
        body["systemInstruction"] = instruction
    if request.tools:
        body["tools"] = encode_tools(request.tools)
    inference = request.config
    generation: dict[str, JSONValue] = {}
    temperature = inference.temperature if inference.temperature is not None else config.temperature
    if temperature is not None:
        generation["temperature"] = temperature
    if inference.top_p is not None:
        generation["topP"] = inference.top_p
    max_tokens = inference.max_tokens if inference.max_tokens is not None else config.max_tokens
    if max_tokens is not None:
        generation["maxOutputTokens"] = max_tokens
    if inference.stop_sequences:
        generation["stopSequences"] = list(inference.stop_sequences)
    if inference.response_format is not None:
        generation["responseMimeType"] = "application/json"
        generation["responseSchema"] = sanitize_schema(inference.response_format.schema)
    thinking = config.thinking_config()
    if thinking is not None:
        generation["thinkingConfig"] = thinking
    if generation:
        body["generationConfig"] = generation
    return body


def encode_count_tokens(request: ChatRequest, config: GeminiConfig) -> dict[str, JSONValue]:
    """The ``countTokens`` body: ``{"contents": ...}`` as the SDK sends it, or, when there is
    a system instruction or tools to count too, the ``generateContentRequest`` form."""
    body = encode_request(request, config)
    if "systemInstruction" not in body and "tools" not in body:
        return {"contents": body["contents"]}
    full: dict[str, JSONValue] = {"model": "models/" + model_id(config, request.config.model)}
    for key in ("contents", "systemInstruction", "tools"):
        if key in body:
            full[key] = body[key]
    return {"generateContentRequest": full}


# ---------------------------------------------------------------------------------------------
# Responses


def decode_usage(metadata: object) -> Usage | None:
    """``usageMetadata``: output counts thoughts (``candidatesTokenCount`` excludes them),
    ``reasoning_tokens`` is ``thoughtsTokenCount``, cached prompt tokens are
    ``cachedContentTokenCount``, audio tokens the ``AUDIO`` entries of the details."""
    if not isinstance(metadata, dict):
        return None
    prompt = count_of(metadata.get("promptTokenCount"))
    prompt += count_of(metadata.get("toolUsePromptTokenCount"))
    thoughts = count_of(metadata.get("thoughtsTokenCount"))
    output = count_of(metadata.get("candidatesTokenCount")) + thoughts
    total = metadata.get("totalTokenCount")
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        total_tokens=count_of(total) if isinstance(total, int) else prompt + output,
        cache_read_tokens=count_of(metadata.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
        input_audio_tokens=_audio(metadata.get("promptTokensDetails")),
        output_audio_tokens=_audio(metadata.get("candidatesTokensDetails")),
    )


def _audio(details: object) -> int:
    """The ``AUDIO`` entry of a ``ModalityTokenCount`` list (0 without one)."""
    if not isinstance(details, list):
        return 0
    return sum(
        count_of(item.get("tokenCount"))
        for item in details
        if isinstance(item, dict) and item.get("modality") == "AUDIO"
    )


def tool_use_of(part: Mapping[str, object], position: int, *, salt: str = "") -> ToolUse:
    """A ``functionCall`` part as a :class:`~kova.ToolUse` (``position``: the call's number
    in its response, and ``salt`` the response's id, for the stable id of a call that came
    without one; see :func:`call_id`).

    Raises:
        InvalidResponse: the call has no name or its ``args`` are not an object.
    """
    call = part.get("functionCall")
    if not isinstance(call, dict):
        raise InvalidResponse("a functionCall is not an object", provider=PROVIDER)
    name = call.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidResponse("a functionCall has no name", provider=PROVIDER)
    args = call.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InvalidResponse(
            f"functionCall.args should be an object, got {type(args).__name__}", provider=PROVIDER
        )
    metadata = signature_metadata(part) or {}
    identifier = call.get("id")
    if not isinstance(identifier, str) or not identifier:
        identifier = call_id(name, dict(args), position, salt)
        metadata[SYNTHETIC_ID_KEY] = True
    return ToolUse(
        id=identifier,
        name=name,
        input=dict(args),
        provider_metadata=metadata or None,
    )


def signature_metadata(part: Mapping[str, object]) -> dict[str, JSONValue] | None:
    """A part's ``thoughtSignature`` as provider metadata (``{THOUGHT_SIGNATURE_KEY: ...}``),
    or None when it has none."""
    signature = part.get("thoughtSignature")
    if type(signature) is str and signature:
        return {THOUGHT_SIGNATURE_KEY: signature}
    return None


def _candidate(body: Mapping[str, object]) -> Mapping[str, object] | None:
    candidates = body.get("candidates")
    if candidates is None:
        return None
    if not isinstance(candidates, list):
        raise InvalidResponse("candidates should be a JSON array", provider=PROVIDER)
    if not candidates:
        return None
    first = candidates[0]
    if not isinstance(first, dict):
        raise InvalidResponse("a candidate is not a JSON object", provider=PROVIDER)
    return first


def parts_of(candidate: Mapping[str, object]) -> list[Mapping[str, object]]:
    """The candidate's ``content.parts`` (empty when it has no content, e.g. after SAFETY).

    Raises:
        InvalidResponse: content or parts of the wrong type.
    """
    content = candidate.get("content")
    if content is None:
        return []
    if not isinstance(content, dict):
        raise InvalidResponse("candidate.content is not an object", provider=PROVIDER)
    parts = content.get("parts")
    if parts is None:
        return []
    if not isinstance(parts, list) or not all(isinstance(part, dict) for part in parts):
        raise InvalidResponse("content.parts should be an array of objects", provider=PROVIDER)
    return parts


def blocked_reason(body: Mapping[str, object]) -> str | None:
    """``promptFeedback.blockReason`` when the prompt itself was blocked."""
    feedback = body.get("promptFeedback")
    if isinstance(feedback, dict):
        reason = feedback.get("blockReason")
        if isinstance(reason, str) and reason:
            return reason
    return None


_STANDARD = str.maketrans("-_", "+/")


def answer_media(inline: object) -> Image | Audio:
    """An ``inlineData`` part of an answer (an image model's picture, a speech model's audio)
    as an :class:`~kova.Image` or :class:`~kova.Audio` block.

    Raises:
        InvalidResponse: not an object with a string ``mimeType`` and ``data``, or a media
            type kova has no block for.
    """
    if not isinstance(inline, dict):
        raise InvalidResponse("inlineData is not an object", provider=PROVIDER)
    media_type, data = inline.get("mimeType"), inline.get("data")
    if not isinstance(media_type, str) or not isinstance(data, str) or not data:
        raise InvalidResponse("inlineData needs a mimeType and data", provider=PROVIDER)
    data = data.translate(_STANDARD)  # kova's blocks hold standard base64
    base = media_type.split(";", 1)[0].strip().lower()
    if base.startswith("image/"):
        return Image(media_type=base, data=data)
    if base in ("audio/l16", "audio/pcm"):
        return Audio(data=data, format="pcm16")
    for name, audio_type in (*_AUDIO_TYPES.items(), *AUDIO_FORMATS.items()):
        if base == audio_type:
            return Audio(data=data, format=name)
    raise InvalidResponse(
        f"the answer holds inline data of type {media_type!r}, which kova has no block for",
        provider=PROVIDER,
    )


def decode_response(body: JSONValue) -> ModelResponse:
    """A ``GenerateContentResponse`` as a :class:`~kova.providers.ModelResponse`.

    ``thought: true`` parts are the display ``thinking``; a signed one is also kept in the
    content, in its place, as a :class:`~kova.Thinking` carrying the signature in its
    ``provider_metadata``, so it goes back to Gemini. Function calls and text parts keep
    their ``thoughtSignature``. A blocked prompt is an empty response whose stop reason is
    ``unknown("blocked:<reason>")``.

    Raises:
        ProviderError: the body is an error object (classified), or is malformed
            (:class:`~kova.InvalidResponse`).
    """
    if isinstance(body, list) and len(body) == 1:
        body = body[0]  # the stream endpoint without alt=sse wraps in an array
    if not isinstance(body, dict):
        raise InvalidResponse("the response is not a JSON object", provider=PROVIDER)
    if body.get("error") is not None:
        raise stream_error(body["error"], mid_stream=False)
    usage = decode_usage(body.get("usageMetadata"))
    candidate = _candidate(body)
    if candidate is None:
        reason = blocked_reason(body) or "no_candidates"
        return ModelResponse(
            content=(),
            stop_reason=StopReason.unknown(f"blocked:{reason}"),
            usage=usage,
            model=optional_str(body.get("modelVersion")),
            id=optional_str(body.get("responseId")),
        )
    content: list[Text | ToolUse | Thinking | Image | Audio] = []
    thinking: list[str] = []
    text: list[str] = []

    def end_text() -> None:
        if text:
            content.append(Text(text="".join(text)))
            text.clear()

    calls = 0
    response_id = body.get("responseId")
    salt = response_id if isinstance(response_id, str) else ""
    for part in parts_of(candidate):
        value = part.get("text")
        if value is not None and not isinstance(value, str):
            raise InvalidResponse("a part's text is not a string", provider=PROVIDER)
        if part.get("thought") is True:
            if value:
                thinking.append(value)
            if (metadata := signature_metadata(part)) is not None:
                end_text()
                content.append(Thinking(text=value or "", provider_metadata=metadata))
            continue
        if "functionCall" in part:
            end_text()
            content.append(tool_use_of(part, calls, salt=salt))
            calls += 1
        elif "inlineData" in part:
            end_text()
            content.append(answer_media(part["inlineData"]))
        elif (metadata := signature_metadata(part)) is not None and value is not None:
            # A signed text part ends its text block, which keeps the signature.
            text.append(value)
            content.append(Text(text="".join(text), provider_metadata=metadata))
            text.clear()
        elif value:
            text.append(value)
    end_text()
    finish = candidate.get("finishReason")
    stop = finish_reason_to_stop(
        finish if isinstance(finish, str) else None,
        has_tool_calls=any(isinstance(block, ToolUse) for block in content),
    )
    return ModelResponse(
        content=tuple(content),
        stop_reason=stop,
        usage=usage,
        thinking="".join(thinking) or None,
        model=optional_str(body.get("modelVersion")),
        id=optional_str(response_id),
    )


def decode_count_tokens(body: JSONValue) -> int:
    """``totalTokens`` of a ``countTokens`` answer.

    Raises:
        InvalidResponse: no integer ``totalTokens``.
    """
    total = body.get("totalTokens") if isinstance(body, dict) else None
    if not isinstance(total, int) or isinstance(total, bool):
        raise InvalidResponse("the token count has no totalTokens", provider=PROVIDER)
    return total


def decode_model_page(body: JSONValue) -> tuple[list[ModelInfo], str | None]:
    """One ``GET /models`` page: the models (ids without ``models/``) and the next token.

    Raises:
        InvalidResponse: the body is not an object or ``models`` is not a list.
    """
    if not isinstance(body, dict):
        raise InvalidResponse("the model list is not a JSON object", provider=PROVIDER)
    items = body.get("models", [])
    if not isinstance(items, list):
        raise InvalidResponse("the model list's models is not an array", provider=PROVIDER)
    models: list[ModelInfo] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name:
            continue
        display = item.get("displayName")
        models.append(
            ModelInfo(
                id=name.removeprefix("models/"),
                owned_by="google",
                display_name=display if isinstance(display, str) else None,
            )
        )
    token = body.get("nextPageToken")
    return models, token if isinstance(token, str) and token else None


# ---------------------------------------------------------------------------------------------
# Errors


def parse_retry_delay(value: object) -> float | None:
    """A ``google.protobuf.Duration`` JSON string (``"37s"``, ``"0.5s"``) in seconds."""
    if not isinstance(value, str) or not value.endswith("s"):
        return None
    try:
        seconds = float(value[:-1])
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _error_object(body: JSONValue) -> Mapping[str, JSONValue] | None:
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error
    return None


def _details(error: Mapping[str, JSONValue], kind: str) -> list[Mapping[str, JSONValue]]:
    details = error.get("details")
    if not isinstance(details, list):
        return []
    return [
        detail
        for detail in details
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith(kind)
    ]


def _retry_delay(error: Mapping[str, JSONValue]) -> float | None:
    for detail in _details(error, "google.rpc.RetryInfo"):
        return parse_retry_delay(detail.get("retryDelay"))
    return None


def _error_class(error: Mapping[str, JSONValue]) -> ProviderErrorClass | None:
    # A bad key is a 400 INVALID_ARGUMENT whose ErrorInfo says API_KEY_INVALID: an auth error.
    for detail in _details(error, "google.rpc.ErrorInfo"):
        if detail.get("reason") in ("API_KEY_INVALID", "API_KEY_EXPIRED"):
            return ProviderErrorClass.AUTH_INVALID
    return None


def error_details(body: JSONValue) -> ErrorDetails:
    """Google's error body ``{"error": {"code", "message", "status", "details"}}`` (also
    wrapped in a one-element array): ``status`` is the error type the classifier knows,
    ``RetryInfo.retryDelay`` the retry-after. Never raises."""
    error = _error_object(body)
    if error is None:
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            return ErrorDetails(message=str(body["error"]))
        return ErrorDetails()
    message = error.get("message")
    status = error.get("status")
    code = error.get("code")
    return ErrorDetails(
        message=message if isinstance(message, str) else None,
        error_type=status if isinstance(status, str) and status else None,
        code=str(code) if isinstance(code, int | str) and not isinstance(code, bool) else None,
        error_class=_error_class(error),
        retry_after=_retry_delay(error),
    )


def stream_error(error: object, *, mid_stream: bool = True) -> ProviderError:
    """An ``error`` object (inside a stream, or a 200 body), classified like the same error
    as an HTTP status."""
    details = error_details({"error": error}) if isinstance(error, dict) else None
    if details is None:
        return provider_error(str(error), provider=PROVIDER, mid_stream=mid_stream)
    status_code = error.get("code") if isinstance(error, dict) else None
    return provider_error(
        details.message or json.dumps(error),
        provider=PROVIDER,
        status_code=status_code if isinstance(status_code, int) else None,
        error_type=details.error_type,
        error_class=details.error_class,
        retry_after=details.retry_after,
        mid_stream=mid_stream,
    )
