"""Pure conversions between the mcp package's models and kova values."""

from __future__ import annotations

import mcp_types as mt

import kova
import kova.providers
from kova.mcp import ElicitationRequest, ElicitationResponse
from kova.mcp._convert import (
    elicitation_request,
    elicitation_result,
    sampling_request,
    sampling_result,
    tool_result,
)


def test_text_only_result_becomes_a_string():
    result = mt.CallToolResult(
        content=[mt.TextContent(type="text", text="a"), mt.TextContent(type="text", text="b")]
    )
    assert tool_result(result) == kova.ToolResult(content="a\nb")


def test_audio_and_links_become_notes_and_binary_blobs_are_named():
    result = mt.CallToolResult(
        content=[
            mt.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
            mt.ResourceLink(type="resource_link", uri="file:///x.txt", name="x"),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(
                    uri="file:///a.bin", mime_type="application/zip", blob="AAAA"
                ),
            ),
        ],
        is_error=True,
    )
    converted = tool_result(result)
    assert converted.is_error
    assert converted.content == (
        "[audio (audio/wav), not shown]\n"
        "[resource link: x <file:///x.txt>]\n"
        "[binary resource file:///a.bin (application/zip), not shown]"
    )


def test_structured_content_only_is_sent_as_json():
    result = mt.CallToolResult(content=[], structured_content={"temperature": 21})
    assert tool_result(result).text == '{"temperature": 21}'


def test_sampling_request_and_result():
    params = mt.CreateMessageRequestParams(
        messages=[
            mt.SamplingMessage(role="user", content=mt.TextContent(type="text", text="hi")),
            mt.SamplingMessage(
                role="assistant",
                content=mt.ImageContent(type="image", data="AAAA", mime_type="image/png"),
            ),
        ],
        max_tokens=10,
        stop_sequences=["END"],
    )
    messages, config = sampling_request(params)
    assert messages == [
        kova.Message.user("hi"),
        kova.Message.assistant([kova.Image(media_type="image/png", data="AAAA")]),
    ]
    assert config == kova.InferenceConfig(max_tokens=10, stop_sequences=("END",))
    answer = kova.providers.ModelResponse(
        content=(kova.Text(text="ok"),), stop_reason=kova.StopReason.MAX_TOKENS
    )
    result = sampling_result(answer, model="m")
    assert result.model == "m"
    assert result.stop_reason == "maxTokens"
    assert result.content == mt.TextContent(type="text", text="ok")


def test_elicitation_accept_fills_schema_defaults():
    params = mt.ElicitRequestFormParams(
        message="settings?",
        requested_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "anon"},
                "count": {"type": "integer", "default": 3},
                "free": {"type": "string"},
            },
        },
    )
    request = elicitation_request(params)
    assert request == ElicitationRequest(
        message="settings?", mode="form", requested_schema=params.requested_schema
    )
    result = elicitation_result(
        ElicitationResponse(action="accept", content={"name": "Ada"}), request
    )
    assert result.action == "accept"
    assert result.content == {"name": "Ada", "count": 3}


def test_elicitation_decline_carries_no_content():
    request = ElicitationRequest(message="?", requested_schema={"type": "object"})
    result = elicitation_result(ElicitationResponse(action="decline", content={"x": 1}), request)
    assert result.action == "decline"
    assert result.content is None


def test_url_elicitation_request():
    params = mt.ElicitRequestURLParams(
        message="log in", url="https://example.com/login", elicitation_id="e1"
    )
    assert elicitation_request(params) == ElicitationRequest(
        message="log in", mode="url", url="https://example.com/login"
    )


def test_an_embedded_pdf_becomes_a_document_named_by_its_uri():
    result = mt.CallToolResult(
        content=[
            mt.TextContent(type="text", text="The invoice:"),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(
                    uri="file:///invoices/7.pdf", mime_type="application/pdf", blob="JVBERi0="
                ),
            ),
        ]
    )
    assert tool_result(result).content == (
        kova.Text(text="The invoice:"),
        kova.Document(data="JVBERi0=", title="7.pdf"),
    )
