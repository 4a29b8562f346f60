"""Child processes tied to the test run's life: a server a fixture starts (Chromium, the
Temporal dev server, PostgreSQL, the MCP test servers, the LiteLLM proxy) gets SIGTERM when
pytest ends, however it ends (SIGKILLed too), so a killed run leaves none behind.

On Linux by ``prctl(PR_SET_PDEATHSIG)`` in a small exec shim run between fork and the real
program (not a ``preexec_fn``, which is unsafe with the threads the tests run): the shim asks
the kernel for SIGTERM when its parent dies, checks the parent did not die before that took
effect, and execs the program in the same process (same pid; the setting survives execve).
Elsewhere the program runs untied.

The kernel's "parent" is the *thread* that forked: start a tied process from a thread that
lives as long as the process should (the main thread; not ``trio.to_thread`` or
``trio.lowlevel.open_process``, whose worker threads end when idle).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

TIE = """\
import ctypes, os, signal, sys
if sys.platform.startswith("linux"):
    PR_SET_PDEATHSIG = 1
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        sys.exit("prctl(PR_SET_PDEATHSIG) failed: errno %d" % ctypes.get_errno())
    if os.getppid() != int(sys.argv[1]):
        sys.exit("the parent ended before the child was tied to it")
os.execv(sys.argv[2], sys.argv[2:])
"""
"""The shim's source: ``python -c TIE <parent pid> <program> <args...>``. With Popen's
``user=``, the switch of user happens before the shim runs, so the setting (which a switch
of user would clear) is made after it."""


def tie(args: list[str]) -> list[str]:
    """``args`` run through the shim: the command line of a tied process."""
    return [sys.executable, "-c", TIE, str(os.getpid()), *args]


def tied_popen(args: list[str], **options: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **options)`` whose process gets SIGTERM when this process
    ends (see the module's docstring for which thread to start it from). ``args[0]`` must
    be a path (the shim execs it without searching ``PATH``)."""
    return subprocess.Popen(tie(args), **options)


def tied_executable(program: Path, folder: Path) -> Path:
    """An executable in ``folder`` that runs ``program`` (with its arguments) tied to this
    process's life as :func:`tied_popen` does: for a server a library starts for us, such as
    the time-skipping test server ``WorkflowEnvironment.start_time_skipping`` runs from
    ``test_server_existing_path``. (Its parent is a thread of the Temporal SDK's runtime,
    which lives as long as the process.)"""
    shim = folder / "tie.py"
    shim.write_text(TIE)
    wrapper = folder / program.name
    wrapper.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{shim}" "{os.getpid()}" "{program}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper
