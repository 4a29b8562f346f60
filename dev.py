#!/usr/bin/env python3
"""kova's developer entry point: needs only Python 3.11+ and pip.

    python3 dev.py demo     run the demo agent (sets up .venv on first use)
    python3 dev.py test     run the test suite (sets up .venv and the MCP test servers)
    python3 dev.py check    ruff and mypy --strict
    python3 dev.py kova ... the kova command line (same as .venv/bin/kova ...)

Each command creates ``.venv`` with kova and its dev extras the first time (and again whenever
``pyproject.toml`` changes), so a fresh clone needs nothing else.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".kova-installed"


def _run(*command: str | Path, env: dict[str, str] | None = None) -> int:
    return subprocess.call([str(part) for part in command], cwd=ROOT, env=env)


def _requirements_hash() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def ensure_venv() -> None:
    """Create .venv and install kova with its dev extras unless already current."""
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py may run on any python3
        sys.exit("kova needs Python 3.11 or newer")
    if not PYTHON.exists():
        print("dev.py: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = _requirements_hash()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    print("dev.py: installing kova with its dev extras into .venv", flush=True)
    pip = [PYTHON, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if _run(*pip, "--upgrade", "pip") != 0 or _run(*pip, "-e", ".[dev]") != 0:
        sys.exit("dev.py: installing kova failed (see pip's output above)")
    STAMP.write_text(wanted)


def ensure_mcp_servers() -> None:
    """Install the npm MCP servers the MCP tests start (needs npm; skipped without it)."""
    setup = ROOT / ".ci" / "mcp-setup.sh"
    if not setup.exists():
        return
    if shutil.which("npm") is None or shutil.which("bash") is None:
        print("dev.py: npm not found; MCP tests against npm servers will be skipped", flush=True)
        return
    if _run("bash", setup) != 0:
        sys.exit("dev.py: installing the MCP test servers failed")


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "help"
    rest = argv[1:]
    if command == "demo":
        ensure_venv()
        return _run(BIN / "kova", "demo", *rest)
    if command == "kova":
        ensure_venv()
        # Not through _run: the chat must keep the caller's working directory.
        return subprocess.call([str(BIN / "kova"), *rest])
    if command == "test":
        ensure_venv()
        ensure_mcp_servers()
        return _run(PYTHON, "-m", "pytest", "-q", *rest)
    if command == "check":
        ensure_venv()
        status = _run(BIN / "ruff", "check", ".")
        status |= _run(BIN / "ruff", "format", "--check", "kova")
        status |= _run(BIN / "mypy", "--strict", "kova")
        return status
    print(__doc__)
    return 0 if command == "help" else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
