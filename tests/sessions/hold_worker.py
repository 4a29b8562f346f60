"""A process of tests/sessions/test_holds.py on one session ("c") of a store:

hold_worker.py sqlite|postgres WHERE hold NAME RELEASE_FILE [--lease S]
    holds the session, appends NAME, prints "held", waits for RELEASE_FILE to exist,
    lets the session go and prints "released"
hold_worker.py sqlite|postgres WHERE append NAME [--no-wait] [--lease S]
    appends NAME as one turn (waiting for the session unless --no-wait); prints
    "appended", or "busy" (SessionBusyError)
hold_worker.py sqlite|postgres WHERE load
    prints the session's messages' texts
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from kova import Message
from kova.errors import SessionBusyError
from kova.sessions import PostgresSessionStore, SessionWrite, SqliteSessionStore


async def main(kind: str, where: str, command: str, *args: str) -> None:
    lease = float(args[args.index("--lease") + 1]) if "--lease" in args else 30.0
    store = (
        SqliteSessionStore(where, lease=lease)
        if kind == "sqlite"
        else PostgresSessionStore(where, lease=lease)
    )
    async with store:
        if command == "load":
            print(" ".join(message.text for message in await store.session("c").load()))
        elif command == "hold":
            name, release = args[0], Path(args[1])
            async with store.session("c")._gate():
                state = await store.read("c")
                await store.write(
                    "c",
                    SessionWrite(
                        version=state.version,
                        keep=len(state.messages),
                        messages=(Message.user(name),),
                        turn=1,
                    ),
                )
                print("held", flush=True)
                while not await trio.Path(release).exists():  # noqa: ASYNC110 (another process)
                    await trio.sleep(0.02)
            print("released", flush=True)
        else:
            session = store.session("c", wait="--no-wait" not in args)
            try:
                await session.append([Message.user(args[0])])
            except SessionBusyError:
                print("busy", flush=True)
            else:
                print("appended", flush=True)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
