from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from temporal_helpers import dev_server

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """One Temporal dev server for the session's Temporal tests (each test uses task queues
    and workflow ids of its own)."""
    with dev_server() as address:
        yield address
