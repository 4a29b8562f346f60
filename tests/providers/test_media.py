"""Documents, audio and files on every provider (kova.providers._media and each encoder).

* The table in ``docs/agent.md`` ("Documents, audio and files") is the contract: every cell
  "yes" encodes, every "no" is ``InvalidRequest`` naming the provider and the block, raised
  by the pure codec, so before anything is sent.
* Size limits fail with the limit in the message, just over it; just under it encodes.
* A tool loop with a PDF in the history runs through each provider and its fake server, which
  decodes the document on every request of the loop.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kova import (
    Audio,
    Document,
    File,
    Image,
    InferenceConfig,
    InvalidRequest,
    JSONValue,
    MediaOutput,
    Message,
    ResponseFormat,
    Role,
    StopReason,
    Text,
    ToolResult,
    ToolUse,
)
from kova._messages import AUDIO_FORMATS, DOCUMENT_MEDIA_TYPES
from kova.agent import AgentBuilder, TurnCompleted
from kova.providers import ChatRequest, ModelResponse
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.anthropic._codec import AnthropicCodec
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.providers.bedrock._codec import BedrockCodec
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.gemini._codec import GeminiCodec
from kova.providers.ollama import OllamaConfig, OllamaProvider
from kova.providers.ollama._codec import OllamaCodec
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiResponsesConfig,
    OpenAiResponsesProvider,
)
from kova.providers.openai._codec import OpenAiCodec
from kova.providers.openai._responses import OpenAiResponsesCodec
from kova.testing import (
    Script,
    open_anthropic_server,
    open_bedrock_server,
    open_gemini_server,
    open_ollama_server,
    open_openai_server,
    open_responses_server,
    reply_text,
)
from kova.tools import tool

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from kova.providers import Provider

CODECS: dict[str, Any] = {
    "anthropic": AnthropicCodec(AnthropicConfig(model="m", api_key="k")),
    "openai": OpenAiCodec(OpenAiConfig(model="m", api_key="k")),
    "openai-responses": OpenAiResponsesCodec(OpenAiResponsesConfig(model="m", api_key="k")),
    "gemini": GeminiCodec(GeminiConfig(model="m", api_key="k")),
    "bedrock": BedrockCodec(BedrockConfig(region="us-east-1", model_id="m")),
    "ollama": OllamaCodec(OllamaConfig(model="m", base_url="http://x")),
}
PDF_BYTES = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
NAMESPACE: dict[str, object] = {
    "Audio": Audio,
    "Document": Document,
    "File": File,
    "PDF": PDF_BYTES,
    "WAV": b"RIFF\x24\x00\x00\x00WAVEfmt ",
    "DOCX": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}
DOCS = Path(__file__).parents[2] / "docs" / "agent.md"


def docs_table() -> list[tuple[str, str, bool]]:
    """``(block expression, provider, takes it)`` for every cell of the docs' table."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Documents, audio and files", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header[1:] == sorted(CODECS, key=list(CODECS).index)
    cells = []
    for row in rows[1:]:
        values = [cell.strip() for cell in row.strip("|").split("|")]
        expression = values[0].strip("`")
        for provider, value in zip(header[1:], values[1:], strict=True):
            assert value in ("yes", "no"), (expression, provider, value)
            cells.append((expression, provider, value == "yes"))
    return cells


TABLE = docs_table()


def encode(provider: str, *blocks: object) -> dict[str, Any]:
    request = ChatRequest(
        messages=[Message.user([Text(text="read this"), *blocks])],  # type: ignore[list-item]
        config=InferenceConfig(max_tokens=64),
    )
    body: dict[str, Any] = CODECS[provider].encode(request, stream=False).body
    return body


def test_the_docs_table_covers_every_provider_and_block_kind() -> None:
    assert len(TABLE) >= 6 * 10
    expressions = {expression for expression, _, _ in TABLE}
    for kind in ("Document(", "Document.from_text(", "Audio(", "File("):
        assert any(e.startswith(kind) for e in expressions), kind


