"""``run_structured`` with a ``typing.TypedDict`` on Python 3.11 (issue 44, item 9): one line
naming ``typing_extensions.TypedDict``, instead of pydantic's rule at the end of a chained
traceback. (``@tool`` takes either kind; on Python 3.12 and later pydantic reads both.)"""

from __future__ import annotations

import sys
import typing

import pytest

from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, reply_text

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="pydantic reads typing.TypedDict from Python 3.12 on"
)


class City(typing.TypedDict):
    name: str
    population: int


async def test_a_typing_typed_dict_is_one_line_naming_typing_extensions() -> None:
    model = ScriptedProvider([reply_text('{"name": "Oslo", "population": 700000}')])
    async with AgentBuilder().provider(model).build() as agent:
        for output in (City, list[City]):
            with pytest.raises(TypeError) as caught:
                await agent.run_structured("a city", output)
            message = str(caught.value)
            assert "\n" not in message
            assert "typing_extensions.TypedDict" in message
            assert caught.value.__cause__ is None
            assert caught.value.__suppress_context__
    assert model.requests == []  # refused before anything was sent
