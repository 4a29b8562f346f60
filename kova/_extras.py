"""kova's optional parts and the extras that bring them: a part whose extra is not installed
says so in one line, naming the extra and the install command, instead of a bare
``ModuleNotFoundError`` about some module deep inside it."""

from __future__ import annotations

import importlib.util
from types import MappingProxyType

__all__ = ["EXTRAS", "MissingExtraError", "require_extra"]

EXTRAS = MappingProxyType(
    {
        "mcp": ("mcp", "mcp_types"),
        "bedrock": ("botocore",),
        "ws": ("trio_websocket", "starlette", "hypercorn"),
        "web": (),  # nothing left to install: the HTML converter is kova's own
        "otel": ("opentelemetry",),
        "temporal": ("temporalio",),
        "serve": ("starlette", "hypercorn", "ag_ui", "a2a"),
        "postgres": ("psycopg", "psycopg_pool"),
    }
)
"""Each extra of ``kova-sdk`` and the top-level modules it provides."""


class MissingExtraError(ModuleNotFoundError):
    """A part of kova was used without the extra that brings its dependencies.

    A ``ModuleNotFoundError`` (so ``except ImportError`` still catches it); ``extra`` names
    the extra, ``name`` the missing module.
    """

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs kova's {extra!r} extra: pip install 'kova-sdk[{extra}]' "
            f"(from a clone: pip install './kova[{extra}]'); the module {module!r} is missing",
            name=module,
        )
        self.feature = feature
        self.extra = extra


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # blocked, or a broken entry in sys.modules
        return False


def require_extra(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` can be imported
    (found, not imported: the check costs no import time).

    Args:
        extra: a key of :data:`EXTRAS`.
        feature: what needs it, as the user knows it (``"kova.mcp"``, ``"kova serve"``).
    """
    for module in EXTRAS[extra]:
        if not _importable(module):
            raise MissingExtraError(feature, extra, module)
