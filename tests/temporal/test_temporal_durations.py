"""A Temporal turn's timeouts follow kova's one rule for durations (issue 43, item 5): NaN,
infinity, negative and zero are a ConfigError naming the field, before anything reaches
Temporal. Infinity was taken and failed inside the workflow."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from kova import ConfigError
from kova.temporal import start_turn

FIELDS = ["approval_timeout", "model_timeout", "tool_timeout", "heartbeat_timeout"]


async def _start(**options: Any) -> None:
    await start_turn(None, agent="a", history="hi", task_queue="q", id="t", **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, 0, timedelta(0)], ids=repr)
@pytest.mark.parametrize("field", FIELDS)
async def test_a_timeout_a_turn_cannot_wait_is_refused_before_temporal(
    field: str, value: object
) -> None:
    with pytest.raises(ConfigError, match=field):
        await _start(**{field: value})


async def test_a_timeout_of_the_wrong_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="model_timeout must be a number of seconds"):
        await _start(model_timeout="10")
