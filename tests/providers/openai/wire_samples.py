# ruff: noqa: E501
"""Payloads copied from wire/openai.md (the recorded OpenAI stream, the documented bodies)."""

from __future__ import annotations

TOOL_CALL_STREAM = (
    'data: {"id":"chatcmpl-AB","object":"chat.completion.chunk","created":1727346182,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_4Xz","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-AB","object":"chat.completion.chunk","created":1727346182,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\":\\""}}]},"finish_reason":null}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-AB","object":"chat.completion.chunk","created":1727346182,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"Paris\\"}"}}]},"finish_reason":null}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-AB","object":"chat.completion.chunk","created":1727346182,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}\n'
    "\n"
    'data: {"id":"chatcmpl-AB","object":"chat.completion.chunk","created":1727346182,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":44,"completion_tokens":16,"total_tokens":60,"completion_tokens_details":{"reasoning_tokens":0}}}\n'
    "\n"
    "data: [DONE]\n"
    "\n"
)

NON_STREAM_RESPONSE = {
    "id": "chatcmpl-ABC",
    "object": "chat.completion",
    "created": 1727346182,
    "model": "gpt-4.1-2025-04-14",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {
                        "id": "call_4Xz",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
        }
    ],
    "usage": {
        "prompt_tokens": 44,
        "completion_tokens": 16,
        "total_tokens": 60,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    },
}


def chunk(delta: object, finish: str | None = None, **extra: object) -> str:
    """One SSE chunk in the recorded shape."""
    import json

    body = {
        "id": "chatcmpl-X",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return "data: " + json.dumps(body, separators=(",", ":")) + "\n\n"
