"""Structured output for any type, and streamed: a scripted model answers in JSON.

Run: python docs/examples/structured_output.py
"""

from __future__ import annotations

import dataclasses
import json

import trio

from kova import Message, ResponseFormat
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, StreamReply, reply_text


@dataclasses.dataclass
class City:
    name: str
    population: int


async def main() -> None:
    cities = [{"name": "Oslo", "population": 709000}, {"name": "Bergen", "population": 291000}]
    answers = [
        reply_text(json.dumps({"result": cities})),  # list[City]: asked for inside "result"
        reply_text('{"route": "sales"}'),  # breaks the raw schema below: asked again
        reply_text('{"route": "billing"}'),
        StreamReply(response=reply_text(json.dumps(cities[0])), chunk_chars=8),
    ]
    provider = ScriptedProvider(answers)
    history = [Message.user("The two largest cities in Norway?")]
    async with AgentBuilder().provider(provider).build() as agent:
        # Any type pydantic validates: a dataclass, a TypedDict, list[...], int, a model...
        largest, response = await agent.run_structured(history, list[City])
        print("largest:", largest)

        # A raw JSON schema: the answer is checked against it with jsonschema.
        schema = {
            "type": "object",
            "properties": {"route": {"enum": ["billing", "tech"]}},
            "required": ["route"],
        }
        route, response = await agent.run_structured(
            [Message.user("Route: my invoice is wrong")], ResponseFormat.named("route", schema)
        )
        print("route:", route, f"(asked {response.output_retries} more time)")

        # Streamed: the JSON so far as it arrives, then the validated value.
        async with agent.stream_structured(history, City) as values:
            async for value in values:
                print("  so far:" if not values.done else "  validated:", value)
        history.extend(values.response.new_messages)


if __name__ == "__main__":
    trio.run(main)
