"""kova's pytest plugin, registered through the ``pytest11`` entry point when kova is
installed: the ``kova_no_network`` fixture.

A test that uses the fixture (or every test, with ``kova_no_network = true`` in the pytest
configuration) fails loudly when a kova provider sends a request anywhere but this machine:
kova's fake servers on loopback keep working; a forgotten real endpoint (a key picked up from
the environment, a default base URL) neither costs money nor flakes on the network. The
request is refused before anything is sent with
:class:`~kova.testing.RealNetworkRequestError`, and the test fails at teardown even if the
code under test caught that error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["kova_no_network"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "kova_no_network",
        "fail every test in which a kova provider sends a request off this machine",
        type="bool",
        default=False,
    )


@pytest.fixture
def kova_no_network() -> Iterator[list[str]]:
    """Fail the test when a kova provider sends a request to any host but loopback.

    Yields the refused URLs (empty while the test keeps to loopback).
    """
    from ._no_network import no_network

    with no_network() as refused:
        yield refused
    if refused:
        pytest.fail(
            f"kova_no_network: {len(refused)} real provider request(s) refused: "
            + ", ".join(refused),
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _kova_no_network_everywhere(request: pytest.FixtureRequest) -> None:
    """``kova_no_network = true`` in the pytest configuration: the fixture for every test."""
    if request.config.getini("kova_no_network"):
        request.getfixturevalue("kova_no_network")
