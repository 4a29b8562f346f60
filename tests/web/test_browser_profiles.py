"""The browser fixture's profiles: a test run killed with SIGKILL leaves its Chromium profile
behind; the next run removes it, and leaves a running run's alone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from . import _browser


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_killed_run_s_profile_is_removed_and_a_live_run_s_kept() -> None:
    root = Path(tempfile.gettempdir())
    orphan = Path(tempfile.mkdtemp(prefix=f"kova-chromium-{_dead_pid()}-", dir=root))
    (orphan / "Default").mkdir()
    (orphan / "Default" / "Preferences").write_text("{}")
    live = Path(tempfile.mkdtemp(prefix=f"kova-chromium-{os.getpid()}-", dir=root))
    try:
        _browser._remove_orphaned_profiles()
        assert not orphan.exists()
        assert live.exists()
    finally:
        _browser._remove_profile(str(live))
        _browser._remove_profile(str(orphan))
