"""kova's McpClient against the public reference server
``@modelcontextprotocol/server-everything`` (from the npm registry, installed by
``.ci/mcp-setup.sh``), over stdio and over Streamable HTTP pinned to 127.0.0.1.

Never called here: ``get-env`` (dumps the environment) and ``gzip-file-as-resource``
(fetches URLs).
"""

from __future__ import annotations

import os
import subprocess
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import structlog.testing
import trio
from npm_env import EVERYTHING, PIN_LOOPBACK, require_npm_packages, system_node
from tied_process import tied_popen

import kova
from kova.agent import AgentBuilder
from kova.mcp import (
    ElicitationRequest,
    ElicitationResponse,
    McpClient,
    StdioTransport,
    StreamableHttpTransport,
    Transport,
    mcp_tools,
)
from kova.testing import ScriptedProvider, reply_text

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

GUARD = 60


@pytest.fixture(scope="module")
def everything() -> str:
    require_npm_packages()
    node = system_node()
    assert node is not None
    return node


@pytest.fixture(scope="module")
def everything_http(everything: str) -> Iterator[str]:
    """server-everything over Streamable HTTP on 127.0.0.1 (port 0, pinned by a preload)."""
    env = {"PATH": os.environ.get("PATH", ""), "PORT": "0", "HOME": os.environ.get("HOME", "/")}
    process = tied_popen(  # a killed test run leaves no server behind
        [everything, "--import", PIN_LOOPBACK.as_uri(), str(EVERYTHING), "streamableHttp"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None
    port = None
    for raw in process.stderr:
        line = raw.decode()
        if line.startswith("KOVA_LISTENING "):
            host, port = line.split()[1:3]
            assert host == "127.0.0.1"
            break
    if port is None:
        process.kill()
        process.wait()
        raise RuntimeError("server-everything did not start")
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    process.stderr.close()


def _transport(kind: str, node: str, url: str | None) -> Transport:
    if kind == "stdio":
        return StdioTransport(node, args=[str(EVERYTHING), "stdio"])
    assert url is not None
    return StreamableHttpTransport(url)


@pytest.fixture(params=["stdio", "streamable_http"])
def transport(request, everything) -> Transport:
    url = request.getfixturevalue("everything_http") if request.param != "stdio" else None
    return _transport(request.param, everything, url)


@asynccontextmanager
async def _connect(transport: Transport, **options) -> AsyncIterator[McpClient]:
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport, **options) as client:
            yield client


async def test_everything_tools(transport):
    async with _connect(transport) as client:
        names = {tool.name for tool in await client.tools_list()}
        assert {"echo", "get-sum", "get-tiny-image"} <= names
        echo = await client.tools_call("echo", {"message": "hello everything"})
        assert echo.text == "Echo: hello everything"
        total = await client.tools_call("get-sum", {"a": 2, "b": 40})
        assert "42" in total.text
        image = await client.tools_call("get-tiny-image")
        assert isinstance(image.content, tuple)
        assert any(isinstance(part, kova.Image) for part in image.content)
        reference = await client.tools_call(
            "get-resource-reference", {"resourceType": "Text", "resourceId": 1}
        )
        assert not reference.is_error
        assert reference.text


async def test_everything_tool_requiring_tasks_is_left_out_with_a_log_line(transport):
    with structlog.testing.capture_logs() as logs:
        async with _connect(transport) as client:
            names = {tool.name for tool in await client.tools_list()}
            wrapped = {tool.remote_name for tool in await mcp_tools(client, "all")}
    # simulate-research-query declares execution.taskSupport "required"; the mcp package
    # cannot make task-augmented calls, so kova offers the tool to nobody.
    assert "simulate-research-query" not in names | wrapped
    skipped = [entry for entry in logs if entry["event"] == "mcp.tool.skipped"]
    assert skipped[0]["tool"] == "simulate-research-query"


async def test_everything_structured_content_and_annotations(transport):
    async with _connect(transport) as client:
        tools = {tool.name: tool for tool in await client.tools_list()}
        structured = [name for name, tool in tools.items() if tool.output_schema is not None]
        assert structured, "server-everything declares an outputSchema somewhere"
        annotated = [name for name, tool in tools.items() if tool.annotations is not None]
        assert annotated


async def test_everything_agent_without_get_env(transport):
    async with _connect(transport) as client:
        builder = AgentBuilder().provider(ScriptedProvider([]))
        await builder.mcp_client(client, "all", exclude=["get-env"])
        names = builder.build().config.registry.names()
    assert "all__get-env" not in names
    assert "all__echo" in names


async def test_everything_resources_and_prompts(transport):
    async with _connect(transport) as client:
        resources = await client.resources_list()
        assert resources
        first = await client.resources_read(resources[0].uri)
        assert first[0].uri == resources[0].uri
        assert first[0].text or first[0].blob
        templates = {item.uri_template for item in await client.resource_templates_list()}
        assert "demo://resource/dynamic/text/{resourceId}" in templates
        prompts = {prompt.name for prompt in await client.prompts_list()}
        assert "args-prompt" in prompts
        rendered = await client.prompts_get("args-prompt", {"city": "Oslo", "state": "Oslo"})
        assert rendered.messages
        assert "Oslo" in rendered.messages[0].text


async def test_everything_sampling_and_elicitation_callbacks(everything):
    provider = ScriptedProvider([reply_text("sampled answer")])

    async def answer(request: ElicitationRequest) -> ElicitationResponse:
        assert request.mode == "form"
        return ElicitationResponse(action="decline")

    transport = StdioTransport(everything, args=[str(EVERYTHING), "stdio"])
    async with _connect(transport, sampling=provider, elicitation=answer) as client:
        names = {tool.name for tool in await client.tools_list()}
        assert {"trigger-sampling-request", "trigger-elicitation-request"} <= names
        sampled = await client.tools_call(
            "trigger-sampling-request", {"prompt": "say something", "maxTokens": 20}
        )
        assert "sampled answer" in sampled.text
        assert len(provider.requests) == 1
        elicited = await client.tools_call("trigger-elicitation-request")
        assert "decline" in elicited.text.lower()
