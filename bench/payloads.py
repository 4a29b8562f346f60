"""Precomputed wire payloads for the mock server, in the real OpenAI (Chat Completions and
Responses), Anthropic, Gemini (SSE) and Ollama (NDJSON) shapes.

The request's ``model`` field selects the response (so every SDK can drive it without custom
headers):

- ``bench-n<N>``: a text answer of ``N`` content chunks (streaming) or the same text in one
  JSON body (non-streaming);
- ``bench-tool-n<N>``: one tool call (``get_weather``); once the request carries a tool result,
  the text answer of ``N`` chunks.

Every text answer is :func:`chunk_text` joined, so a client can prove it received all of it.
"""

from __future__ import annotations

import json

CREATED = 1727346182
TOOL_NAME = "get_weather"
TOOL_ARGS = {"city": "Paris"}
TOOL_RESULT = "sunny, 21 C"


def chunk_text(i: int) -> str:
    """The text of content chunk ``i`` (a realistic token-sized fragment)."""
    return f" tok{i % 1000}"


def answer_text(n: int) -> str:
    return "".join(chunk_text(i) for i in range(n))


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def parse_model(model: str) -> tuple[bool, int]:
    """``bench-tool-n20`` -> (True, 20); ``bench-n200`` -> (False, 200)."""
    tool = "-tool-" in model
    _, _, tail = model.rpartition("-n")
    try:
        n = int(tail)
    except ValueError:
        n = 1
    return tool, max(n, 1)


# --------------------------------------------------------------------------- HTTP framing


def http_json(body: bytes) -> bytes:
    head = (
        b"HTTP/1.1 200 OK\r\n"
        b"content-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n"
        b"x-request-id: req_bench\r\n"
        b"\r\n"
    )
    return head + body


def http_sse(events: list[bytes]) -> bytes:
    """A chunked ``text/event-stream`` response: one HTTP chunk per SSE event, as a real
    server flushing each token writes it."""
    parts = [
        b"HTTP/1.1 200 OK\r\n"
        b"content-type: text/event-stream; charset=utf-8\r\n"
        b"cache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n"
        b"x-request-id: req_bench\r\n"
        b"\r\n"
    ]
    for event in events:
        parts.append(b"%x\r\n" % len(event))
        parts.append(event)
        parts.append(b"\r\n")
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


def http_error(status: int, body: bytes) -> bytes:
    return (
        b"HTTP/1.1 %d Error\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        % (status, len(body))
    ) + body


# --------------------------------------------------------------------------- OpenAI


def _oa_chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": "bench",
        "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }
    return b"data: " + _dumps(chunk) + b"\n\n"


_OA_USAGE = {"prompt_tokens": 44, "completion_tokens": 16, "total_tokens": 60}


def _oa_usage_chunk(completion_tokens: int) -> bytes:
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": "bench",
        "system_fingerprint": "fp_bench",
        "choices": [],
        "usage": {
            "prompt_tokens": 44,
            "completion_tokens": completion_tokens,
            "total_tokens": 44 + completion_tokens,
        },
    }
    return b"data: " + _dumps(chunk) + b"\n\n"


def openai_stream_text(n: int) -> bytes:
    events = [_oa_chunk({"role": "assistant", "content": ""})]
    events += [_oa_chunk({"content": chunk_text(i)}) for i in range(n)]
    events.append(_oa_chunk({}, "stop"))
    events.append(_oa_usage_chunk(n))
    events.append(b"data: [DONE]\n\n")
    return http_sse(events)


def openai_stream_tool() -> bytes:
    args = json.dumps(TOOL_ARGS)
    first = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "index": 0,
                "id": "call_bench",
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": ""},
            }
        ],
    }
    half = len(args) // 2
    events = [_oa_chunk(first)]
    for piece in (args[:half], args[half:]):
        events.append(_oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    events.append(_oa_chunk({}, "tool_calls"))
    events.append(_oa_usage_chunk(16))
    events.append(b"data: [DONE]\n\n")
    return http_sse(events)


def _oa_completion(message: dict[str, object], finish: str, completion_tokens: int) -> bytes:
    return http_json(
        _dumps(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": CREATED,
                "model": "bench",
                "system_fingerprint": "fp_bench",
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                ],
                "usage": {
                    "prompt_tokens": 44,
                    "completion_tokens": completion_tokens,
                    "total_tokens": 44 + completion_tokens,
                },
            }
        )
    )


