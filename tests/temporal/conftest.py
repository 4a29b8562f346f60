from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from temporal_helpers import TEST_SERVER, dev_server, tied_executable

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """One Temporal dev server for the session's Temporal tests (each test uses task queues
    and workflow ids of its own)."""
    with dev_server() as address:
        yield address


@pytest.fixture(scope="session")
def test_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The time-skipping test server for ``WorkflowEnvironment.start_time_skipping``
    (``test_server_existing_path``), tied to pytest's life: a killed run leaves none."""
    return str(tied_executable(TEST_SERVER, tmp_path_factory.mktemp("tied")))
