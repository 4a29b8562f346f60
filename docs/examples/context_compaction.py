"""A 200-step tool loop in a 4,000-token window that finishes: context compaction on the
fake OpenAI-compatible server (no network, no API key; the real provider and HTTP path).

Run it: python docs/examples/context_compaction.py
"""

from __future__ import annotations

import trio

from kova import Message
from kova.agent import (
    AgentBuilder,
    ClearToolResults,
    ContextCompacted,
    SlidingWindow,
    TurnCompleted,
)
from kova.providers import heuristic_count_tokens
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import open_openai_server, reply_text, reply_tool_calls
from kova.tools import tool


@tool
def read_page(n: int) -> str:
    """Read one page of the report.

    Args:
        n: the page number.
    """
    return f"page {n}: " + "quarterly figures and notes " * 60


async def main() -> None:
    # The scripted model reads 200 pages, one per step, then answers. Each page is ~400
    # tokens: without a policy the requests outgrow a 4k window by step 9.
    script = [reply_tool_calls(("read_page", {"n": n})) for n in range(200)]
    script.append(reply_text("Read all 200 pages."))
    async with open_openai_server(script) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(api_key="sk-fake", base_url=server.base_url, model="gpt-fake")
        )
        agent = (
            AgentBuilder()
            .provider(provider)
            .tool(read_page)
            .max_iterations(250)
            # Clear old page texts first, then slide the window: a call never loses its result.
            .context(ClearToolResults(keep_last=2), SlidingWindow(), window=4_000, reserve=500)
            .build()
        )
        history = [Message.user("Read the whole report, page by page.")]
        compactions = 0
        async with agent, agent.stream(history) as events:
            async for event in events:
                if isinstance(event, ContextCompacted):
                    compactions += 1
                elif isinstance(event, TurnCompleted):
                    response = event.response
        largest = max(len(request.body) for request in server.chat_requests())
    print(response.text)
    print(f"{len(server.chat_requests())} requests, the largest {largest} bytes")
    print(f"{compactions} compactions; {len(response.new_messages)} new messages kept for audit")
    assert response.compaction is not None
    history_next = response.compaction.history  # what the next turn starts from
    print(
        f"the next turn starts from {len(history_next)} messages "
        f"(~{heuristic_count_tokens(history_next)} tokens) instead of "
        f"{len(history) + len(response.new_messages)}"
    )


if __name__ == "__main__":
    trio.run(main)