@pytest.mark.parametrize(
    ("expression", "provider", "takes"), TABLE, ids=[f"{p}-{e}" for e, p, _ in TABLE]
)
def test_the_docs_table_is_what_each_provider_does(
    expression: str, provider: str, takes: bool
) -> None:
    block = eval(expression, NAMESPACE)  # the docs' own expressions, on purpose
    if takes:
        body = json.dumps(encode(provider, block))
        # The block went on the wire: its data, URL or id is in the body.
        evidence = getattr(block, "data", None) or getattr(block, "url", None) or block.file_id
        if isinstance(block, Document) and block.media_type.startswith("text/") and block.data:
            evidence = block.data if provider != "anthropic" else "notes"
        if provider == "gemini" and getattr(block, "data", None):
            evidence = evidence.translate(str.maketrans("+/", "-_"))  # as google-genai writes
        assert evidence in body
    else:
        with pytest.raises(InvalidRequest) as caught:
            encode(provider, block)
        assert caught.value.provider == provider
        assert str(caught.value).startswith(f"{provider}: cannot take {type(block).__name__} (")


def base64_of_size(size: int) -> str:
    """Base64 text that decodes to ``size`` bytes (not built from real bytes: cheap)."""
    assert size % 3 == 0
    return "A" * (size // 3 * 4)


LIMITS = [
    # provider, limit in bytes, block of a given size, what the message names
    ("anthropic", 32 * 2**20, lambda n: Document(data=base64_of_size(n)), "32.0 MB per request"),
    ("openai", 50 * 2**20, lambda n: Audio(data=base64_of_size(n)), "50.0 MB per request"),
    (
        "openai-responses",
        50 * 2**20,
        lambda n: Document(data=base64_of_size(n)),
        "50.0 MB per request",
    ),
    ("gemini", 50 * 2**20, lambda n: Document(data=base64_of_size(n)), "50.0 MB per PDF"),
    ("bedrock", 4_718_592, lambda n: Document(data=base64_of_size(n)), "4.5 MB per document"),
    ("bedrock", 25 * 2**20, lambda n: Audio(data=base64_of_size(n)), "25.0 MB per inline"),
]


@pytest.mark.parametrize(
    ("provider", "limit", "make", "named"), LIMITS, ids=[f"{c[0]}-{c[3]}" for c in LIMITS]
)
def test_a_block_over_the_size_limit_fails_before_sending_with_the_limit(
    provider: str, limit: int, make: Callable[[int], object], named: str
) -> None:
    under = limit - limit % 3
    encode(provider, make(under))
    with pytest.raises(InvalidRequest, match=re.escape(named)) as caught:
        encode(provider, make(under + 3))
    assert caught.value.provider == provider


def test_the_total_counts_every_inline_block_of_the_request() -> None:
    half = base64_of_size(17 * 2**20 - (17 * 2**20) % 3)
    encode("anthropic", Document(data=half))
    with pytest.raises(InvalidRequest, match=r"34\.0 MB of inline documents"):
        encode("anthropic", Document(data=half), Document(data=half))


def test_the_total_counts_the_documents_a_tool_returned_too() -> None:
    half = base64_of_size(17 * 2**20 - (17 * 2**20) % 3)
    call = ToolUse(id="toolu_1", name="fetch", input={})
    returned = ToolResult(content=(Document(data=half),), tool_use_id="toolu_1")
    history = [
        Message.user([Text(text="read this"), Document(data=half)]),
        Message.assistant((call,)),
        Message.tool_results([returned]),
    ]
    encode_history("anthropic", history[:1])
    with pytest.raises(InvalidRequest, match=r"34\.0 MB of inline documents"):
        encode_history("anthropic", history)


def test_bedrock_takes_five_documents_at_most() -> None:
    documents = [Document(data=PDF_BYTES) for _ in range(5)]
    names = [
        part["document"]["name"]
        for part in encode("bedrock", *documents)["messages"][0]["content"]
        if "document" in part
    ]
    assert names == [f"document-{n}" for n in range(1, 6)]
    with pytest.raises(InvalidRequest, match="at most 5 documents"):
        encode("bedrock", *documents, Document(data=PDF_BYTES))


def test_bedrock_document_names_keep_only_what_converse_accepts() -> None:
    body = encode("bedrock", Document(data=PDF_BYTES, title="Q3 report  (final).v2 / EU"))
    assert body["messages"][0]["content"][1]["document"]["name"] == "Q3 report (final)-v2 - EU"


@pytest.mark.parametrize("provider", sorted(CODECS))
def test_audio_a_model_answered_with_is_left_out_of_an_assistant_turn_where_it_has_no_place(
    provider: str,
) -> None:
    history = [
        Message.user("Say hi"),
        Message.assistant([Audio(data=b"RIFFdata"), Text(text="Hi!")]),
        Message.user("Again"),
    ]
    request = ChatRequest(messages=history, config=InferenceConfig(max_tokens=8))
    body = json.dumps(CODECS[provider].encode(request, stream=False).body)
    assert "Hi!" in body
    # Gemini's model turns take inline data; the others have no place for it there.
    assert (base64.b64encode(b"RIFFdata").decode() in body) is (provider == "gemini")


# -- a tool loop with a PDF in the history, on each provider and its fake server -----------

PDF = Document(data=PDF_BYTES, title="Invoice 7")


@tool
def invoice_total(number: int) -> str:
    """The booked total of an invoice."""
    return f"invoice {number}: 1,240.00 EUR"


FAKES: dict[
    str,
    tuple[Callable[[Script], AbstractAsyncContextManager[Any]], Callable[[Any], Provider]],
] = {
    "anthropic": (
        open_anthropic_server,
        lambda s: AnthropicProvider(AnthropicConfig(model="m", base_url=s.base_url, api_key="k")),
    ),
    "openai": (
        open_openai_server,
        lambda s: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=s.base_url, api_key="k")
        ),
    ),
    "openai-responses": (
        open_responses_server,
        lambda s: OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="gpt-fake", base_url=s.base_url, api_key="k")
        ),
    ),
    "gemini": (
        open_gemini_server,
        lambda s: GeminiProvider(GeminiConfig(model="m", base_url=s.base_url, api_key="k")),
    ),
    "bedrock": (
        open_bedrock_server,
        lambda s: BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id="anthropic.claude-3-5-haiku-20241022-v1:0",
                endpoint_url=s.base_url,
                **s.credentials,
            )
        ),
    ),
    "ollama": (
        open_ollama_server,
        lambda s: OllamaProvider(OllamaConfig(model="m", base_url=s.base_url)),
    ),
}
CALL = ToolUse(id="call_1", name="invoice_total", input={"number": 7})


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
@pytest.mark.parametrize("name", sorted(FAKES))
async def test_a_tool_loop_with_a_pdf_in_the_history_runs_on_each_provider(
    name: str, stream: bool
) -> None:
    open_server, build = FAKES[name]
    script = Script(
        [
            ModelResponse(content=(CALL,), stop_reason=StopReason.TOOL_USE),
            reply_text("The invoice says 1,240.00 EUR, and so do the books."),
        ]
    )
    history = [Message.user([Text(text="Does invoice 7 match our books?"), PDF])]
    async with open_server(script) as server:
        async with AgentBuilder().provider(build(server)).tool(invoice_total).build() as agent:
            if name == "ollama":
                with pytest.raises(InvalidRequest, match="ollama: cannot take Document"):
                    await agent.run(history)
                assert server.requests == []  # refused before sending
                return
            if stream:
                async with agent.stream(history) as events:
                    received = [event async for event in events]
                assert isinstance(received[-1], TurnCompleted)
                response = received[-1].response
            else:
                response = await agent.run(history)
    assert response.text == "The invoice says 1,240.00 EUR, and so do the books."
    assert len(script.requests) == 2
    for seen in script.requests:
        documents = [
            block
            for message in seen.request.messages
            for block in message.content
            if isinstance(block, Document)
        ]
        assert [d.data for d in documents] == [PDF.data], name
        assert documents[0].media_type == "application/pdf"
    last = script.requests[1].request.messages
    results = [b for m in last for b in m.content if isinstance(b, ToolResult)]
    assert results[0].text == "invoice 7: 1,240.00 EUR"


# -- answers that carry media ----------------------------------------------------------------

PNG64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4"
    "nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)
PCM = bytes(range(256)) * 4


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_gemini_answers_with_pictures_and_speech_come_back_as_blocks(stream: bool) -> None:
    answer = ModelResponse(
        content=(
            Text(text="Here is the chart, and the summary read aloud."),
            Image(media_type="image/png", data=PNG64),
            Audio(data=PCM, format="pcm16"),
        ),
        stop_reason=StopReason.END_TURN,
    )
    script = Script([answer, reply_text("You're welcome.")])
    open_server, build = FAKES["gemini"]
    async with open_server(script) as server:
        async with AgentBuilder().provider(build(server)).build() as agent:
            if stream:
                async with agent.stream("Chart the numbers and read me the summary.") as events:
                    received = [event async for event in events]
                assert isinstance(received[-1], TurnCompleted)
                first = received[-1].response
            else:
                first = await agent.run("Chart the numbers and read me the summary.")
            history = [
                Message.user("Chart the numbers and read me the summary."),
                *first.new_messages,
                Message.user("Thanks!"),
            ]
            await agent.run(history)
    assert first.new_messages[-1].content == answer.content
    # The pictures and speech go back to Gemini in the model's turn, as they came.
    body = server.requests[1].json()
    model_parts = next(c["parts"] for c in body["contents"] if c["role"] == "model")
    assert model_parts[1] == {"inlineData": {"mimeType": "image/png", "data": PNG64}}
    assert model_parts[2]["inlineData"]["mimeType"] == "audio/L16;codec=pcm;rate=24000"
    assert base64.urlsafe_b64decode(model_parts[2]["inlineData"]["data"]) == PCM


