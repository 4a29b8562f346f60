"""Large results from the public reference server ``@modelcontextprotocol/server-everything``
on all three of its transports (issue 44, item 1).

Its ``gzip-file-as-resource`` tool fetches a URL and answers with the gzipped file, inline as
an embedded resource or as a link to a session resource. Before, a result over 1 MiB failed
over legacy SSE and over Streamable HTTP (the server answers POSTs with
``text/event-stream``): kova reported a lost connection, opened a new session and, the tool
being annotated idempotent, ran it again into the same failure. Here the file comes from a
loopback HTTP server of the test's own (random bytes, which gzip cannot shrink), and the
result must arrive once, whole, on every transport.
"""

from __future__ import annotations

import base64
import gzip
import http.server
import os
import subprocess
import threading
from typing import TYPE_CHECKING

import pytest
import structlog.testing
import trio
from npm_env import EVERYTHING, PIN_LOOPBACK, require_npm_packages, system_node
from tied_process import tied_popen

from kova.mcp import McpClient, SseTransport, StdioTransport, StreamableHttpTransport, Transport

if TYPE_CHECKING:
    from collections.abc import Iterator

GUARD = 120
# Random bytes gzip to about their own size and base64 adds a third: ~2 MB and ~15 MB results.
SIZES = {"2MB": 1_500_000, "15MB": 11_000_000}
FILES = {name: os.urandom(size) for name, size in SIZES.items()}
ENV = {
    "PATH": os.environ.get("PATH", ""),
    "HOME": os.environ.get("HOME", "/"),
    "PORT": "0",
    "GZIP_MAX_FETCH_SIZE": str(16 * 1024 * 1024),
}


@pytest.fixture(scope="module")
def files_url() -> Iterator[str]:
    class Files(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = FILES[self.path.strip("/")]
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module", params=["stdio", "sse", "streamableHttp"])
def everything(request: pytest.FixtureRequest) -> Iterator[Transport]:
    require_npm_packages()
    node = system_node()
    assert node is not None
    if request.param == "stdio":
        yield StdioTransport(node, args=[str(EVERYTHING), "stdio"], env=ENV)
        return
    process = tied_popen(  # a killed test run leaves no server behind
        [node, "--import", PIN_LOOPBACK.as_uri(), str(EVERYTHING), request.param],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert process.stderr is not None
    port = None
    for raw in process.stderr:
        line = raw.decode()
        if line.startswith("KOVA_LISTENING "):
            port = line.split()[2]
            break
    try:
        if port is None:
            raise RuntimeError("server-everything did not start")
        if request.param == "sse":
            yield SseTransport(f"http://127.0.0.1:{port}/sse")
        else:
            yield StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


@pytest.mark.parametrize("size", list(SIZES))
async def test_a_large_gzip_resource_arrives_once_whole(
    everything: Transport, files_url: str, size: str
) -> None:
    arguments = {"name": f"{size}.gz", "data": f"{files_url}/{size}", "outputType": "resource"}
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(everything, request_timeout=60) as client:
            result = await client.tools_call("gzip-file-as-resource", arguments)
            assert not result.is_error, result.text
            # The same file, read back as the session resource the tool registered.
            uri = f"demo://resource/session/{size}.gz"
            (contents,) = await client.resources_read(uri)
            assert contents.blob is not None
            assert len(contents.blob) > {"2MB": 2_000_000, "15MB": 14_600_000}[size]
            assert gzip.decompress(base64.b64decode(contents.blob)) == FILES[size]
    events = [entry["event"] for entry in logs]
    assert "mcp.connection.lost" not in events
    assert "mcp.request.replayed" not in events
