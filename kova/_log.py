"""kova's loggers: quiet unless the application asks for logs.

kova logs structured events (``actor.started``, ``provider.request.retrying``, ...) with
key-value data. Where they go depends on the application, never on kova:

- If the application has configured structlog (``structlog.configure(...)`` anywhere, which
  includes ``structlog.testing.capture_logs()``), every event goes through structlog with
  the application's processors, exactly as ``structlog.get_logger(__name__)`` would.
- Otherwise the event goes to the standard library's :mod:`logging`, on the logger named after
  the kova module (``kova.actors._supervisor``, ...). Unconfigured, that prints nothing below
  ``WARNING``, like httpx and trio; ``logging.basicConfig(level=logging.DEBUG)`` or
  ``logging.getLogger("kova").setLevel(logging.DEBUG)`` plus a handler turns kova's debug
  events on.

structlog's own default (no configuration) prints every level to stdout, debug included, which
is right for an application and wrong for a library: hence this small shim instead of
``structlog.get_logger`` in each module. The check is made at every call, so configuring
structlog after kova was imported still takes effect.

kova never imports structlog itself to make that check (an application that configured it has
imported it), so a program that does not use structlog does not pay for importing it.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["KovaLogger", "get_logger"]


class KovaLogger:
    """A module's logger: structlog's API (``debug`` ... ``error``, ``bind``), routed to
    structlog when the application configured it and to :mod:`logging` otherwise."""

    __slots__ = ("_context", "_name", "_proxy", "_stdlib")

    def __init__(self, name: str, context: Mapping[str, object] | None = None) -> None:
        self._name = name
        self._context: dict[str, object] = dict(context or {})
        self._stdlib = logging.getLogger(name)
        # structlog's lazy proxy re-reads the configuration on every call (unless the
        # application caches loggers), so one per logger follows later `configure` calls.
        self._proxy: Any = None  # Any: structlog's proxy is untyped at this boundary

    def bind(self, **values: object) -> KovaLogger:
        """A logger that adds ``values`` to every event."""
        return KovaLogger(self._name, {**self._context, **values})

    def debug(self, event: str, **fields: object) -> None:
        """Log ``event`` at debug level."""
        self._log(logging.DEBUG, "debug", event, fields)

    def info(self, event: str, **fields: object) -> None:
        """Log ``event`` at info level."""
        self._log(logging.INFO, "info", event, fields)

    def warning(self, event: str, **fields: object) -> None:
        """Log ``event`` at warning level."""
        self._log(logging.WARNING, "warning", event, fields)

    def error(self, event: str, **fields: object) -> None:
        """Log ``event`` at error level."""
        self._log(logging.ERROR, "error", event, fields)

    def _log(self, level: int, method: str, event: str, fields: dict[str, object]) -> None:
        structlog = sys.modules.get("structlog")
        if structlog is not None and structlog.is_configured():
            if self._proxy is None:
                self._proxy = structlog.get_logger(self._name, **self._context)
            getattr(self._proxy, method)(event, **fields)
            return
        stdlib = self._stdlib
        if not stdlib.isEnabledFor(level):
            return
        exc_info = fields.pop("exc_info", None)
        data = {**self._context, **fields}
        text = " ".join([event, *(f"{key}={value!r}" for key, value in data.items())])
        stdlib.log(
            level,
            "%s",
            text,
            exc_info=exc_info,  # type: ignore[arg-type]  # structlog accepts the same values
            extra={"kova_event": event, "kova_fields": data},
        )


def get_logger(name: str) -> KovaLogger:
    """The logger for kova module ``name`` (pass ``__name__``)."""
    return KovaLogger(name)
