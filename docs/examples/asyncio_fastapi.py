"""kova in an asyncio application: FastAPI on uvicorn, an agent streamed to the browser as
server-sent events through kova.asyncio, and a tool call approved by a second endpoint.

Run it: python docs/examples/asyncio_fastapi.py

The script serves the app on loopback with uvicorn and then plays the browser: it streams
``GET /chat``, and when the agent asks to run a tool that needs approval it answers with
``POST /approvals/{call_id}``, as a user clicking "allow" would. The model is scripted (no
network, no API key); everything else is the production path.
"""

from __future__ import annotations

import asyncio
import json
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import httpx
import uvicorn
from fastapi import FastAPI, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

import kova.asyncio
from kova import TextDelta, ToolAnnotations, ToolUse
from kova.agent import AgentBuilder, ToolCallFinished, ToolCallStarted, TurnCompleted
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from kova.agent import AgentEvent

# -- the agent ------------------------------------------------------------------------------


@tool(annotations=ToolAnnotations(destructive=True))
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: the file to delete.
    """
    return f"deleted {path}"


# Decisions by call id: an asyncio future per tool call, made by whichever side comes first
# (the handler, or the second endpoint if the browser is quicker). The handler is plain
# asyncio code; kova.asyncio.on_asyncio lets kova await it on the app's loop.
decisions: dict[str, asyncio.Future[bool]] = {}


def decision_for(call_id: str) -> asyncio.Future[bool]:
    return decisions.setdefault(call_id, asyncio.get_running_loop().create_future())


async def ask_the_user(call: ToolUse, annotations: ToolAnnotations) -> bool | str:
    if annotations.read_only:
        return True
    try:
        return True if await decision_for(call.id) else "the user said no"
    finally:
        del decisions[call.id]


def build_agent() -> kova.agent.Agent:
    model = ScriptedProvider(
        [
            reply_tool_calls(("delete_file", {"path": "/tmp/cache.db"})),
            reply_text("Done: the cache file is gone."),
        ]
    )
    return (
        AgentBuilder()
        .provider(model)
        .tool(delete_file)
        .approval_handler(kova.asyncio.on_asyncio(ask_the_user))
        .build()
    )


# -- the app --------------------------------------------------------------------------------


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # One trio guest run for the app's lifetime, and the agent open in it.
    async with kova.asyncio.open_runtime(), kova.asyncio.open_agent(build_agent()) as agent:
        app.state.agent = agent
        yield


app = FastAPI(lifespan=lifespan)


def sse(event: AgentEvent) -> str:
    match event:
        case TextDelta(text=text):
            data: dict[str, object] = {"type": "text", "text": text}
        case ToolCallStarted(call=call):
            data = {"type": "tool_call", "id": call.id, "name": call.name, "input": call.input}
        case ToolCallFinished(call=call, result=result):
            data = {"type": "tool_result", "id": call.id, "text": result.text}
        case TurnCompleted(response=response):
            data = {"type": "done", "text": response.text}
        case _:
            data = {"type": type(event).__name__}
    return f"data: {json.dumps(data)}\n\n"


@app.get("/chat")
async def chat(q: str) -> StreamingResponse:
    agent: kova.asyncio.AsyncioAgent = app.state.agent

    async def events() -> AsyncIterator[str]:
        # `async with`: a browser that goes away stops the turn before the response ends.
        async with agent.stream(q) as stream:
            async for event in stream:
                yield sse(event)

    return StreamingResponse(events(), media_type="text/event-stream")


class Decision(BaseModel):
    allow: bool


@app.post("/approvals/{call_id}")
async def approve(call_id: str, decision: Decision) -> dict[str, str]:
    waiting = decision_for(call_id)
    if waiting.done():
        raise HTTPException(status_code=409, detail=f"tool call {call_id!r} is decided")
    waiting.set_result(decision.allow)
    return {"status": "decided"}


# -- serve it and play the browser ----------------------------------------------------------


async def main() -> None:
    # A listening socket of our own: its port is known, and the browser's first request
    # waits in its backlog until uvicorn accepts.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as browser:
        query = {"q": "Clear the cache file"}
        async with browser.stream("GET", "/chat", params=query) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line.removeprefix("data: "))
                print(event)
                if event["type"] == "tool_call":
                    # The user reads the call and clicks "allow" (another request).
                    answer = await browser.post(f"/approvals/{event['id']}", json={"allow": True})
                    print("approved:", answer.json())
    server.should_exit = True
    await serving


if __name__ == "__main__":
    asyncio.run(main())
