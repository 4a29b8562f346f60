"""On Temporal, parallel agent tools each check the outer requests limit against the figures
the turn had when the step began, so together they can send more model calls than it allows
(documented). The error then counts what was sent (issue 42 item 9): it said "model call 7
was not sent" after 16 were."""

from __future__ import annotations

import pytest

from kova import InferenceConfig
from kova.agent import Turn, UsageLimits
from kova.errors import UsageLimitExceeded
from kova.temporal._inner import count_inner, requests_in
from kova.testing import reply_tool_calls


def test_the_requests_error_counts_the_calls_parallel_inner_agents_sent() -> None:
    turn = Turn.start("go", tools=[], config=InferenceConfig(), limits=UsageLimits(requests=6))
    turn.next_step()
    turn.model_replied(reply_tool_calls(("researcher", {}), ("researcher", {}), ("researcher", {})))
    turn.next_step()
    # Each of the three activities saw 1 model call made and so allowed itself 5 more.
    records: list[object] = [[["request"]] * 5 for _ in range(3)]
    sent = [requests_in(record) for record in records]
    assert sent == [5, 5, 5]
    count_inner(turn, records[0], sent_later=10)
    with pytest.raises(UsageLimitExceeded) as caught:
        count_inner(turn, records[1], sent_later=5)
    message = str(caught.value)
    assert "was not sent" not in message
    assert message == "usage limit requests=6 exceeded: the turn has used 16 requests"
    assert caught.value.figure == 16
