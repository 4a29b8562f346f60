"""What a supervisor is told (``kova/actors/_spec.py``): Backoff, ChildSpec, the checks."""

from __future__ import annotations

import pytest

from kova.actors import Actor, Backoff, ChildSpec, open_supervisor


def test_backoff_delay_formula() -> None:
    backoff = Backoff(initial=0.5, factor=3.0, maximum=10.0)
    assert [backoff.delay(k) for k in (1, 2, 3, 4)] == [0.5, 1.5, 4.5, 10.0]
    assert Backoff.none().delay(7) == 0.0


async def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="restart"):
        ChildSpec(factory=Actor, name="x", restart="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        ChildSpec(factory=Actor, name="")
    with pytest.raises(ValueError, match="strategy"):
        async with open_supervisor(strategy="all_for_none"):  # type: ignore[arg-type]
            pass