def openai_json_text(n: int) -> bytes:
    message = {"role": "assistant", "content": answer_text(n), "refusal": None}
    return _oa_completion(message, "stop", n)


def openai_json_tool() -> bytes:
    message = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [
            {
                "id": "call_bench",
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": json.dumps(TOOL_ARGS)},
            }
        ],
    }
    return _oa_completion(message, "tool_calls", 16)


# --------------------------------------------------------------------------- Anthropic


def _an_event(name: str, data: dict[str, object]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + _dumps(data) + b"\n\n"


def _an_start() -> bytes:
    return _an_event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "model": "bench",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 44,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 1,
                },
            },
        },
    )


def _an_end(stop_reason: str, output_tokens: int) -> list[bytes]:
    return [
        _an_event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        ),
        _an_event("message_stop", {"type": "message_stop"}),
    ]


def anthropic_stream_text(n: int) -> bytes:
    events = [
        _an_start(),
        _an_event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _an_event("ping", {"type": "ping"}),
    ]
    events += [
        _an_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": chunk_text(i)},
            },
        )
        for i in range(n)
    ]
    events.append(_an_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events += _an_end("end_turn", n)
    return http_sse(events)


def anthropic_stream_tool() -> bytes:
    args = json.dumps(TOOL_ARGS)
    half = len(args) // 2
    events = [
        _an_start(),
        _an_event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_bench",
                    "name": TOOL_NAME,
                    "input": {},
                },
            },
        ),
    ]
    for piece in ("", args[:half], args[half:]):
        events.append(
            _an_event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                },
            )
        )
    events.append(_an_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events += _an_end("tool_use", 16)
    return http_sse(events)


def _an_message(content: list[dict[str, object]], stop: str, output_tokens: int) -> bytes:
    return http_json(
        _dumps(
            {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "model": "bench",
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 44,
                    "output_tokens": output_tokens,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            }
        )
    )


def anthropic_json_text(n: int) -> bytes:
    return _an_message([{"type": "text", "text": answer_text(n)}], "end_turn", n)


def anthropic_json_tool() -> bytes:
    block = {"type": "tool_use", "id": "toolu_bench", "name": TOOL_NAME, "input": TOOL_ARGS}
    return _an_message([block], "tool_use", 16)


# --------------------------------------------------------------------------- Gemini

_GM_USAGE = {"promptTokenCount": 44, "totalTokenCount": 44}


def _gm_chunk(parts: list[dict[str, object]], finish: str | None = None, output: int = 0) -> bytes:
    candidate: dict[str, object] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    usage: dict[str, object] = _GM_USAGE
    if finish is not None:
        candidate["finishReason"] = finish
        usage = {
            "promptTokenCount": 44,
            "candidatesTokenCount": output,
            "totalTokenCount": 44 + output,
        }
    body = {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": "bench",
        "responseId": "bench",
    }
    return b"data: " + _dumps(body) + b"\r\n\r\n"


def _gm_sse(events: list[bytes]) -> bytes:
    raw = http_sse(events)
    return raw.replace(b"text/event-stream; charset=utf-8", b"text/event-stream", 1)


_GM_CALL = {"functionCall": {"name": TOOL_NAME, "args": TOOL_ARGS}, "thoughtSignature": "c2ln"}


def gemini_stream_text(n: int) -> bytes:
    events = [_gm_chunk([{"text": chunk_text(i)}]) for i in range(n - 1)]
    events.append(_gm_chunk([{"text": chunk_text(n - 1)}], "STOP", n))
    return _gm_sse(events)


def gemini_stream_tool() -> bytes:
    return _gm_sse([_gm_chunk([_GM_CALL], "STOP", 16)])


def _gm_json(parts: list[dict[str, object]], output: int) -> bytes:
    return http_json(
        _dumps(
            {
                "candidates": [
                    {
                        "content": {"parts": parts, "role": "model"},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 44,
                    "candidatesTokenCount": output,
                    "totalTokenCount": 44 + output,
                },
                "modelVersion": "bench",
                "responseId": "bench",
            }
        )
    )


def gemini_json_text(n: int) -> bytes:
    return _gm_json([{"text": answer_text(n)}], n)


def gemini_json_tool() -> bytes:
    return _gm_json([_GM_CALL], 16)


# --------------------------------------------------------------------------- Ollama

_OL_DONE = {
    "done": True,
    "done_reason": "stop",
    "total_duration": 1000,
    "load_duration": 100,
    "prompt_eval_count": 44,
    "prompt_eval_duration": 200,
    "eval_duration": 700,
}


def _ol_line(message: dict[str, object], done: bool = False, output: int = 0) -> bytes:
    body: dict[str, object] = {
        "model": "bench",
        "created_at": "2026-01-01T00:00:00Z",
        "message": {"role": "assistant", **message},
    }
    if done:
        body.update(_OL_DONE)
        body["eval_count"] = output
    else:
        body["done"] = False
    return _dumps(body) + b"\n"


def _ol_stream(lines: list[bytes]) -> bytes:
    raw = http_sse(lines)
    return raw.replace(b"text/event-stream; charset=utf-8", b"application/x-ndjson", 1).replace(
        b"cache-control: no-cache\r\n", b"", 1
    )


_OL_CALL = {"function": {"name": TOOL_NAME, "arguments": TOOL_ARGS}}


def ollama_stream_text(n: int) -> bytes:
    lines = [_ol_line({"content": chunk_text(i)}) for i in range(n)]
    lines.append(_ol_line({"content": ""}, done=True, output=n))
    return _ol_stream(lines)


def ollama_stream_tool() -> bytes:
    lines = [_ol_line({"content": "", "tool_calls": [_OL_CALL]})]
    lines.append(_ol_line({"content": ""}, done=True, output=16))
    return _ol_stream(lines)


def ollama_json_text(n: int) -> bytes:
    return http_json(_ol_line({"content": answer_text(n)}, done=True, output=n).rstrip())


def ollama_json_tool() -> bytes:
    return http_json(
        _ol_line({"content": "", "tool_calls": [_OL_CALL]}, done=True, output=16).rstrip()
    )


# --------------------------------------------------------------------------- OpenAI Responses

_RS_USAGE_BASE = {"input_tokens": 44, "input_tokens_details": {"cached_tokens": 0}}


def _rs_usage(output: int) -> dict[str, object]:
    return {
        **_RS_USAGE_BASE,
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 44 + output,
    }


def _rs_response(status: str, output: list[object], usage: object) -> dict[str, object]:
    return {
        "id": "resp_bench",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": "bench",
        "output": output,
        "parallel_tool_calls": True,
        "store": False,
        "usage": usage,
    }


def _rs_event(data: dict[str, object]) -> bytes:
    return b"event: " + str(data["type"]).encode() + b"\ndata: " + _dumps(data) + b"\n\n"


def _rs_message(text: str) -> dict[str, object]:
    return {
        "id": "msg_bench",
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        "role": "assistant",
    }


_RS_CALL = {
    "id": "fc_bench",
    "type": "function_call",
    "status": "completed",
    "arguments": json.dumps(TOOL_ARGS),
    "call_id": "call_bench",
    "name": TOOL_NAME,
}


def _rs_stream(
    items: list[dict[str, object]],
    deltas: list[dict[str, object]],
    output: int,
    final: list[object],
) -> bytes:
    events: list[dict[str, object]] = [
        {"type": "response.created", "response": _rs_response("in_progress", [], None)},
        {"type": "response.in_progress", "response": _rs_response("in_progress", [], None)},
        *items[:-1],
        *deltas,
        items[-1],
        {
            "type": "response.completed",
            "response": _rs_response("completed", final, _rs_usage(output)),
        },
    ]
    return http_sse(
        [_rs_event({"type": e["type"], "sequence_number": i, **e}) for i, e in enumerate(events)]
    )


def responses_stream_text(n: int) -> bytes:
    text = answer_text(n)
    added = {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {**_rs_message(""), "status": "in_progress", "content": []},
    }
    part = {
        "type": "response.content_part.added",
        "item_id": "msg_bench",
        "output_index": 0,
        "content_index": 0,
        "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []},
    }
    deltas: list[dict[str, object]] = [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_bench",
            "output_index": 0,
            "content_index": 0,
            "delta": chunk_text(i),
            "logprobs": [],
            "obfuscation": "aB3dE9",
        }
        for i in range(n)
    ]
    deltas.append(
        {
            "type": "response.output_text.done",
            "item_id": "msg_bench",
            "output_index": 0,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        }
    )
    done = {"type": "response.output_item.done", "output_index": 0, "item": _rs_message(text)}
    return _rs_stream([added, part, done], deltas, n, [_rs_message(text)])


def responses_stream_tool() -> bytes:
    args = json.dumps(TOOL_ARGS)
    half = len(args) // 2
    added = {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {**_RS_CALL, "status": "in_progress", "arguments": ""},
    }
    deltas: list[dict[str, object]] = [
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_bench",
            "output_index": 0,
            "delta": piece,
        }
        for piece in (args[:half], args[half:])
    ]
    deltas.append(
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_bench",
            "output_index": 0,
            "arguments": args,
        }
    )
    done = {"type": "response.output_item.done", "output_index": 0, "item": _RS_CALL}
    return _rs_stream([added, done], deltas, 16, [_RS_CALL])


