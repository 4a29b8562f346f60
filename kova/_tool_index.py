"""Ranked full-text search over tool definitions: what ``search_tools`` answers with.

A model that is offered a few hundred tools pays for every definition on every call; with
deferred tools it gets one search tool instead and finds the rest by describing what it
needs. The index here answers those descriptions locally, with no service and no model:
Okapi BM25 over three fields of each :class:`~kova.ToolDefinition` (its name, its description
and its parameters' names and descriptions), the name weighted above the prose because a
model's query usually says the action the name says (``create_issue`` for "open a new
ticket").

Why our own code and not a library: the corpus is a few thousand short documents at most,
built once per tool set and queried a handful of times per turn. ``rank-bm25`` (the usual
pure-Python choice) has had no release since 2022 and tokenizes by whitespace only, so
``create_issue`` and ``createIssue`` would never match "create issue"; ``bm25s`` needs NumPy
and SciPy. What matters here is the tokenizer (identifiers split at ``_``, ``-``, ``.`` and
case changes; a light suffix stemmer; a small table of the verbs and nouns tool names use
interchangeably), and BM25 itself is twenty lines.

Everything here is pure: no I/O, no clock, no trio; an index is immutable once built.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from ._record import Record
from ._requests import ToolDefinition

__all__ = ["SEARCH_TOOLS", "ToolIndex", "ToolMatch", "tokenize"]

SEARCH_TOOLS = "search_tools"
"""The name of the search tool the model sees (kova.agent offers it; an encoder that caches
prompts puts its breakpoint on it: the tools up to it stay the same for the whole turn)."""

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "get",
        "gets",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "some",
        "that",
        "the",
        "their",
        "them",
        "then",
        "this",
        "to",
        "tool",
        "use",
        "using",
        "via",
        "want",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
"""Words that say nothing about which tool is meant. "get" is here because nearly every tool
name or description has it ("get_weather", "Gets the ..."): it ranks nothing."""

# Words tool names and descriptions use for the same thing. Each group maps to its first
# word, so "fetch", "retrieve" and "read" all count as one term. Kept to what tool catalogues
# actually vary on (verbs of CRUD and search, the nouns of files, people and messages); a
# broader thesaurus makes unrelated tools match ("run" and "start" and "open" would merge).
_SYNONYM_GROUPS = (
    "read fetch retrieve obtain load lookup look view inspect",
    "list enumerate browse",
    "show display print",
    "create make add new insert generate open",
    "delete remove erase drop destroy discard purge",
    "update modify edit change alter set",
    "search find query locate seek",
    "send post submit dispatch deliver",
    "write save store persist record put",
    "run execute invoke launch trigger call",
    "stop halt cancel terminate kill abort",
    "file document doc",
    "directory folder dir",
    "user account person member people",
    "message mail email msg",
    "issue ticket bug",
    "repository repo",
    "forecast weather",
    "price cost fee",
    "image picture photo",
    "count number total tally",
    "copy duplicate clone",
    "move rename relocate",
    "event meeting appointment",
    "comment reply note",
    "merge combine join",
    "close shut",
    "summary summarize summarise",
    "translate translation",
    "convert transform",
    "check verify validate",
    "schedule calendar",
    "notification alert notify",
    "url link",
    "table sheet spreadsheet",
    "database db",
    "cpu processor",
    "memory ram",
    "large big",
    "small little tiny",
)

# Suffixes stripped by the stemmer, longest first; a stem keeps at least three letters so
# "uses" -> "use" but "bus" stays "bus".
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ers", "ed", "er", "es", "ly", "s")
_SIBILANTS = ("s", "x", "z", "ch", "sh")


def _stem(word: str) -> str:
    """A light suffix stemmer: enough that "issues", "issue" and "issued" meet, not a
    linguist's (a final "e" is dropped from every stem, so "create" and "created" agree)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            if suffix == "ies":
                stem += "y"
            elif suffix == "es" and not stem.endswith(_SIBILANTS):
                stem = word[:-1]  # "issues" -> "issue", but "boxes" -> "box"
            elif suffix in ("ed", "ing", "ings", "er", "ers") and stem[-1] == stem[-2]:
                stem = stem[:-1]  # "running" -> "run", "stopped" -> "stop"
            word = stem
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


