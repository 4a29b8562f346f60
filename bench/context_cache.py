"""Prompt-cache reads before and after a compaction (issue 49): a long tool loop on the fake
Anthropic server under each strategy, with a provider-style prefix cache simulated over the
requests as sent.

    .venv/bin/python bench/context_cache.py [--steps 80] [--window 16000]

The cache model is Anthropic's (and OpenAI's automatic one): a request reads from the cache the
longest prefix it shares with an earlier request of the run (tools, then the system prompt,
then the messages, each as sent on the wire), if that prefix is at least 1,024 tokens; tokens
are counted at four characters each. kova's compaction keeps the system prompt and everything
before the compaction point byte-identical, so the call right after a compaction still reads
that prefix; what changed after it is written anew. Prints, per strategy, the mean prompt and
cache-read tokens of the calls that follow a compaction and of the others, and the smallest
read right after a compaction against the system prompt's size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import trio

from kova import Message
from kova.agent import AgentBuilder, ClearToolResults, ContextCompacted, SlidingWindow, Summarize
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.testing import Script, open_anthropic_server, reply_text, reply_tool_calls
from kova.tools import tool

SYSTEM = "You are a careful log analyst. " + " ".join(
    f"Rule {n}: read each part fully, note anomalies with their line numbers." for n in range(120)
)
MIN_CACHED = 1024


@tool
async def read(n: int) -> str:
    """Read one part of the log.

    Args:
        n: the part.
    """
    return f"part {n}: " + "".join(
        f"line {n}.{i}: ok status=200 bytes={i * 37}\n" for i in range(60)
    )


def _prefixes(body: dict) -> str:
    parts = [json.dumps(body.get("tools", []), sort_keys=True)]
    parts.append(json.dumps(body.get("system", ""), sort_keys=True))
    parts.extend(json.dumps(message, sort_keys=True) for message in body["messages"])
    return "\x00".join(parts)


def _shared(a: str, b: str) -> int:
    size = min(len(a), len(b))
    low, high = 0, size
    while low < high:  # the longest common prefix, by halving
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


async def one(label: str, strategies: list, steps: int, window: int) -> dict[str, float]:
    state = {"step": 0}

    def model(request):
        if "<conversation>" in request.messages[-1].text:
            return reply_text("Notes: parts read so far were all ok; no anomalies.")
        state["step"] += 1
        if state["step"] <= steps:
            return reply_tool_calls(("read", {"n": state["step"]}))
        return reply_text("all parts ok")

    after: set[int] = set()
    async with open_anthropic_server(Script(model)) as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-x", api_key="k", base_url=server.base_url, cache=True)
        )
        builder = AgentBuilder().provider(provider).system_prompt(SYSTEM).tools(read)
        builder = builder.max_iterations(steps + 5).context(*strategies, window=window)
        async with builder.build() as agent, agent.stream([Message.user("check the log")]) as s:
            async for event in s:
                if isinstance(event, ContextCompacted):
                    # the next main request (a summary's own request is left out below)
                    after.add(len(server.messages_requests()))
    sent = [r.json() for r in server.messages_requests()]
    seen: list[str] = []
    rows = {"after": [], "other": []}
    for index, body in enumerate(sent):
        text = _prefixes(body)
        if "<conversation>" in text:
            continue
        prompt = len(text) // 4
        shared = max((_shared(text, earlier) for earlier in seen), default=0) // 4
        read_tokens = shared if shared >= MIN_CACHED else 0
        compacted = index in after or (
            index - 1 in after and "<conversation>" in _prefixes(sent[index - 1])
        )
        rows["after" if compacted else "other"].append((prompt, read_tokens))
        seen.append(text)
    system_tokens = len(json.dumps(SYSTEM)) // 4
    result = {
        "calls": len(rows["after"]) + len(rows["other"]),
        "compactions": len(rows["after"]),
        "system": system_tokens,
    }
    for kind, values in rows.items():
        if values:
            result[f"{kind}_prompt"] = statistics.mean(p for p, _ in values)
            result[f"{kind}_read"] = statistics.mean(r for _, r in values)
            result[f"{kind}_min_read"] = min(r for _, r in values)
    print(
        f"{label:<34} calls {result['calls']:>3}, compactions {result['compactions']:>2}: "
        f"after a compaction prompt {result.get('after_prompt', 0):>6.0f} read "
        f"{result.get('after_read', 0):>6.0f} (min {result.get('after_min_read', 0):>5}; "
        f"system+tools prefix ~{system_tokens}) | other calls prompt "
        f"{result.get('other_prompt', 0):>6.0f} read {result.get('other_read', 0):>6.0f}"
    )
    return result


async def main(steps: int, window: int) -> None:
    print(
        f"{steps}-step tool loop, {window}-token window, simulated prefix cache (min {MIN_CACHED})"
    )
    await one(
        "clear_tool_results + sliding_window", [ClearToolResults(), SlidingWindow()], steps, window
    )
    await one("sliding_window", [SlidingWindow()], steps, window)
    await one("summarize + sliding_window", [Summarize(), SlidingWindow()], steps, window)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--window", type=int, default=16_000)
    args = parser.parse_args()
    trio.run(main, args.steps, args.window)
    sys.exit(0)