@pytest.mark.parametrize(
    ("inline", "expected"),
    [
        (
            {"mimeType": "image/jpeg", "data": "_9j_4AAQ"},
            Image(media_type="image/jpeg", data="/9j/4AAQ"),
        ),
        ({"mimeType": "audio/wav", "data": "UklGRg=="}, Audio(data="UklGRg==", format="wav")),
        ({"mimeType": "audio/mpeg", "data": "SUQz"}, Audio(data="SUQz", format="mp3")),
        (
            {"mimeType": "audio/L16;codec=pcm;rate=24000", "data": "AAAB"},
            Audio(data="AAAB", format="pcm16"),
        ),
    ],
)
def test_gemini_inline_data_in_an_answer_is_read_as_its_block(
    inline: dict[str, str], expected: object
) -> None:
    from kova.providers.gemini._convert import answer_media

    assert answer_media(inline) == expected


@pytest.mark.parametrize(
    "inline",
    [{"mimeType": "application/zip", "data": "UEs="}, {"mimeType": "image/png"}, "nope"],
)
def test_gemini_inline_data_kova_has_no_block_for_is_an_invalid_response(inline: object) -> None:
    from kova import InvalidResponse
    from kova.providers.gemini._convert import answer_media

    with pytest.raises(InvalidResponse, match=r"inlineData|no block for"):
        answer_media(inline)


def test_bedrock_cited_answer_text_is_kept_as_text() -> None:
    from kova.providers.bedrock._convert import decode_response

    body = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"text": "Per the invoice, "},
                    {
                        "citationsContent": {
                            "content": [{"text": "the total is 1,240.00 EUR."}],
                            "citations": [
                                {
                                    "title": "Invoice 7",
                                    "sourceContent": [{"text": "Total: 1,240.00 EUR"}],
                                    "location": {"documentPage": {"documentIndex": 0, "start": 1}},
                                }
                            ],
                        }
                    },
                ],
            }
        },
        "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 8, "totalTokens": 18},
    }
    response = decode_response(body)
    assert response.text == "Per the invoice, the total is 1,240.00 EUR."


@pytest.mark.parametrize("name", sorted(set(FAKES) - {"ollama"}))
async def test_structured_output_with_a_pdf_in_the_history(name: str) -> None:
    open_server, build = FAKES[name]
    script = Script([reply_text('{"total": "1,240.00 EUR", "paid": false}')])
    history = [Message.user([Text(text="Read the invoice."), PDF])]
    schema: dict[str, JSONValue] = {
        "type": "object",
        "properties": {"total": {"type": "string"}, "paid": {"type": "boolean"}},
        "required": ["total", "paid"],
        "additionalProperties": False,
    }
    async with open_server(script) as server:
        async with AgentBuilder().provider(build(server)).build() as agent:
            value, _ = await agent.run_structured(history, ResponseFormat.named("invoice", schema))
    assert value == {"total": "1,240.00 EUR", "paid": False}
    seen = script.requests[0].request
    assert seen.config.response_format is not None
    assert any(isinstance(b, Document) for m in seen.messages for b in m.content)


