"""``TestProvider``: a model for smoke tests that need no script.

Like pydantic-ai's ``TestModel``: on a user's message it calls every tool it is offered, once,
with arguments made up from the tool's parameters schema; once the results are in, it answers
in text, or, when the request asks for structured output, with a value valid under the
response format's schema. So a test can run an agent end to end (tool loop, argument
validation, approval, structured output) without writing what the model says.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .._models import (
    ModelResponse,
    Role,
    StopReason,
    Text,
    ToolResult,
    ToolUse,
    Usage,
)
from ._schema_values import value_for_schema
from ._scripted import FunctionProvider

if TYPE_CHECKING:
    from collections.abc import Collection

    from ._script import ScriptRequest

__all__ = ["TestProvider"]


class TestProvider(FunctionProvider):
    """A provider that calls every offered tool once, then answers.

    On a request whose last message is the user's, it asks for every tool in the request
    (or those named in ``call_tools``), each with arguments made up from its schema (see
    :func:`~kova.testing.value_for_schema`); with no tools to call, or once tool results
    are in, it answers: the JSON of a value valid under the request's ``response_format``
    when there is one, else ``text``, else a line naming the tools it called and what they
    returned. Streams and counts requests like :class:`~kova.testing.ScriptedProvider`
    (``requests``, ``batch_size``, ``latency``).

    Args:
        call_tools: ``True`` for every tool offered, ``False`` for none, or the names to call.
        text: the final answer (without a response format).
    """

    __test__ = False  # a provider, not a pytest test class

    def __init__(
        self,
        *,
        call_tools: bool | Collection[str] = True,
        text: str | None = None,
        name: str = "test",
        model: str = "test-model",
        batch_size: int = 4,
        latency: float = 0.0,
        batch_delay: float = 0.0,
    ) -> None:
        if isinstance(call_tools, str):
            raise TypeError("call_tools takes True, False or a collection of tool names")
        self._call_tools = call_tools
        self._text = text
        super().__init__(
            self._respond,
            name=name,
            model=model,
            batch_size=batch_size,
            latency=latency,
            batch_delay=batch_delay,
        )

    def _respond(self, request: ScriptRequest) -> ModelResponse:
        messages = request.messages
        usage = Usage(input_tokens=sum(len(m.text) for m in messages) // 4 + 1, output_tokens=1)
        last = messages[-1] if messages else None
        wanted = [
            tool
            for tool in request.tools
            if self._call_tools is True
            or (self._call_tools is not False and tool.name in self._call_tools)
        ]
        if last is not None and last.role is Role.USER and wanted:
            turn = sum(1 for m in messages if m.role is Role.USER)
            calls = tuple(
                ToolUse(
                    id=f"test_{turn}_{number}",
                    name=tool.name,
                    input=value_for_schema(tool.parameters) or {},
                )
                for number, tool in enumerate(wanted, start=1)
            )
            return ModelResponse(content=calls, stop_reason=StopReason.TOOL_USE, usage=usage)
        return ModelResponse(
            content=(Text(text=self._answer(request)),),
            stop_reason=StopReason.END_TURN,
            usage=usage,
        )

    def _answer(self, request: ScriptRequest) -> str:
        response_format = request.config.response_format
        if response_format is not None:
            return json.dumps(value_for_schema(response_format.schema), ensure_ascii=False)
        if self._text is not None:
            return self._text
        messages = request.messages
        if len(messages) < 2 or messages[-1].role is not Role.TOOL:
            return "success (no tool calls)"
        names = {call.id: call.name for call in messages[-2].tool_uses}
        results = {
            names.get(block.tool_use_id, block.tool_use_id): block.text
            for block in messages[-1].content
            if isinstance(block, ToolResult)
        }
        return json.dumps(results, ensure_ascii=False)
