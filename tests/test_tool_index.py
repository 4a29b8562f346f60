"""The BM25 index behind ``search_tools``: tokenizing, ranking, and search quality on a
generated catalogue of 500 tools."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kova import ToolDefinition
from kova._tool_index import ToolIndex, tokenize

sys.path.insert(0, str(Path(__file__).parent / "tools"))
from tool_catalog import catalogue, queries


def _tool(name: str, description: str = "", **properties: str) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {
                key: {"type": "string", "description": text} for key, text in properties.items()
            },
        },
    )


@pytest.mark.parametrize(
    "text",
    ["createIssue", "create_issue", "Create issues", "create-issue", "CREATE ISSUE"],
)
def test_identifiers_and_prose_give_the_same_terms(text):
    assert tokenize(text) == tokenize("create issue")


def test_synonyms_and_suffixes_fold_together():
    assert tokenize("fetching tickets") == tokenize("retrieve ticket")
    assert tokenize("remove folders") == tokenize("delete directory")
    assert tokenize("the") == []


def test_a_name_match_outranks_a_description_mention():
    # The same two terms, once in a name and once in a (shorter) description: the name wins.
    index = ToolIndex(
        [
            _tool("alpha_tool", "Archive a report."),
            _tool("archive_report", "Do the alpha thing."),
        ]
    )
    assert [match.name for match in index.search("archive report")] == [
        "archive_report",
        "alpha_tool",
    ]


def test_parameters_are_searched():
    index = ToolIndex(
        [_tool("convert", "Convert amounts.", currency="an ISO currency code"), _tool("other")]
    )
    assert [match.name for match in index.search("currency code")] == ["convert"]


def test_a_query_with_no_known_term_finds_nothing():
    index = ToolIndex([_tool("send_email", "Send a message.")])
    assert index.search("quantum entanglement") == []
    assert index.search("") == []


def test_limit_and_exclude():
    index = ToolIndex([_tool(f"make_thing_{n}", "Create a thing.") for n in range(10)])
    assert len(index.search("create thing", limit=3)) == 3
    found = index.search("create thing", limit=20, exclude=["make_thing_0", "make_thing_1"])
    assert [match.name for match in found] == [f"make_thing_{n}" for n in range(2, 10)]


@pytest.mark.parametrize("limit", [0, -1, True, 1.5])
def test_a_bad_limit_is_refused(limit):
    with pytest.raises(ValueError, match="limit must be a positive int"):
        ToolIndex([]).search("x", limit=limit)


def test_only_tool_definitions_are_indexed():
    with pytest.raises(TypeError, match="ToolDefinition"):
        ToolIndex(["send_email"])  # type: ignore[list-item]


def test_an_empty_index_finds_nothing():
    assert ToolIndex([]).search("anything") == []


@pytest.mark.parametrize("seed", [7, 11, 23])
def test_the_wanted_tool_is_in_the_top_five_for_95_percent_of_paraphrased_queries(seed):
    """200 queries from 500 tools' descriptions, paraphrased by rule (synonyms from a
    thesaurus that is not the index's, another word order, a word missing)."""
    tools = catalogue()
    index = ToolIndex(tools)
    pairs = queries(tools, 200, seed=seed)
    hits = sum(wanted in [m.name for m in index.search(query, limit=5)] for query, wanted in pairs)
    assert hits >= 190, f"{hits} of 200 in the top 5"
