"""Test configuration: no real network egress; everything talks to loopback."""

from __future__ import annotations

import contextlib
import faulthandler
import ipaddress
import os
import signal
import socket
import sys
import threading
from typing import Any

import pytest

# A proxy in the environment (a CI machine reaching its package registries through one) would
# carry the tests' requests to their loopback servers, as it carries a user's (kova's clients
# follow HTTP(S)_PROXY / ALL_PROXY / NO_PROXY as httpx2 does): the suite runs without one, and
# so do the processes it starts. tests/providers/test_http_proxy.py sets its own.
for _name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
    os.environ.pop(_name, None)
    os.environ.pop(_name.upper(), None)

# A process started in the background by a non-interactive shell (`cmd &`, `nohup`) begins
# with SIGINT and SIGQUIT ignored, and every process it starts inherits that: the tests of
# real Ctrl-C (in-process and in the subprocesses they start) would fail for how the suite
# was launched. Ignored is reset to Python's defaults here; a handler set by Python is reset
# to the default action in the subprocesses, as in an interactive shell.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: Any) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _is_local(address):
        raise RuntimeError(f"tests may only connect to loopback, not {address!r}")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _is_local(address):
        raise RuntimeError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True, scope="session")
def _block_network_egress() -> Any:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _real_connect_ex  # type: ignore[method-assign]


# --- Every test is bounded in wall time -------------------------------------------------------
#
# A regression that hangs fails with a message instead of stalling the suite until CI's own
# timeout. Two stages: a trio test's whole run (fixtures and test) sits in a cancel scope that a
# wall-clock timer cancels after its limit, so it fails as a test with the stack of where it
# waited; and, for a hang that no cancellation reaches (a blocking call, a sync test), the
# standard library's faulthandler dumps every thread's stack and ends the run a little later.
# Time-based behaviour runs on MockClock, so the default is far above any test's real need; a
# test that needs more real time says so, with why, as ``@pytest.mark.timeout(seconds)``.

DEFAULT_TEST_TIMEOUT = 120.0
_HARD_STOP_GRACE = 15.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "timeout(seconds): this test's wall-time bound (default 120 s); say why it needs more",
    )


def _timeout_of(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is None:
        return DEFAULT_TEST_TIMEOUT
    seconds = marker.args[0] if marker.args else marker.kwargs["seconds"]
    return float(seconds)


def _bounded_run(limit: float, nodeid: str) -> Any:
    """A ``trio.run`` for pytest-trio whose run is cancelled after ``limit`` wall seconds."""
    import trio

    def run(async_fn: Any, *, clock: Any = None, instruments: Any = ()) -> Any:
        timed_out = False
        waiting: list[str] = []

        async def bounded() -> Any:
            nonlocal timed_out
            token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:

                def expire() -> None:
                    nonlocal timed_out
                    timed_out = True
                    waiting.extend(_where_tasks_wait(trio.lowlevel.current_root_task()))
                    scope.cancel()

                def fire() -> None:
                    with contextlib.suppress(trio.RunFinishedError):
                        token.run_sync_soon(expire)

                timer = threading.Timer(limit, fire)
                timer.daemon = True
                timer.start()
                try:
                    return await async_fn()
                finally:
                    timer.cancel()
            return None

        def fail() -> None:
            where = "\n".join(waiting) or "  (no task was waiting)"
            bound = f"{limit:g} s wall-time bound"
            pytest.fail(f"{nodeid} exceeded its {bound}; tasks waited at:\n{where}")

        try:
            result = trio.run(bounded, clock=clock, instruments=instruments)
        except BaseException:
            if timed_out:
                fail()
            raise
        if timed_out:
            fail()
        return result

    return run


def _where_tasks_wait(task: Any) -> list[str]:
    """Each live task's name and the innermost frame outside trio it is suspended in."""
    lines = []
    frames = [
        f"{frame.f_code.co_filename}:{lineno}"
        for frame, lineno in task.iter_await_frames()
        if f"{os.sep}trio{os.sep}" not in frame.f_code.co_filename
    ]
    if frames:
        lines.append(f"  {task.name}: {frames[-1]}")
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            lines.extend(_where_tasks_wait(child))
    return lines


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # After pytest-trio marked the async tests: a closer `trio(run=...)` marker wins.
    for item in items:
        if item.get_closest_marker("trio") is not None:
            run = _bounded_run(_timeout_of(item), item.nodeid)
            item.add_marker(pytest.mark.trio(run=run), append=False)


def _interrupt_main() -> None:
    # A real SIGINT (not _thread.interrupt_main) so a blocking sleep or read is interrupted too.
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


def _real_stderr(config: pytest.Config) -> Any:
    """The terminal's stderr under pytest's fd capture, where a hard stop's stacks must go."""
    capman = config.pluginmanager.getplugin("capturemanager")
    err = getattr(getattr(capman, "_global_capturing", None), "err", None)
    fd = getattr(err, "targetfd_save", None)
    return os.fdopen(os.dup(fd), "w") if isinstance(fd, int) else sys.__stderr__


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    limit = _timeout_of(item)
    # A sync test (or a trio test the cancellation cannot reach) gets a KeyboardInterrupt in the
    # main thread first, which pytest reports with the stack; then the hard stop.
    interrupt = threading.Timer(limit + _HARD_STOP_GRACE, _interrupt_main)
    interrupt.daemon = True
    interrupt.start()
    global _HARD_STOP_FILE
    if _HARD_STOP_FILE is None:
        _HARD_STOP_FILE = _real_stderr(item.config)
    faulthandler.dump_traceback_later(limit + 2 * _HARD_STOP_GRACE, exit=True, file=_HARD_STOP_FILE)
    try:
        yield
    finally:
        interrupt.cancel()
        faulthandler.cancel_dump_traceback_later()


_HARD_STOP_FILE: Any = None


# --- Reports carry any text to pytest-xdist's controller ----------------------------------------
#
# `python3 dev.py test` runs the suite on pytest-xdist workers, which send each test's report
# (its captured output and logs, its failure) to the controller as UTF-8. Tests of hostile
# input print and log lone surrogates ("\ud800", which no UTF-8 encodes): sent as they are,
# the worker crashed and the whole run stopped. Such characters travel escaped ("\\ud800").


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Any:
    return _utf8_safe((yield))


def _utf8_safe(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode()
        return value
    if isinstance(value, dict):
        return {_utf8_safe(key): _utf8_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_utf8_safe(item) for item in value)
    return value


def pytest_unconfigure(config: pytest.Config) -> None:
    global _HARD_STOP_FILE
    if _HARD_STOP_FILE is not None and _HARD_STOP_FILE is not sys.__stderr__:
        _HARD_STOP_FILE.close()
    _HARD_STOP_FILE = None