def responses_json_text(n: int) -> bytes:
    return http_json(_dumps(_rs_response("completed", [_rs_message(answer_text(n))], _rs_usage(n))))


def responses_json_tool() -> bytes:
    return http_json(_dumps(_rs_response("completed", [_RS_CALL], _rs_usage(16))))


# --------------------------------------------------------------------------- selection


def build(api: str, stream: bool, tool_call: bool, n: int) -> bytes:
    """The full HTTP response (head and body) for one request."""
    if api == "gemini":
        if tool_call:
            return gemini_stream_tool() if stream else gemini_json_tool()
        return gemini_stream_text(n) if stream else gemini_json_text(n)
    if api == "ollama":
        if tool_call:
            return ollama_stream_tool() if stream else ollama_json_tool()
        return ollama_stream_text(n) if stream else ollama_json_text(n)
    if api == "responses":
        if tool_call:
            return responses_stream_tool() if stream else responses_json_tool()
        return responses_stream_text(n) if stream else responses_json_text(n)
    if api == "openai":
        if tool_call:
            return openai_stream_tool() if stream else openai_json_tool()
        return openai_stream_text(n) if stream else openai_json_text(n)
    if tool_call:
        return anthropic_stream_tool() if stream else anthropic_json_tool()
    return anthropic_stream_text(n) if stream else anthropic_json_text(n)


def sse_body(api: str, n: int) -> bytes:
    """Only the SSE body of a text stream (no HTTP framing): input for codec benchmarks."""
    streams = {
        "openai": openai_stream_text,
        "anthropic": anthropic_stream_text,
        "gemini": gemini_stream_text,
        "ollama": ollama_stream_text,
        "responses": responses_stream_text,
    }
    raw = streams[api](n)
    _head, _, chunked = raw.partition(b"\r\n\r\n")
    out = []
    pos = 0
    while True:
        eol = chunked.index(b"\r\n", pos)
        size = int(chunked[pos:eol], 16)
        if size == 0:
            break
        out.append(chunked[eol + 2 : eol + 2 + size])
        pos = eol + 2 + size + 2
    return b"".join(out)