def test_a_streamed_spoken_openai_answer_streams_its_transcript_as_text() -> None:
    from kova import TextDelta

    from ._contract import run

    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "audio": {"id": "audio_1"}}}]},
        {
            "choices": [
                {"index": 0, "delta": {"audio": {"transcript": "The total ", "data": "AAA="}}}
            ]
        },
        {"choices": [{"index": 0, "delta": {"audio": {"transcript": "is 1,240."}}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    chunks[2]["choices"][0]["delta"]["audio"]["data"] = "AQI="  # type: ignore[index]
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    events, error = run(CODECS["openai"], [body.encode()])
    assert error is None
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["The total ", "is 1,240."]
    # Each chunk's audio.data is base64 of its own bytes: the speech is their bytes joined.
    speech = [e.block for e in events if isinstance(e, MediaOutput)]
    assert speech == [Audio(data=b"\0\0" + b"\1\2", format="wav")]


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_an_openai_spoken_answer_comes_back_as_text_and_audio(stream: bool) -> None:
    spoken = ModelResponse(
        content=(Text(text="The total is 1,240 euros."), Audio(data=PCM, format="pcm16")),
        stop_reason=StopReason.END_TURN,
    )
    async with open_openai_server(Script([spoken])) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(
                model="gpt-4o-audio-preview",
                base_url=server.base_url,
                api_key="k",
                audio_voice="alloy",
                audio_format="pcm16",
            )
        )
        async with AgentBuilder().provider(provider).build() as agent:
            if stream:
                async with agent.stream("What is the total?") as events:
                    received = [event async for event in events]
                assert isinstance(received[-1], TurnCompleted)
                response = received[-1].response
            else:
                response = await agent.run("What is the total?")
    assert response.new_messages[-1].content == spoken.content
    body = server.requests[0].json()
    assert isinstance(body, dict)
    assert body["audio"] == {"voice": "alloy", "format": "pcm16"}


def test_a_picture_another_model_answered_with_stays_out_of_an_anthropic_assistant_turn() -> None:
    history = [
        Message.user("Draw a chart"),
        Message.assistant([Text(text="Here it is."), Image(media_type="image/png", data=PNG64)]),
        Message.user([Text(text="And this one?"), Image(media_type="image/png", data=PNG64)]),
    ]
    request = ChatRequest(messages=history, config=InferenceConfig(max_tokens=8))
    body = CODECS["anthropic"].encode(request, stream=False).body
    assistant, user = body["messages"][1], body["messages"][2]
    assert assistant["content"] == [{"type": "text", "text": "Here it is."}]
    assert [part["type"] for part in user["content"]] == ["text", "image"]


_sources = st.text(min_size=1, max_size=12)
_media = st.one_of(
    st.builds(
        Document,
        data=_sources | st.binary(min_size=1, max_size=12),
        media_type=st.sampled_from(sorted(DOCUMENT_MEDIA_TYPES)),
        title=st.none() | st.text(min_size=1, max_size=8),
        citations=st.booleans(),
    ),
    st.builds(Document, url=_sources, media_type=st.sampled_from(sorted(DOCUMENT_MEDIA_TYPES))),
    st.builds(Document, file_id=_sources),
    st.builds(Audio, data=_sources, format=st.sampled_from(sorted(AUDIO_FORMATS))),
    st.builds(Audio, url=_sources, format=st.sampled_from(sorted(AUDIO_FORMATS))),
    st.builds(File, _sources, media_type=st.none() | st.sampled_from(["image/png", "video/mp4"])),
    st.builds(Image, media_type=st.just("image/png"), data=_sources),
    st.builds(Image, url=_sources),
)
messages = st.builds(
    Message,
    role=st.sampled_from([Role.USER, Role.ASSISTANT]),
    content=st.lists(_media | st.builds(Text, text=st.text(max_size=8)), min_size=1, max_size=4),
)


@settings(max_examples=60, deadline=None)
@given(history=st.lists(messages, min_size=1, max_size=4))
def test_encoding_any_history_with_media_sends_or_raises_invalid_request(
    history: list[Message],
) -> None:
    # Whatever blocks a history holds, in whatever role, every codec encodes it or refuses it
    # with InvalidRequest naming itself: never another exception.
    refused: dict[str, str | None] = {}
    for name, codec in CODECS.items():
        request = ChatRequest(messages=history, config=InferenceConfig(max_tokens=8))
        try:
            codec.encode(request, stream=False)
        except InvalidRequest as exc:
            refused[name] = exc.provider
    assert all(provider == name for name, provider in refused.items()), refused


# -- a tool that returns a document ----------------------------------------------------------


@tool
def fetch_invoice(number: int) -> ToolResult:
    """The scanned invoice."""
    return ToolResult(
        content=(Text(text=f"invoice {number}:"), Document(data=PDF_BYTES, title="Invoice 7"))
    )


FETCH = ToolUse(id="call_9", name="fetch_invoice", input={"number": 7})


@pytest.mark.parametrize("name", sorted(FAKES))
async def test_a_tool_that_returns_a_pdf_hands_it_to_the_model(name: str) -> None:
    open_server, build = FAKES[name]
    script = Script(
        [
            ModelResponse(content=(FETCH,), stop_reason=StopReason.TOOL_USE),
            reply_text("The invoice totals 1,240.00 EUR."),
        ]
    )
    async with open_server(script) as server:
        agent_builder = AgentBuilder().provider(build(server)).tool(fetch_invoice)
        async with agent_builder.build() as agent:
            if name == "ollama":
                with pytest.raises(InvalidRequest, match="ollama: cannot take Document"):
                    await agent.run("What does invoice 7 total?")
                assert len(server.requests) == 1  # the call went; the PDF was refused
                return
            response = await agent.run("What does invoice 7 total?")
    assert response.text == "The invoice totals 1,240.00 EUR."
    second = script.requests[1].request.messages
    seen = [
        part
        for message in second
        for block in message.content
        for part in (block.content if isinstance(block, ToolResult) else (block,))
        if isinstance(part, Document)
    ]
    assert [document.data for document in seen] == [Document(data=PDF_BYTES).data], name


PDF_WIRE = base64.b64encode(PDF_BYTES).decode()
TOOL_DOCUMENT: dict[str, Callable[[dict[str, Any]], object]] = {
    # Where each wire puts a document a tool returned, as its SDK's types spell it.
    "anthropic": lambda body: body["messages"][2]["content"][0]["content"][1],
    "bedrock": lambda body: body["messages"][2]["content"][0]["toolResult"]["content"][1],
    "openai": lambda body: body["messages"][3]["content"][0],
    "openai-responses": lambda body: body["input"][2]["output"][1],
    "gemini": lambda body: body["contents"][2]["parts"][1],
}
EXPECTED_TOOL_DOCUMENT: dict[str, object] = {
    "anthropic": {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_WIRE},
        "title": "Invoice 7",
    },
    "bedrock": {"document": {"format": "pdf", "name": "Invoice 7", "source": {"bytes": PDF_WIRE}}},
    "openai": {
        "type": "file",
        "file": {
            "filename": "Invoice 7.pdf",
            "file_data": f"data:application/pdf;base64,{PDF_WIRE}",
        },
    },
    "openai-responses": {
        "type": "input_file",
        "filename": "Invoice 7.pdf",
        "file_data": f"data:application/pdf;base64,{PDF_WIRE}",
    },
    "gemini": {
        "inlineData": {
            "mimeType": "application/pdf",
            "data": PDF_WIRE.translate(str.maketrans("+/", "-_")),
        }
    },
}


@pytest.mark.parametrize("name", sorted(TOOL_DOCUMENT))
def test_a_document_a_tool_returned_goes_where_the_wire_takes_it(name: str) -> None:
    history = [
        Message.user("What does invoice 7 total?"),
        Message.assistant([FETCH]),
        Message.tool_results(
            [
                ToolResult(
                    tool_use_id=FETCH.id,
                    content=(Text(text="invoice 7:"), Document(data=PDF_BYTES, title="Invoice 7")),
                )
            ]
        ),
    ]
    body = encode_history(name, history)
    assert TOOL_DOCUMENT[name](body) == EXPECTED_TOOL_DOCUMENT[name]


def encode_history(provider: str, history: list[Message]) -> dict[str, Any]:
    request = ChatRequest(messages=history, config=InferenceConfig(max_tokens=64))
    body: dict[str, Any] = CODECS[provider].encode(request, stream=False).body
    return body
