"""The floor: a raw HTTP client that streams and parses each event, and nothing else.

Hand-written the way a careful user would: ``aiter_bytes``, split events on the blank line
(Gemini: ``\\r\\n\\r\\n``; Ollama: lines), ``json.loads`` each payload and pick the text out
of it. The same code runs on
httpx2 (under asyncio and under trio) and on httpx (asyncio) for comparison.
"""

from __future__ import annotations

import importlib
import json
import os
from typing import Any

import payloads

_HEADERS = {
    "openai": {"authorization": "Bearer sk-bench"},
    "anthropic": {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"},
    "gemini": {"x-goog-api-key": "bench-key"},
    "ollama": {},
    "responses": {"authorization": "Bearer sk-bench"},
}
_PATH = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/",
    "ollama": "/api/chat",
    "responses": "/v1/responses",
}
_GEMINI_TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": payloads.TOOL_NAME,
                "description": "Weather for a city.",
                "parametersJsonSchema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }
        ]
    }
]
_TOOLS = {
    "openai": [
        {
            "type": "function",
            "function": {
                "name": payloads.TOOL_NAME,
                "description": "Weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ],
    "ollama": [
        {
            "type": "function",
            "function": {
                "name": payloads.TOOL_NAME,
                "description": "Weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ],
    "anthropic": [
        {
            "name": payloads.TOOL_NAME,
            "description": "Weather for a city.",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ],
}
_RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": payloads.TOOL_NAME,
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "strict": False,
    }
]
PROMPT = "What is the weather in Paris?"


def get_weather(city: str) -> str:
    return payloads.TOOL_RESULT


def _body(api: str, model: str, messages: list[Any], stream: bool, tools: bool = False) -> dict:
    if api == "gemini":
        gemini: dict[str, Any] = {
            "contents": messages,
            "generationConfig": {"maxOutputTokens": 1024},
        }
        if tools:
            gemini["tools"] = _GEMINI_TOOLS
        return gemini
    if api == "responses":
        responses: dict[str, Any] = {
            "model": model,
            "input": messages,
            "max_output_tokens": 1024,
            "store": False,
        }
        if stream:
            responses["stream"] = True
        if tools:
            responses["tools"] = _RESPONSES_TOOLS
        return responses
    if api == "ollama":
        ollama: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": stream,
            "options": {"num_predict": 1024},
        }
        if tools:
            ollama["tools"] = _TOOLS[api]
        return ollama
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": 1024}
    if stream:
        body["stream"] = True
        if api == "openai":
            body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = _TOOLS[api]
    return body


def _responses_text(output: list[Any]) -> str:
    return "".join(
        part["text"]
        for item in output
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


class _Floor:
    runtime = "asyncio"
    apis = ("openai", "anthropic")
    scenarios = ("b", "c", "d", "e")
    http_module = "httpx2"

    def __init__(self, base_url: str, api: str) -> None:
        self.api = api
        self.url = base_url + _PATH[api]
        self.headers = _HEADERS[api]
        mod = importlib.import_module(self.http_module)
        # 1,000 connections (the official SDKs' default); the 10,000-stream scenario (g)
        # raises it to what it runs.
        connections = int(os.environ.get("BENCH_MAX_CONNECTIONS", "1000"))
        self.client = mod.AsyncClient(
            headers=self.headers,
            timeout=mod.Timeout(600.0),
            limits=mod.Limits(max_connections=connections, max_keepalive_connections=100),
        )

    async def __aenter__(self) -> _Floor:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(*exc)

    def _first(self) -> list[Any]:
        if self.api == "gemini":
            return [{"role": "user", "parts": [{"text": PROMPT}]}]
        return [{"role": "user", "content": PROMPT}]

    def _url(self, model: str, stream: bool) -> str:
        if self.api != "gemini":
            return self.url
        method = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        return self.url + model + method

    async def call(self, model: str) -> str:
        if self.api in ("gemini", "ollama"):
            response = await self.client.post(
                self._url(model, False), json=_body(self.api, model, self._first(), False)
            )
            response.raise_for_status()
            data = response.json()
            if self.api == "ollama":
                return data["message"]["content"]
            parts = data["candidates"][0]["content"]["parts"]
            return "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
        messages = [{"role": "user", "content": PROMPT}]
        response = await self.client.post(self.url, json=_body(self.api, model, messages, False))
        response.raise_for_status()
        data = response.json()
        if self.api == "responses":
            return _responses_text(data["output"])
        if self.api == "openai":
            return data["choices"][0]["message"]["content"]
        return "".join(b["text"] for b in data["content"] if b["type"] == "text")

    async def _stream_gemini(self, model: str) -> tuple[int, int]:
        body = _body(self.api, model, self._first(), True)
        deltas = chars = 0
        loads = json.loads
        async with self.client.stream("POST", self._url(model, True), json=body) as response:
            response.raise_for_status()
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                *events, buffer = buffer.split(b"\r\n\r\n")
                for event in events:
                    if not event.startswith(b"data: "):
                        continue
                    obj = loads(event[6:])
                    for part in obj["candidates"][0]["content"]["parts"]:
                        text = part.get("text")
                        if text and not part.get("thought"):
                            deltas += 1
                            chars += len(text)
        return deltas, chars

    async def _stream_ollama(self, model: str) -> tuple[int, int]:
        body = _body(self.api, model, self._first(), True)
        deltas = chars = 0
        loads = json.loads
        async with self.client.stream("POST", self.url, json=body) as response:
            response.raise_for_status()
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line:
                        continue
                    text = loads(line)["message"].get("content")
                    if text:
                        deltas += 1
                        chars += len(text)
        return deltas, chars

    async def _stream_responses(self, model: str) -> tuple[int, int]:
        body = _body(self.api, model, self._first(), True)
        deltas = chars = 0
        loads = json.loads
        async with self.client.stream("POST", self.url, json=body) as response:
            response.raise_for_status()
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    start = event.find(b"data: ")
                    if start < 0:
                        continue
                    obj = loads(event[start + 6 :])
                    if obj["type"] == "response.output_text.delta":
                        text = obj["delta"]
                        if text:
                            deltas += 1
                            chars += len(text)
        return deltas, chars

    async def stream(self, model: str) -> tuple[int, int]:
        if self.api == "gemini":
            return await self._stream_gemini(model)
        if self.api == "ollama":
            return await self._stream_ollama(model)
        if self.api == "responses":
            return await self._stream_responses(model)
        messages = [{"role": "user", "content": PROMPT}]
        body = _body(self.api, model, messages, True)
        deltas = chars = 0
        openai = self.api == "openai"
        loads = json.loads
        async with self.client.stream("POST", self.url, json=body) as response:
            response.raise_for_status()
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    start = event.find(b"data: ")
                    if start < 0:
                        continue
                    data = event[start + 6 :]
                    if data == b"[DONE]":
                        continue
                    obj = loads(data)
                    if openai:
                        choices = obj["choices"]
                        if choices:
                            text = choices[0]["delta"].get("content")
                            if text:
                                deltas += 1
                                chars += len(text)
                    elif obj["type"] == "content_block_delta":
                        delta = obj["delta"]
                        if delta["type"] == "text_delta":
                            deltas += 1
                            chars += len(delta["text"])
        return deltas, chars

    async def _turn_gemini(self, model: str) -> str:
        contents: list[Any] = self._first()
        for _ in range(4):
            response = await self.client.post(
                self._url(model, False), json=_body("gemini", model, contents, False, tools=True)
            )
            response.raise_for_status()
            content = response.json()["candidates"][0]["content"]
            calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
            if not calls:
                return "".join(p["text"] for p in content["parts"] if "text" in p)
            contents.append(content)  # echoed as received, signatures included
            contents.append(
                {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "name": call["name"],
                                "response": {"output": get_weather(**call["args"])},
                            }
                        }
                        for call in calls
                    ],
                }
            )
        raise AssertionError("agent loop did not finish")

    async def _turn_ollama(self, model: str) -> str:
        messages: list[Any] = self._first()
        for _ in range(4):
            response = await self.client.post(
                self.url, json=_body("ollama", model, messages, False, tools=True)
            )
            response.raise_for_status()
            message = response.json()["message"]
            calls = message.get("tool_calls")
            if not calls:
                return message["content"]
            messages.append(message)
            for call in calls:
                function = call["function"]
                messages.append(
                    {
                        "role": "tool",
                        "tool_name": function["name"],
                        "content": get_weather(**function["arguments"]),
                    }
                )
        raise AssertionError("agent loop did not finish")

    async def _turn_responses(self, model: str) -> str:
        items: list[Any] = self._first()
        for _ in range(4):
            response = await self.client.post(
                self.url, json=_body("responses", model, items, False, tools=True)
            )
            response.raise_for_status()
            output = response.json()["output"]
            calls = [item for item in output if item["type"] == "function_call"]
            if not calls:
                return _responses_text(output)
            items.extend(output)  # echoed as received (reasoning items included)
            for call in calls:
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": call["call_id"],
                        "output": get_weather(**json.loads(call["arguments"])),
                    }
                )
        raise AssertionError("agent loop did not finish")

    async def turn(self, model: str) -> str:
        """A hand-written agent loop: request, run the tool, request again."""
        if self.api == "gemini":
            return await self._turn_gemini(model)
        if self.api == "responses":
            return await self._turn_responses(model)
        if self.api == "ollama":
            return await self._turn_ollama(model)
        api = self.api
        messages: list[Any] = [{"role": "user", "content": PROMPT}]
        for _ in range(4):
            response = await self.client.post(
                self.url, json=_body(api, model, messages, False, tools=True)
            )
            response.raise_for_status()
            data = response.json()
            if api == "openai":
                message = data["choices"][0]["message"]
                calls = message.get("tool_calls")
                if not calls:
                    return message["content"]
                messages.append(message)
                for call in calls:
                    args = json.loads(call["function"]["arguments"])
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": get_weather(**args)}
                    )
            else:
                content = data["content"]
                uses = [b for b in content if b["type"] == "tool_use"]
                if not uses:
                    return "".join(b["text"] for b in content if b["type"] == "text")
                messages.append({"role": "assistant", "content": content})
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": b["id"],
                                "content": get_weather(**b["input"]),
                            }
                            for b in uses
                        ],
                    }
                )
        raise AssertionError("agent loop did not finish")


class Httpx2Asyncio(_Floor):
    runtime = "asyncio"
    http_module = "httpx2"


class Httpx2Trio(_Floor):
    runtime = "trio"
    http_module = "httpx2"


class HttpxAsyncio(_Floor):
    runtime = "asyncio"
    http_module = "httpx"
