"""The first example in docs/actors.md runs and prints what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).parent.parent.parent / "docs" / "actors.md"


def test_guide_example_runs() -> None:
    example = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)[0]
    result = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    printed = [line for line in result.stdout.splitlines() if "actor." not in line]
    assert printed == ["5", "[0, 1, 2, 3]"]
