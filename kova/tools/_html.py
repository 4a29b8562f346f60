"""HTML to readable markdown or text, for ``fetch_webpage`` (the ``web`` extra).

BeautifulSoup with the standard library's ``html.parser`` (no compiled parser needed) drops
what a reader never sees (scripts, styles, templates, embedded frames and images' SVG), then
markdownify turns the tree into markdown, or BeautifulSoup's ``get_text`` into plain text.
Imported only when a page needs converting, so ``import kova`` never loads either library.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import bs4

__all__ = ["WebExtraMissing", "html_to_markdown", "html_to_text"]

_INVISIBLE = ["script", "style", "noscript", "template", "iframe", "svg", "canvas", "head"]
_BLANK_RUNS = re.compile(r"\n{3,}")


class WebExtraMissing(Exception):
    """The ``web`` extra is not installed."""


def _soup(html: str) -> tuple[bs4.BeautifulSoup, str | None]:
    try:
        import bs4
    except ImportError as exc:
        raise WebExtraMissing(
            "converting HTML needs the web extra: pip install 'kova-sdk[web]' "
            "(or ask for format='html')"
        ) from exc
    soup = bs4.BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    for tag in soup(_INVISIBLE):
        tag.decompose()
    return soup, title or None


def html_to_markdown(html: str) -> str:
    """Readable markdown for ``html``, its ``<title>`` as a first-level heading."""
    soup, title = _soup(html)
    try:
        import markdownify
    except ImportError as exc:
        raise WebExtraMissing(
            "converting HTML to markdown needs the web extra: pip install 'kova-sdk[web]'"
        ) from exc
    converter = markdownify.MarkdownConverter(heading_style=markdownify.ATX, bullets="-")
    body = converter.convert_soup(soup).strip()
    body = _BLANK_RUNS.sub("\n\n", body)
    return f"# {title}\n\n{body}" if title else body


_BLOCKS = [
    "address", "article", "aside", "blockquote", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
    "main", "nav", "ol", "p", "pre", "section", "table", "td", "th", "tr", "ul",
]  # fmt: skip


def html_to_text(html: str) -> str:
    """The visible text of ``html``, one block per line, blank runs collapsed."""
    soup, title = _soup(html)
    # Inline elements (links, emphasis) stay in their line; blocks and <br> break it.
    for tag in soup.find_all(_BLOCKS):
        tag.insert_before("\n")
        tag.append("\n")
    for tag in soup.find_all("br"):
        tag.replace_with("\n")
    lines = [" ".join(line.split()) for line in soup.get_text().splitlines()]
    text = _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()
    return f"{title}\n\n{text}" if title else text
