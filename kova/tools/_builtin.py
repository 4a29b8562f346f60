""":func:`builtin_tools`: the ready-made tools, bound to one :class:`~kova.tools.ToolPolicy`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._fs import EditFile, PatchFile, ReadFile, WriteFile
from ._fs_tree import ListDir, Search
from ._shell import Shell

if TYPE_CHECKING:
    from ._policy import ToolPolicy
    from ._tool import Tool

__all__ = ["builtin_tools"]


def builtin_tools(policy: ToolPolicy, *, web: bool = False) -> list[Tool]:
    """The built-in tools, every one confined by ``policy``.

    ``read_file``, ``list_dir``, ``search``, ``edit_file``, ``write_file``, ``patch_file``
    and ``shell``; with ``web=True`` also ``fetch_webpage`` (no extra needed: HTML is
    converted by kova's own linear converter, loaded on its first call). Each tool
    carries :class:`~kova.ToolAnnotations` (the file readers and ``search`` are read-only;
    the writers and ``shell`` are not), so an approval handler can decide by them.

    Failures (a refused path, a missing file, a timed-out command, a refused URL) come back
    to the model as error results; none raises into the agent loop.

    Args:
        policy: what the tools may touch (see :class:`~kova.tools.ToolPolicy`).
        web: also include ``fetch_webpage``, confined by ``policy.web``.

    Returns:
        New tool objects, ready for ``AgentBuilder().tools(*builtin_tools(policy))`` or a
        :class:`~kova.tools.ToolRegistry`.
    """
    tools: list[Tool] = [
        ReadFile(policy),
        ListDir(policy),
        Search(policy),
        EditFile(policy),
        WriteFile(policy),
        PatchFile(policy),
        Shell(policy),
    ]
    if web:
        from ._web import FetchWebpage

        tools.append(FetchWebpage(policy.web))
    return tools
