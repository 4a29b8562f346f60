"""A duration an MCP client cannot wait (NaN, infinity, negative, zero where it must be
positive) is refused where it is given, with a ConfigError naming the field: kova's one rule
for durations (issue 43, item 5), on every transport and every option of the client.

Before, the transports took infinity (and ``McpClient.connect`` took any
``request_timeout``: a NaN one failed every call with a raw ``ValueError`` from trio), and
``ReconnectPolicy`` took NaN and infinity."""

from __future__ import annotations

import math
import random
import sys
from typing import Any

import pytest
import trio
from mcp_test_server import build_server

from kova import BuildError, ConfigError
from kova.mcp import (
    InProcessTransport,
    McpClient,
    ReconnectPolicy,
    SseTransport,
    StdioTransport,
    StreamableHttpTransport,
)

BAD = [math.nan, math.inf, -math.inf, -1.0, 0]

TRANSPORTS: dict[str, Any] = {
    "streamable-http": lambda **kw: StreamableHttpTransport("http://127.0.0.1:1/mcp", **kw),
    "sse": lambda **kw: SseTransport("http://127.0.0.1:1/sse", **kw),
}


@pytest.mark.parametrize("value", BAD, ids=repr)
@pytest.mark.parametrize("field", ["timeout", "sse_read_timeout"])
@pytest.mark.parametrize("name", list(TRANSPORTS))
def test_every_transport_refuses_a_duration_it_cannot_wait(
    name: str, field: str, value: float
) -> None:
    with pytest.raises(ConfigError, match=field) as info:
        TRANSPORTS[name](**{field: value})
    assert isinstance(info.value, ValueError)  # as before, for callers catching that
    assert isinstance(info.value, BuildError)


def test_finite_seconds_are_taken_by_every_transport() -> None:
    for build in TRANSPORTS.values():
        transport = build(timeout=2.5, sse_read_timeout=1)
        assert (transport.timeout, transport.sse_read_timeout) == (2.5, 1)
    # stdio and in-process transports have no durations: nothing to refuse.
    StdioTransport(sys.executable)
    InProcessTransport(build_server())


@pytest.mark.parametrize("value", BAD, ids=repr)
@pytest.mark.parametrize("field", ["request_timeout", "connect_timeout"])
async def test_the_clients_timeouts_are_refused_before_anything_starts(
    field: str, value: float
) -> None:
    with pytest.raises(ConfigError, match=field):
        async with McpClient.connect(InProcessTransport(build_server()), **{field: value}):
            raise AssertionError("connected with a timeout it cannot wait")


@pytest.mark.parametrize("value", BAD, ids=repr)
async def test_a_per_call_timeout_is_refused_and_the_client_goes_on(value: float) -> None:
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        with pytest.raises(ConfigError, match="timeout"):
            await client.tools_call_with_timeout("add", {"a": 1, "b": 2}, value)
        result = await client.tools_call_with_timeout("add", {"a": 1, "b": 2}, 5)
    assert result.structured == {"result": 3}


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0], ids=repr)
@pytest.mark.parametrize("field", ["initial", "maximum", "factor", "jitter", "give_up_after"])
def test_a_reconnect_policy_refuses_a_delay_it_cannot_wait(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"ReconnectPolicy.{field}"):
        ReconnectPolicy(**{field: value})


def test_a_reconnect_policy_takes_zero_delays_and_no_deadline() -> None:
    policy = ReconnectPolicy(initial=0, maximum=0, jitter=0, factor=0, give_up_after=None)
    assert policy.delay(3) == 0
    for bad in (0, -1):
        with pytest.raises(ConfigError, match="give_up_after"):
            ReconnectPolicy(give_up_after=bad)
        with pytest.raises(ConfigError, match="max_attempts"):
            ReconnectPolicy(max_attempts=bad)


def test_a_long_outage_never_overflows_the_backoff() -> None:
    # The default policy never gives up; 2.0 ** 1024 raised OverflowError, which crashed the
    # connection actor after ~1,025 failed attempts (about 35 minutes of outage).
    policy = ReconnectPolicy()
    rng = random.Random(3)
    for failures in (1_024, 1_025, 5_000, 10**9):
        assert 1.6 <= policy.delay(failures, rng) <= 2.4
    assert ReconnectPolicy(factor=10.0, jitter=0).delay(400) == 2.0


async def test_a_nan_request_timeout_never_reaches_trio() -> None:
    # The old failure: connect() took it, and every call raised trio's raw ValueError.
    with pytest.raises(ConfigError, match="request_timeout must be a finite number"):
        async with McpClient.connect(
            InProcessTransport(build_server()), request_timeout=math.nan
        ) as client:
            with trio.fail_after(5):
                await client.tools_call("add", {"a": 1, "b": 2})
