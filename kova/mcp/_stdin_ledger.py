"""Which requests a dead stdio child never read.

A request written to the child's stdin is in the pipe, not in the child: when the child is
killed, the kernel tears it down a few milliseconds later (10-20 ms under load), and until
then a write succeeds into the pipe's buffer. A call made in that window was taken to have
reached the server ("may or may not have run") though the child never read a byte of it, and
a read-only call then waited for a respawn through a whole outage.

What the pipe still holds says what the child never read: once nobody can read the pipe any
more (``poll`` reports ``POLLERR`` on its write end: every read end is closed, no grandchild
holds it), ``FIONREAD`` on the write end counts the bytes left in it, which are the last
bytes written. A request whose line ends inside them was not read whole, so it never ran;
the transport answers it "not delivered" and the connection actor sends it to the respawned
child. Where the pipe cannot be asked (another platform, a stream without a descriptor),
nothing changes.
"""

from __future__ import annotations

import array
import contextlib
import select
from collections import deque

__all__ = ["StdinLedger", "pipe_fd"]

_KEEP = 1024
"""Written requests remembered (the oldest are long read when this many follow them)."""


def pipe_fd(stream: object) -> int | None:
    """The file descriptor under an anyio/trio pipe stream, if it has one."""
    for candidate in (stream, getattr(stream, "_stream", None)):
        fileno = getattr(candidate, "fileno", None)
        if fileno is not None:
            with contextlib.suppress(OSError, ValueError, TypeError):
                fd = fileno()
                if isinstance(fd, int):
                    return fd
    return None


def _unread(fd: int) -> int | None:
    """Bytes still in the pipe whose write end is ``fd``, once no reader is left; ``None``
    while a reader may still take them (or when the platform cannot tell)."""
    try:
        import fcntl
        import termios

        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if not any(events & select.POLLERR for _, events in poller.poll(0)):
            return None  # a reader is left: what is in the pipe may still be read
        count = array.array("i", [0])
        fcntl.ioctl(fd, termios.FIONREAD, count)
    except (ImportError, AttributeError, OSError, ValueError):
        return None
    return count[0]


class StdinLedger:
    """The requests written to a child's stdin, with where each line ended."""

    __slots__ = ("_fd", "_requests", "_sending", "_written")

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        self._written = 0
        self._sending = 0
        self._requests: deque[tuple[int | str, int]] = deque(maxlen=_KEEP)

    def sending(self, size: int) -> None:
        """A message of ``size`` bytes is being written."""
        self._sending = size

    def sent(self, size: int, request_id: int | str | None) -> None:
        """It was written whole; ``request_id`` when it was a request."""
        self._sending = 0
        self._written += size
        if request_id is not None:
            self._requests.append((request_id, self._written))

    def never_read(self) -> list[int | str]:
        """The requests the child cannot have read whole: their lines end in the bytes left
        in the pipe. Empty unless nobody can read the pipe any more."""
        if self._fd is None:
            return []
        unread = _unread(self._fd)
        if not unread:
            return []
        # A message being written counts as written whole: that can only make the child
        # look as if it read more (its own write fails, and it is answered there).
        read = self._written + self._sending - unread
        return [request_id for request_id, end in self._requests if end > read]
