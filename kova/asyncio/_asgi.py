"""``asgi_app``: a trio ASGI application (``kova.serve.app``, kova's web view) served by an
asyncio server (uvicorn) or mounted into an asyncio FastAPI/Starlette app."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from .._guest import ensure_runtime

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping

    Scope = MutableMapping[str, Any]
    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]
    App = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["AsgiBridge", "asgi_app"]


class AsgiBridge:
    """A trio ASGI application as an asyncio one: each call (a request, a WebSocket, the
    lifespan) runs in kova's trio guest run on the server's loop (:mod:`kova.asyncio`),
    and what the trio side receives and sends is awaited on asyncio.

    A client that goes away is seen by the trio app as it would be under Hypercorn's trio
    worker (``http.disconnect``); a call cancelled by the asyncio server cancels the trio
    app's work and returns once all of it has stopped.
    """

    __slots__ = ("app",)

    def __init__(self, app: App) -> None:
        if not callable(app):
            raise TypeError(f"asgi_app() takes an ASGI application, not {type(app).__name__}")
        self.app = app
        """The trio ASGI application."""

    def __repr__(self) -> str:
        return f"<kova.asyncio.AsgiBridge of {self.app!r}>"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = await ensure_runtime()

        async def receive_on_trio() -> Message:
            return await runtime.run_on_host(receive)

        async def send_on_trio(message: Message) -> None:
            await runtime.run_on_host(lambda: send(message))

        await runtime.run(self.app, scope, receive_on_trio, send_on_trio)

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the trio app's lifespan (its startup, then its shutdown when the block ends)
        from asyncio code: a mounted app's lifespan is not run by its host, so a FastAPI
        host runs it from its own::

            bridge = kova.asyncio.asgi_app(kova.serve.app(agent))

            @asynccontextmanager
            async def lifespan(app: FastAPI):
                async with bridge.lifespan():
                    yield

            app = FastAPI(lifespan=lifespan)
            app.mount("/agents", bridge)

        Raises:
            RuntimeError: the app's startup or shutdown failed (with its message).
        """
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Message] = asyncio.Queue()
        started: asyncio.Future[None] = loop.create_future()
        stopped: asyncio.Future[None] = loop.create_future()

        async def receive() -> Message:
            return await inbox.get()

        async def send(message: Message) -> None:
            kind = message.get("type")
            future = started if kind and kind.startswith("lifespan.startup") else stopped
            if future.done():
                return
            if kind in ("lifespan.startup.failed", "lifespan.shutdown.failed"):
                future.set_exception(RuntimeError(message.get("message") or kind))
            else:
                future.set_result(None)

        scope: Scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}}
        scope["state"] = {}
        task = loop.create_task(self(scope, receive, send))
        try:
            await inbox.put({"type": "lifespan.startup"})
            await asyncio.wait((started, task), return_when=asyncio.FIRST_COMPLETED)
            if not started.done():
                await task  # it ended without starting: its error, as itself
                raise RuntimeError("the app's lifespan ended before its startup completed")
            started.result()
            yield
            await inbox.put({"type": "lifespan.shutdown"})
            await asyncio.wait((stopped, task), return_when=asyncio.FIRST_COMPLETED)
            if stopped.done():
                stopped.result()
            await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait((task,))


def asgi_app(app: App) -> AsgiBridge:
    """``app``, a trio ASGI application such as :func:`kova.serve.app`, served by an
    asyncio ASGI server (uvicorn) or mounted into an asyncio FastAPI/Starlette app: it runs
    in kova's trio guest run on that loop (started on first use, see
    :func:`~kova.asyncio.open_runtime`).

    Served on its own (``uvicorn module:bridge``), its lifespan runs as the server's;
    mounted, run it from your app's lifespan with :meth:`AsgiBridge.lifespan`.

    Raises:
        TypeError: ``app`` is not callable.
    """
    return AsgiBridge(app)
