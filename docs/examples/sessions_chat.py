"""Conversations that persist: two turns on one session, a fork, a rewind, and the list.

Run it: ``python docs/examples/sessions_chat.py``. The model is a script that answers with
how many user messages it was sent, so no key is needed; the session file is made in a
temporary folder.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio

from kova import Role
from kova.agent import AgentBuilder
from kova.sessions import SqliteSessionStore
from kova.testing import FunctionProvider, ScriptRequest, reply_text


def model(request: ScriptRequest) -> object:
    prompts = [message for message in request.messages if message.role is Role.USER]
    return reply_text(f"I have seen {len(prompts)} message(s) from you.")


async def main() -> None:
    path = Path(tempfile.mkdtemp()) / "chat.db"
    async with (
        SqliteSessionStore(path) as store,
        AgentBuilder().provider(FunctionProvider(model)).build() as agent,
    ):
        session = store.session("alice")
        print((await agent.run("Hello!", session=session)).text)
        print((await agent.run("And again.", session=session)).text)

        branch = await session.fork()  # a copy to try something else on
        print((await agent.run("A third, in the branch.", session=branch)).text)

        await session.rewind()  # drop the last turn of the original
        print(len(await session.load()), "messages left in", session.id)
        for info in await store.list():
            print(f"{info.id}: {info.title!r}, {info.messages} messages, {info.input_tokens} in")


trio.run(main)
