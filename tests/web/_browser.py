"""Debian's headless Chromium, driven over its DevTools protocol (a WebSocket on loopback).

Started with flags that keep it off the network: every host name resolves to nothing except
127.0.0.1, every other request goes to a dead proxy, and background services (updates, sync,
metrics, translation) are off.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio_websocket
from tied_process import tied_popen

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

FLAGS = [
    "--headless=new",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--metrics-recording-only",
    "--mute-audio",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9",
    "--window-size=420,860",
    "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path is not None:
            return path
    return None


@attrs.frozen
class Browser:
    port: int
    path: str

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}{self.path}"


def start_chromium(executable: str) -> Iterator[Browser]:
    """Run Chromium for the test session; yields where its DevTools endpoint listens.

    Chromium runs in a process group of its own, and the whole group is stopped at the end:
    its helper processes (zygote, GPU, crash handler) outlive the browser process otherwise
    and were still writing into the profile while it was removed ("Directory not empty").
    It is tied to this process's life (:func:`tied_process.tied_popen`; start it from the
    main thread): a test run that is killed takes the browser and its helpers with it.
    """
    _remove_orphaned_profiles()
    profile = tempfile.mkdtemp(prefix=f"{_PROFILE_PREFIX}{os.getpid()}-")
    try:
        process = tied_popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            active = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not (active.exists() and len(active.read_text().splitlines()) >= 2):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chromium did not start (exit code {process.poll()})")
                time.sleep(0.05)
            port, path = active.read_text().splitlines()[:2]
            yield Browser(port=int(port), path=path)
        finally:
            _stop_group(process)
    finally:
        _remove_profile(profile)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop Chromium and every process it started (its session's process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # a helper that ignored SIGTERM


_PROFILE_PREFIX = "kova-chromium-"


def _remove_orphaned_profiles() -> None:
    """Remove the profiles of test runs that were killed (SIGKILL leaves no ``finally``): a
    profile's name carries the pid of the run that made it; one whose run is gone goes."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_PROFILE_PREFIX}*"):
        owner = folder.name.removeprefix(_PROFILE_PREFIX).split("-", 1)[0]
        if not owner.isdigit() or _alive(int(owner)):
            continue  # an older unnamed profile, or a run still going
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _remove_profile(profile: str) -> None:
    """Remove the profile; a helper process that was still exiting may write one last file
    into it, so a few tries a tenth of a second apart."""
    for _ in range(20):
        try:
            shutil.rmtree(profile)
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
        else:
            return
    shutil.rmtree(profile, ignore_errors=True)


def loud_skip_message() -> str:
    banner = "!" * 78
    message = (
        f"\n{banner}\n!!! chromium is not installed: the BROWSER TESTS OF kova.web ARE SKIPPED.\n"
        f"!!! Install Debian's package (apt-get install chromium); .ci/run does this.\n{banner}\n"
    )
    sys.stderr.write(message)
    return "chromium is not installed (apt-get install chromium): browser tests skipped"


class Tab:
    """One page target, attached in flat mode over the browser's DevTools WebSocket."""

    def __init__(self, connection: trio_websocket.WebSocketConnection, session: str) -> None:
        self._connection = connection
        self._session = session
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.console: list[str] = []

    async def reader(self) -> None:
        while True:
            message = json.loads(await self._connection.get_message())
            if "id" in message and message["id"] in self._waiting:
                self._waiting.pop(message["id"]).send_nowait(message)
            elif message.get("method") == "Runtime.exceptionThrown":
                self.console.append(json.dumps(message["params"]["exceptionDetails"]))

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[number] = send
        message = {"id": number, "method": method, "params": params}
        if self._session:
            message["sessionId"] = self._session
        await self._connection.send_message(json.dumps(message))
        reply = await receive.receive()
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]  # type: ignore[no-any-return]

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, *, seconds: float = 20) -> Any:
        """Poll ``expression`` until it is truthy (an exception counts as false)."""
        guarded = (
            f"(() => {{ try {{ return Boolean({expression}); }} catch (e) {{ return false; }} }})()"
        )
        with trio.fail_after(seconds):
            while True:
                value = await self.evaluate(guarded)
                if value:
                    return value
                await trio.sleep(0.05)

    async def screenshot(self, *, scale: float = 1.0) -> bytes:
        """A PNG of the viewport (``scale`` < 1: smaller, for cheap pixel checks)."""
        params: dict[str, Any] = {"format": "png"}
        if scale != 1.0:
            size = await self.evaluate("[innerWidth, innerHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": scale}
        result = await self.send("Page.captureScreenshot", **params)
        return base64.b64decode(result["data"])


@asynccontextmanager
async def open_tab(browser: Browser, url: str) -> AsyncIterator[Tab]:
    async with (
        trio_websocket.open_websocket_url(browser.url, max_message_size=2**26) as connection,
        trio.open_nursery() as nursery,
    ):
        root = Tab(connection, "")
        nursery.start_soon(root.reader)
        target = (await root.send("Target.createTarget", url="about:blank"))["targetId"]
        session = (await root.send("Target.attachToTarget", targetId=target, flatten=True))[
            "sessionId"
        ]
        tab = Tab(connection, session)
        tab._waiting = root._waiting  # one reader, one id counter for both
        tab._ids = root._ids
        await tab.send("Runtime.enable")
        await tab.send("Page.enable")
        # A phone-sized viewport: the page must be readable there.
        await tab.send(
            "Emulation.setDeviceMetricsOverride",
            width=420,
            height=860,
            deviceScaleFactor=1,
            mobile=True,
        )
        await tab.send("Page.navigate", url=url)
        try:
            yield tab
        finally:
            with trio.move_on_after(5) as cleanup:
                cleanup.shield = True
                await root.send("Target.closeTarget", targetId=target)
            nursery.cancel_scope.cancel()


def png_pixels(data: bytes, *, header_only: bool = False) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG: width, height and the pixels (one bytes per pixel)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, header = 8, b"", b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    if header_only:
        return width, height, []
    assert depth == 8, depth
    assert color in (2, 6), color
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    previous = bytearray(stride)
    pixels: list[bytes] = []
    offset = 0
    for _ in range(height):
        kind, line = raw[offset], bytearray(raw[offset + 1 : offset + 1 + stride])
        offset += 1 + stride
        for index in range(stride):
            left = line[index - channels] if index >= channels else 0
            up = previous[index]
            corner = previous[index - channels] if index >= channels else 0
            if kind == 1:
                line[index] = (line[index] + left) & 0xFF
            elif kind == 2:
                line[index] = (line[index] + up) & 0xFF
            elif kind == 3:
                line[index] = (line[index] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[index] = (line[index] + predictor) & 0xFF
        pixels.extend(bytes(line[i : i + channels]) for i in range(0, stride, channels))
        previous = line
    return width, height, pixels