_SYNONYMS: Mapping[str, str] = {
    _stem(word): _stem(group.split()[0]) for group in _SYNONYM_GROUPS for word in group.split()
}


def _term(word: str) -> str:
    stemmed = _stem(word.lower())
    return _SYNONYMS.get(stemmed, stemmed)


def tokenize(text: str) -> list[str]:
    """The search terms of ``text``: identifiers split, lowercased, stemmed, synonyms merged.

    ``"createIssue"``, ``"create_issue"`` and ``"Create issues"`` give the same terms.
    """
    terms = []
    for word in _WORD.findall(text):
        if word.lower() in _STOPWORDS:
            continue
        terms.append(_term(word))
    return terms


class ToolMatch(Record):
    """One search hit: the tool's name and its score (higher is better)."""

    name: str
    score: float


_FIELD_WEIGHTS = (3.0, 1.0, 1.0)
"""Name, description, parameters: a term in the name counts three times."""

_K1 = 1.2
_B = 0.75


def _fields(definition: ToolDefinition) -> tuple[str, str, str]:
    parameters: list[str] = []
    properties = definition.parameters.get("properties")
    if isinstance(properties, Mapping):
        for name, schema in properties.items():
            parameters.append(str(name))
            if isinstance(schema, Mapping):
                described = schema.get("description")
                if isinstance(described, str):
                    parameters.append(described)
    return definition.name, definition.description, " ".join(parameters)


class ToolIndex:
    """An immutable BM25 index over tool definitions.

    Build it once per tool set; :meth:`search` is pure and cheap (a few microseconds per
    indexed tool that shares a term with the query).
    """

    __slots__ = ("_average_length", "_documents", "_idf", "_lengths", "_names", "_postings")

    def __init__(self, definitions: Iterable[ToolDefinition]) -> None:
        names: list[str] = []
        documents: list[dict[str, float]] = []
        for definition in definitions:
            if not isinstance(definition, ToolDefinition):
                raise TypeError(
                    f"ToolIndex takes kova.ToolDefinition values, got {type(definition).__name__}"
                )
            weighted: dict[str, float] = {}
            for text, weight in zip(_fields(definition), _FIELD_WEIGHTS, strict=True):
                for term in tokenize(text):
                    weighted[term] = weighted.get(term, 0.0) + weight
            names.append(definition.name)
            documents.append(weighted)
        self._names = tuple(names)
        self._documents = tuple(documents)
        self._lengths = tuple(float(sum(document.values())) for document in documents)
        self._average_length = (sum(self._lengths) / len(self._lengths)) if documents else 0.0
        postings: dict[str, list[int]] = {}
        for position, document in enumerate(documents):
            for term in document:
                postings.setdefault(term, []).append(position)
        self._postings = {term: tuple(found) for term, found in postings.items()}
        total = len(documents)
        self._idf = {
            term: math.log(1.0 + (total - len(found) + 0.5) / (len(found) + 0.5))
            for term, found in self._postings.items()
        }

    def __len__(self) -> int:
        return len(self._names)

    @property
    def names(self) -> tuple[str, ...]:
        """The indexed tools' names, in the order given."""
        return self._names

    def search(self, query: str, *, limit: int = 5, exclude: Sequence[str] = ()) -> list[ToolMatch]:
        """The best ``limit`` tools for ``query``, best first; ties keep the indexed order.

        Tools named in ``exclude`` (already offered, say) are skipped. A query with no term
        any tool has finds nothing (an empty list), never an arbitrary tool.

        Raises:
            TypeError: ``query`` is not a str.
            ValueError: ``limit`` is not a positive int.
        """
        if not isinstance(query, str):
            raise TypeError(f"the query must be a str, got {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        scores: dict[int, float] = {}
        for term in dict.fromkeys(tokenize(query)):
            found = self._postings.get(term)
            if found is None:
                continue
            idf = self._idf[term]
            for position in found:
                frequency = self._documents[position][term]
                norm = 1.0 - _B + _B * self._lengths[position] / self._average_length
                gain = idf * frequency * (_K1 + 1.0) / (frequency + _K1 * norm)
                scores[position] = scores.get(position, 0.0) + gain
        skipped = set(exclude)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        matches = []
        for position, score in ranked:
            name = self._names[position]
            if name in skipped:
                continue
            matches.append(ToolMatch(name=name, score=score))
            if len(matches) == limit:
                break
        return matches
