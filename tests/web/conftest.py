from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ._browser import Browser, find_chromium, loud_skip_message, start_chromium

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's headless Chromium for the whole session (skipped, loudly, without it)."""
    executable = find_chromium()
    if executable is None:
        pytest.skip(loud_skip_message())
    yield from start_chromium(executable)
