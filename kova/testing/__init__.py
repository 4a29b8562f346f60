"""Test doubles for agents built on kova: scripted models, a model that needs no script
(:class:`TestProvider`), wire-level fake servers, and a guard against real provider requests
(:func:`no_network`; the ``kova_no_network`` pytest fixture).

Like ``trio.testing``, this is public API: use it to test your own agents deterministically.
"""

from ._anthropic_server import FakeAnthropicServer as FakeAnthropicServer
from ._anthropic_server import open_anthropic_server as open_anthropic_server
from ._bedrock_server import FakeBedrockServer as FakeBedrockServer
from ._bedrock_server import open_bedrock_server as open_bedrock_server
from ._gemini_server import FakeGeminiServer as FakeGeminiServer
from ._gemini_server import open_gemini_server as open_gemini_server
from ._http_server import RecordedRequest as RecordedRequest
from ._no_network import RealNetworkRequestError as RealNetworkRequestError
from ._no_network import no_network as no_network
from ._ollama_server import FakeOllamaServer as FakeOllamaServer
from ._ollama_server import open_ollama_server as open_ollama_server
from ._openai_server import FakeOpenAiServer as FakeOpenAiServer
from ._openai_server import open_openai_server as open_openai_server
from ._responses_server import FakeResponsesServer as FakeResponsesServer
from ._responses_server import open_responses_server as open_responses_server
from ._schema_values import value_for_schema as value_for_schema
from ._script import ErrorReply as ErrorReply
from ._script import Reply as Reply
from ._script import Script as Script
from ._script import ScriptExhaustedError as ScriptExhaustedError
from ._script import ScriptLike as ScriptLike
from ._script import ScriptRequest as ScriptRequest
from ._script import StreamReply as StreamReply
from ._script import as_script as as_script
from ._script import reply_text as reply_text
from ._script import reply_tool_calls as reply_tool_calls
from ._script import response_to_events as response_to_events
from ._script import stream_events as stream_events
from ._script import with_thinking as with_thinking
from ._scripted import FunctionProvider as FunctionProvider
from ._scripted import ScriptedProvider as ScriptedProvider
from ._sessions import check_session_store as check_session_store
from ._test_provider import TestProvider as TestProvider

__all__ = [
    "ErrorReply",
    "FakeAnthropicServer",
    "FakeBedrockServer",
    "FakeGeminiServer",
    "FakeOllamaServer",
    "FakeOpenAiServer",
    "FakeResponsesServer",
    "FunctionProvider",
    "RealNetworkRequestError",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptExhaustedError",
    "ScriptLike",
    "ScriptRequest",
    "ScriptedProvider",
    "StreamReply",
    "TestProvider",
    "as_script",
    "check_session_store",
    "no_network",
    "open_anthropic_server",
    "open_bedrock_server",
    "open_gemini_server",
    "open_ollama_server",
    "open_openai_server",
    "open_responses_server",
    "reply_text",
    "reply_tool_calls",
    "response_to_events",
    "stream_events",
    "value_for_schema",
    "with_thinking",
]
