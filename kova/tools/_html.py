"""HTML to readable markdown or text, for ``fetch_webpage``: one linear pass, bounded.

Why our own converter: BeautifulSoup (``html.parser``) plus markdownify, which this replaced,
is superlinear on nesting. Measured on this machine: 26 KB of nested ``<div>`` took 8 s in
markdownify, 52 KB hit its ``RecursionError``; BeautifulSoup alone took 1.8 s on 104 KB; a
fetched page of the default 2 MB cap could burn minutes of CPU in a worker thread nobody
could stop. The standard library's ``HTMLParser`` is linear but costs about 3 s per 2 MB of
tags here, and its buffering rescans unfinished markup on every chunk.

So: one regular expression finds the next piece of markup from where the last ended (comments,
declarations, start and end tags; an unclosed comment, quote or tag runs to the end of the
document, as in a browser, so no match ever rescans), and the text between pieces goes
straight to the output. Nothing builds a tree and nothing recurses: the output is written as
the document is read, with a few small stacks (open lists, tables, links, quote depth) and
counters (which end tags have a start to close, so a stray ``</div>`` costs nothing). Every
step is amortized constant per input character, and the work stops, returning what it has,
when the output reaches its size limit, when the deadline passes, or when it is told to stop
(a cancelled call): it checks every few hundred pieces of markup.

What a reader never sees is dropped (scripts, styles, templates, ``noscript``, embedded
frames, SVG, canvas); the ``<title>`` becomes the first heading.
"""

from __future__ import annotations

import html as html_lib
import re
import time
from typing import TYPE_CHECKING

from .._record import Record

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

__all__ = ["Converted", "convert_html", "html_to_markdown", "html_to_text"]

_MARKUP = re.compile(
    r"<(?:"
    r"!--(?:.*?-->|.*)"  # a comment; an unclosed one runs to the end
    r"|[!?][^>]*+>?"  # <!doctype ...>, <![CDATA[...]]> (as text-less markup), <?...?>
    # a start or end tag: name, then attributes up to the first > outside quotes (a quote
    # left open runs to the end). Possessive: a failed attempt never backtracks.
    r"|(/?)([A-Za-z][^\s/>]*+)((?:[^>\"']++|\"[^\"]*+\"?|'[^']*+'?)*+)>?"
    r")",
    re.S,
)
_ATTRIBUTE = re.compile(r"([^\s\"'>/=]+)(?:\s*=\s*(?:\"([^\"]*)\"?|'([^']*)'?|([^\s>]+)))?")
_RAW_END = {
    name: re.compile(rf"</{name}\b[^>]*+>?", re.I)
    for name in ("script", "style", "title", "textarea")
}
_BLANK_RUNS = re.compile(r"\n[ \t>]*\n(?:[ \t>]*\n)+")

_HIDDEN = frozenset({"noscript", "template", "iframe", "svg", "canvas", "object", "select"})
"""Elements whose content a reader never sees (dropped with everything inside)."""
_PARAGRAPH = frozenset(
    {"p", "table", "dl", "figure", "form", "fieldset", "details", "address", "center"}
)
_LINE = frozenset(
    {
        "div", "section", "article", "header", "footer", "main", "nav", "aside", "figcaption",
        "dt", "dd", "summary", "caption", "legend", "body", "html", "hgroup", "menu",
    }
)  # fmt: skip
_EMPHASIS = {"b": "**", "strong": "**", "i": "*", "em": "*", "s": "~~", "del": "~~", "strike": "~~"}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_CHECK_EVERY = 256
"""Pieces of markup between two looks at the clock and the stop flag."""


