"""Client-side callbacks: sampling routed to a kova provider, elicitation to a host function."""

from __future__ import annotations

import pytest
from mcp_test_server import build_server

import kova
from kova.mcp import ElicitationRequest, ElicitationResponse, InProcessTransport, McpClient
from kova.testing import ErrorReply, ScriptedProvider, reply_text


async def test_sampling_request_is_answered_by_the_provider():
    provider = ScriptedProvider([reply_text("forty-two")], name="scripted")
    async with McpClient.connect(
        InProcessTransport(build_server()), sampling=provider, sampling_model="tiny-model"
    ) as client:
        result = await client.tools_call("ask_model", {"question": "meaning of life?"})
    assert result.text == "tiny-model: forty-two (endTurn)"
    (request,) = provider.requests
    assert request.messages == (
        kova.Message.system("answer briefly"),
        kova.Message.user("meaning of life?"),
    )
    assert request.config.max_tokens == 64
    assert request.config.temperature == 0.5
    assert request.config.model == "tiny-model"
    assert request.tools == ()


async def test_sampling_provider_error_goes_back_to_the_server_as_an_error():
    provider = ScriptedProvider([ErrorReply(status_code=529, message="overloaded")])
    async with McpClient.connect(InProcessTransport(build_server()), sampling=provider) as client:
        # The server's tool got a JSON-RPC error back and passed it on; the connection is
        # unharmed.
        with pytest.raises(kova.McpError, match="sampling failed"):
            await client.tools_call("ask_model", {"question": "?"})
        assert (await client.tools_call("echo", {"text": "fine"})).text == "fine"


async def test_sampling_is_off_unless_a_provider_is_given():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        with pytest.raises(kova.McpError, match="Sampling not supported"):
            await client.tools_call("ask_model", {"question": "?"})


async def test_elicitation_is_answered_by_the_host():
    asked: list[ElicitationRequest] = []

    async def answer(request: ElicitationRequest) -> ElicitationResponse:
        asked.append(request)
        return ElicitationResponse(action="accept", content={"name": "Ada", "age": 36})

    async with McpClient.connect(InProcessTransport(build_server()), elicitation=answer) as client:
        result = await client.tools_call("ask_user")
    assert result.text == "hello Ada, 36"
    (request,) = asked
    assert request.message == "Who are you?"
    assert request.mode == "form"
    assert request.requested_schema is not None
    assert set(request.requested_schema["properties"]) == {"name", "age"}


async def test_elicitation_decline_reaches_the_server():
    async def decline(request: ElicitationRequest) -> ElicitationResponse:
        return ElicitationResponse(action="decline")

    async with McpClient.connect(InProcessTransport(build_server()), elicitation=decline) as client:
        result = await client.tools_call("ask_user")
    assert result.text == "no answer: decline"


async def test_elicitation_is_off_unless_a_handler_is_given():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        with pytest.raises(kova.McpError, match="Elicitation not supported"):
            await client.tools_call("ask_user")


async def test_host_callbacks_that_raise_are_logged_and_change_nothing():
    # Before: a raising on_log, on_resource_updated or progress handler propagated into the
    # session (an on_log that called sys.exit() ended the whole program with its status), a
    # raising elicitation handler or sampling provider likewise, and the state and tool-list
    # callbacks contained Exception only, not SystemExit.
    import structlog

    def raises(*_args: object) -> None:
        raise RuntimeError("host bug")

    async def exits(*_args: object) -> None:
        raise SystemExit(4)

    def exits_now(*_args: object) -> None:  # the state and tool-list callbacks are sync
        raise SystemExit(6)

    async def bad_elicitation(request: ElicitationRequest) -> ElicitationResponse:
        raise SystemExit(5)

    provider = ScriptedProvider([])  # exhausted: raises ScriptExhaustedError, not a KovaError
    with structlog.testing.capture_logs() as logs:
        async with McpClient.connect(
            InProcessTransport(build_server()),
            on_log=exits,
            on_resource_updated=raises,
            on_state_change=exits_now,
            elicitation=bad_elicitation,
            sampling=provider,
        ) as client:
            client.add_tools_listener(exits_now)
            counted = await client.tools_call("count_up", {"steps": 2}, progress=raises)
            assert counted.text == "counted 2"
            assert (await client.tools_call("say", {"text": "hi"})).text == "said"
            await client.resources_subscribe("kova://greeting")
            assert (await client.tools_call("touch", {"uri": "kova://greeting"})).text == "touched"
            assert (await client.tools_call("grow", {"name": "extra"})).text.startswith("added")
            with pytest.raises(kova.McpError, match="elicitation failed"):
                await client.tools_call("ask_user")
            with pytest.raises(kova.McpError, match="sampling failed"):
                await client.tools_call("ask_model", {"question": "?"})
            assert (await client.tools_call("echo", {"text": "fine"})).text == "fine"
            assert client.state.session == 1
    failed = {entry.get("callback") for entry in logs if entry["event"] == "mcp.callback.failed"}
    assert {"on_log", "on_resource_updated", "progress of 'count_up'", "elicitation"} <= failed
    events = {entry["event"] for entry in logs}
    assert {"mcp.state_callback.failed", "mcp.tools.listener_failed"} <= events
