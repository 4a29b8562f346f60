"""Refusing real provider requests in tests: :func:`no_network` and its error.

The pytest fixture ``kova_no_network`` (kova's pytest plugin) is this context manager around
a test; it is here, without pytest, for other test runners and scripts.
"""

from __future__ import annotations

import ipaddress
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["RealNetworkRequestError", "no_network"]


class RealNetworkRequestError(AssertionError):
    """A provider tried a request to a host other than this machine inside
    :func:`no_network` (or a test using the ``kova_no_network`` fixture)."""


def _local(host: str) -> bool:
    if host in ("localhost", "") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@contextmanager
def no_network() -> Iterator[list[str]]:
    """Inside the block, a kova provider request to any host but loopback raises
    :class:`RealNetworkRequestError` before anything is sent (kova's fake servers, on
    loopback, keep working). Yields the list of refused URLs, which the block can check
    afterwards even when the code under test caught the error."""
    from ..providers._http import HttpTransport

    refused: list[str] = []
    original = HttpTransport._build

    def checked(self: HttpTransport, *args: Any, **kwargs: Any) -> Any:
        request = original(self, *args, **kwargs)
        if not _local(request.url.host):
            url = str(request.url.copy_with(query=None))
            refused.append(url)
            raise RealNetworkRequestError(
                f"kova_no_network: the {self.provider} provider tried a real request to {url}; "
                "point it at a fake server (kova.testing.open_*_server) or use a "
                "ScriptedProvider or TestProvider"
            )
        return request

    HttpTransport._build = checked  # type: ignore[method-assign]
    try:
        yield refused
    finally:
        HttpTransport._build = original  # type: ignore[method-assign]