class _Stop(Exception):
    """The output is full, the deadline passed, or the caller asked to stop."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Converted(Record):
    """What :func:`convert_html` made of a page."""

    text: str
    stopped: str | None = None
    """Why the conversion stopped before the end of the page (``None``: it did not)."""


class _Writer:
    """The output of one conversion, written as the document is read."""

    def __init__(
        self,
        *,
        markdown: bool,
        limit: int,
        deadline: float,
        stop: threading.Event | None,
    ) -> None:
        self.markdown = markdown
        self.limit = limit
        self.deadline = deadline
        self.stop = stop
        self.out: list[str] = []
        self.size = 0
        self.want = 0  # newlines asked for before the next text (1: new line, 2: paragraph)
        self.newlines = 0  # newlines at the end of the output so far
        self.space = False  # a space is pending before the next text
        self.line_start = True
        self.quote = 0
        self.lists: list[list[int]] = []  # [ordered, next number] per open list
        self.links: list[str | None] = []  # the href of each open link
        self.tables: list[list[int]] = []  # [rows, cells in this row, cell open] per table
        self.pre = 0
        self.inline_only = 0  # inside a heading or a table cell: newlines become spaces
        self.hidden = 0
        self.opened: dict[str, int] = {}  # start tags with effects that an end tag may close
        self.title: str | None = None

    # -- writing ------------------------------------------------------------------------

    def _append(self, text: str) -> None:
        self.size += len(text)
        self.newlines = 0
        if self.size > self.limit:
            self.out.append(text[: len(text) - (self.size - self.limit)])
            raise _Stop("size")
        self.out.append(text)

    def _newline(self) -> None:
        if self.newlines and self.quote and self.markdown:  # a blank line inside a quote
            self._append(("> " * self.quote).rstrip())
            self.newlines = 1
        self.out.append("\n")
        self.size += 1
        self.newlines += 1
        self.line_start = True

    def _prefix(self) -> str:
        prefix = "> " * self.quote if self.markdown else ""
        if self.lists:
            prefix += "  " * len(self.lists)
        return prefix

    def _flush_breaks(self) -> None:
        if self.want and self.out:
            if self.inline_only:
                self.space = True
            else:
                while self.newlines < self.want:
                    self._newline()
                self.space = False
        self.want = 0

    def inline(self, text: str) -> None:
        """Write ``text`` in the running line (a pending break or space first)."""
        self._flush_breaks()
        if self.line_start:
            self._append(self._prefix() + text)
            self.line_start = False
        elif self.space:
            self._append(" " + text)
        else:
            self._append(text)
        self.space = False

    def text(self, data: str) -> None:
        if self.hidden:
            return
        if "&" in data:
            data = html_lib.unescape(data)
        if self.pre:
            self._pre_text(data)
            return
        words = data.split()
        if not words:
            if data:
                self.space = True
            return
        if data[0].isspace():
            self.space = True
        self.inline(" ".join(words))
        if data[-1].isspace():
            self.space = True

    def _pre_text(self, data: str) -> None:
        self._flush_breaks()
        lines = data.split("\n")
        for index, line in enumerate(lines):
            if index:
                self._newline()
            if line:
                if self.line_start:
                    line = self._prefix() + line
                    self.line_start = False
                self._append(line)

    def breaks(self, count: int) -> None:
        """Ask for ``count`` newlines (1: a new line, 2: a new paragraph) before what follows."""
        if count > self.want:
            self.want = count

    # -- markup -------------------------------------------------------------------------

    def start(self, name: str, attributes: str, self_closing: bool) -> None:
        if name in _HIDDEN:
            if not self_closing:
                self.hidden += 1
                self._open(name)
            return
        if self.hidden:
            return
        if name in _LINE:
            self.breaks(1)
        elif name in _PARAGRAPH:
            self.breaks(2)
            if name == "table":
                self.tables.append([0, 0, 0])
                self._open(name)
        elif name in _HEADINGS:
            self.breaks(2)
            if self.markdown:
                self.inline("#" * _HEADINGS[name])
                self.space = True
            self.inline_only += 1
            self._open(name)
        elif name in _EMPHASIS:
            if self.markdown and not self.pre:
                self.inline(_EMPHASIS[name])
            self._open(name)
        else:
            starter = _STARTERS.get(name)
            if starter is not None:
                starter(self, name, attributes)

    def _start_link(self, name: str, attributes: str) -> None:
        if self.links:
            self._close_link()
        href = _attribute(attributes, "href") if self.markdown else None
        if href is not None and href.strip().lower().startswith(("javascript:", "data:")):
            href = None
        self.links.append(href)
        if href is not None:
            self.inline("[")
        self._open(name)

    def _start_br(self, name: str, attributes: str) -> None:
        if self.inline_only:
            self.space = True
        else:
            self._flush_breaks()
            self._newline()

    def _start_img(self, name: str, attributes: str) -> None:
        alt = " ".join((_attribute(attributes, "alt") or "").split())
        src = _attribute(attributes, "src") if self.markdown else None
        if src and not src.strip().lower().startswith(("data:", "javascript:")):
            self.inline(f"![{alt}]({src.strip()})")
        elif alt:
            self.inline(alt)

    def _start_list(self, name: str, attributes: str) -> None:
        self.breaks(1 if self.lists else 2)
        start = _attribute(attributes, "start") if name == "ol" else None
        first = int(start) if start is not None and start.strip().isdigit() else 1
        self.lists.append([name == "ol", first])
        self._open("list")

    def _start_item(self, name: str, attributes: str) -> None:
        self.breaks(1)
        self._flush_breaks()
        depth = len(self.lists)
        if depth and self.lists[-1][0]:
            marker = f"{self.lists[-1][1]}."
            self.lists[-1][1] += 1
        else:
            marker = "-"
        if not self.line_start:
            self._newline()
        quote = "> " * self.quote if self.markdown else ""
        self._append(quote + "  " * max(depth - 1, 0) + marker + " ")
        self.line_start = False
        self.space = False

    def _start_quote(self, name: str, attributes: str) -> None:
        self.breaks(2)
        self._flush_breaks()  # the blank line before the quote is not quoted
        self.quote += 1
        self._open(name)

    def _start_pre(self, name: str, attributes: str) -> None:
        self.breaks(2)
        if self.markdown:
            self.inline("```")
        self._flush_breaks()
        self._newline()
        self.pre += 1
        self._open(name)

    def _start_code(self, name: str, attributes: str) -> None:
        if self.markdown and not self.pre:
            self.inline("`")
        self._open(name)

    def _start_rule(self, name: str, attributes: str) -> None:
        self.breaks(2)
        if self.markdown:
            self.inline("---")
        self.breaks(2)

    def _start_row(self, name: str, attributes: str) -> None:
        if self.tables:
            self._end_row()
            self.breaks(1)
            self.inline("|")
            self.tables[-1][0] += 1

    def _start_cell(self, name: str, attributes: str) -> None:
        if not self.tables:
            return
        table = self.tables[-1]
        if table[2]:
            self._end_cell()
        if table[0] == 0:  # a cell without a row
            self.breaks(1)
            self.inline("|")
            table[0] = 1
        table[1] += 1
        table[2] = 1
        self.inline_only += 1
        self.space = True

    def end(self, name: str) -> None:
        key = "list" if name in ("ul", "ol") else name
        if self.hidden and name not in _HIDDEN:
            return
        if not self.opened.get(key):
            if name in _LINE:
                self.breaks(1)
            elif name in _PARAGRAPH or name == "li":
                self.breaks(2 if name in _PARAGRAPH else 1)
            elif name in ("td", "th") and self.tables and self.tables[-1][2]:
                self._end_cell()
            elif name == "tr" and self.tables:
                self._end_row()
            return
        self.opened[key] -= 1
        if name in _HIDDEN:
            self.hidden -= 1
        elif name == "table":
            self._end_row()
            self.tables.pop()
            self.breaks(2)
        elif name in _HEADINGS:
            self.inline_only -= 1
            self.breaks(2)
        elif name in _EMPHASIS:
            if self.markdown and not self.pre:
                self.inline(_EMPHASIS[name])
        elif name == "a":
            if self.links:
                self._close_link()
        elif key == "list":
            if self.lists:
                self.lists.pop()
            self.breaks(1 if self.lists else 2)
        elif name == "blockquote":
            self.quote -= 1
            self.breaks(2)
        elif name == "pre":
            self.pre -= 1
            if self.markdown:
                if not self.line_start:
                    self._newline()
                self._append(self._prefix() + "```")
                self.line_start = False
            self.breaks(2)
        elif name == "code" and self.markdown and not self.pre:
            self.inline("`")

    def _open(self, key: str) -> None:
        self.opened[key] = self.opened.get(key, 0) + 1

    def _close_link(self) -> None:
        href = self.links.pop()
        if href is None:
            return
        if self.out and self.out[-1].endswith("["):
            # Nothing inside (an icon link): no "[](url)".
            last = self.out.pop()[:-1]
            self.size -= 1
            if last:
                self.out.append(last)
            return
        self.out.append(f"]({href.strip()})")
        self.size += len(href) + 3

    def _end_cell(self) -> None:
        table = self.tables[-1]
        table[2] = 0
        self.inline_only -= 1
        self.space = True
        self.inline("|")

    def _end_row(self) -> None:
        if not self.tables:
            return
        table = self.tables[-1]
        if table[2]:
            self._end_cell()
        if table[0] == 1 and table[1] and self.markdown:
            self.breaks(1)
            self.inline("|" + " --- |" * table[1])
        if table[1]:
            self.breaks(1)
        table[1] = 0

    def check(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise _Stop("cancelled")
        if time.monotonic() > self.deadline:
            raise _Stop("time")

    def result(self) -> str:
        body = _BLANK_RUNS.sub(
            lambda m: "\n\n" if ">" not in m.group() else "\n>\n", "".join(self.out)
        )
        body = body.strip()
        if self.title:
            heading = f"# {self.title}" if self.markdown else self.title
            return f"{heading}\n\n{body}" if body else heading
        return body


_STARTERS: dict[str, Callable[[_Writer, str, str], None]] = {
    "a": _Writer._start_link,
    "br": _Writer._start_br,
    "img": _Writer._start_img,
    "ul": _Writer._start_list,
    "ol": _Writer._start_list,
    "li": _Writer._start_item,
    "blockquote": _Writer._start_quote,
    "pre": _Writer._start_pre,
    "code": _Writer._start_code,
    "hr": _Writer._start_rule,
    "tr": _Writer._start_row,
    "td": _Writer._start_cell,
    "th": _Writer._start_cell,
}
"""The opening tags with a rule of their own (the rest are grouped in ``_Writer.start``)."""


def _attribute(attributes: str, wanted: str) -> str | None:
    for match in _ATTRIBUTE.finditer(attributes):
        if match.group(1).lower() == wanted:
            value = match.group(2) or match.group(3) or match.group(4) or ""
            return html_lib.unescape(value) if "&" in value else value
    return None


def convert_html(
    source: str,
    *,
    markdown: bool,
    max_chars: int,
    timeout: float | None = None,
    stop: threading.Event | None = None,
) -> Converted:
    """``source`` as markdown (``markdown=True``) or plain text, in one linear pass.

    Args:
        source: the HTML.
        markdown: markdown (headings, emphasis, links, lists, tables, code) or plain text.
        max_chars: stop once the output is this long (what is handed on is cut there anyway).
        timeout: stop after this many seconds of work (``None``: no limit).
        stop: stop as soon as this event is set (a cancelled call sets it).

    Returns:
        The text, and why it stopped early when it did (``"size"``, ``"time"``,
        ``"cancelled"``); what was converted until then is kept.
    """
    deadline = time.monotonic() + timeout if timeout is not None else float("inf")
    writer = _Writer(markdown=markdown, limit=max_chars, deadline=deadline, stop=stop)
    stopped: str | None = None
    try:
        _convert(source, writer)
    except _Stop as exc:
        stopped = exc.reason
    return Converted(text=writer.result(), stopped=stopped)


def _convert(source: str, writer: _Writer) -> None:
    search = _MARKUP.search
    position = 0
    pieces = 0
    while True:
        match = search(source, position)
        if match is None:
            if position < len(source):
                writer.text(source[position:])
            return
        start = match.start()
        if start > position:
            writer.text(source[position:start])
        position = match.end()
        pieces += 1
        if pieces % _CHECK_EVERY == 0:
            writer.check()
        name = match.group(2)
        if name is None:  # a comment or a declaration
            continue
        name = name.lower()
        if match.group(1):
            writer.end(name)
            continue
        attributes = match.group(3)
        raw_end = _RAW_END.get(name)
        if raw_end is not None:
            # Raw text up to the matching end tag (or the end of the document).
            closing = raw_end.search(source, position)
            content_end = closing.start() if closing is not None else len(source)
            if name == "title":
                if writer.title is None:
                    title = html_lib.unescape(source[position:content_end])
                    writer.title = " ".join(title.split())[:1000] or None
            elif name == "textarea":
                writer.text(source[position:content_end])
            position = closing.end() if closing is not None else len(source)
            continue
        writer.start(name, attributes, attributes.endswith("/"))


def html_to_markdown(source: str, *, max_chars: int = 10_000_000) -> str:
    """Readable markdown for ``source``, its ``<title>`` as a first-level heading."""
    return convert_html(source, markdown=True, max_chars=max_chars).text


def html_to_text(source: str, *, max_chars: int = 10_000_000) -> str:
    """The visible text of ``source``, one block per line, its title first."""
    return convert_html(source, markdown=False, max_chars=max_chars).text
