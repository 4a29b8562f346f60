"""Names a package loads on first use (PEP 562): the one ``__getattr__`` and ``__dir__``
every lazy package of kova uses (``kova``, ``kova.agent``, ``kova.temporal``, ...)."""

from __future__ import annotations

import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(
    package: str, where: Mapping[str, str], moved: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``): each name of
    ``where`` is imported from the module named beside it (relative to ``package``, or
    absolute) when it is first asked for, then kept in the package's namespace. ``moved``:
    names that left the package, by where they went (the error says so)."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            went = None if moved is None else moved.get(name)
            hint = f" (use {went}; see docs/changes.md)" if went else ""
            raise AttributeError(f"module {package!r} has no attribute {name!r}{hint}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
