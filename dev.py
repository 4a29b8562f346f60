#!/usr/bin/env python3
"""kova's developer entry point: needs only Python 3.11+ and pip.

    python3 dev.py demo     run the demo agent (sets up .venv on first use)
    python3 dev.py test     run the test suite (sets up .venv and the MCP test servers), on
                            one worker process per CPU (pytest-xdist; -n 0: one process)
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


MAX_WORKERS = 4
"""The suite's processes (pytest-xdist) at most: each starts its own session servers
(PostgreSQL, the Temporal dev server, Chromium), so more cost more than they win."""


def _workers(rest: list[str]) -> list[str]:
    """pytest-xdist's options for ``dev.py test``: one worker per CPU this process may use
    (up to MAX_WORKERS; one CPU: no workers), unless the caller chose (``-n 0`` runs in one
    process, as plain ``pytest`` does)."""
    chosen = any(
        arg.startswith(("-n", "--numprocesses", "--dist")) or arg == "no:xdist" for arg in rest
    )
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = min(usable or 1, MAX_WORKERS)
    return [] if chosen or workers < 2 else ["-n", str(workers)]


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
        return _run(PYTHON, "-m", "pytest", "-q", *_workers(rest), *rest)
    if command == "check":
        ensure_venv()
        status = _run(BIN / "ruff", "check", ".")
        status |= _run(BIN / "ruff", "format", "--check", "kova")
        status |= _run(BIN / "mypy", "--strict", "kova")
        status |= _run(BIN / "mypy", "--strict", "tests/typing")
        return status
    print(__doc__)
    return 0 if command == "help" else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
