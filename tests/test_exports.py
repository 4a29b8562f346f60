"""Public modules export exactly what their ``__all__`` says, sorted, nothing private, and
exactly the names pinned in ``PUBLIC``: a name joins (or leaves) the public API on purpose,
by an edit here, and docs/changes.md says so when one leaves.

A public module is one whose dotted path has no part starting with ``_``. Count the public
names (the figure the issue-30 note gives) with::

    .venv/bin/python tests/test_exports.py
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import kova

PUBLIC: dict[str, tuple[str, ...]] = {
    "kova": (
        "ActorError",
        "ActorFailed",
        "Agent",
        "AgentBuilder",
        "AgentLoopError",
        "AgentResponse",
        "Audio",
        "BuildError",
        "CancelToken",
        "ConfigError",
        "ContentBlock",
        "ContextBudgetExceededError",
        "ContextOverflow",
        "Document",
        "File",
        "Image",
        "InferenceConfig",
        "InvalidRequest",
        "InvalidResponse",
        "JSONObject",
        "JSONValue",
        "KovaConnectionError",
        "KovaError",
        "KovaIOError",
        "KovaTimeoutError",
        "MailboxClosed",
        "MaxIterationsError",
        "McpCallInterruptedError",
        "McpError",
        "McpUnavailableError",
        "MediaOutput",
        "Message",
        "ModelNotFound",
        "ProviderAuthError",
        "ProviderError",
        "ProviderErrorClass",
        "ProviderOverloaded",
        "RateLimited",
        "RedactedThinking",
        "ResponseFormat",
        "RetryConfig",
        "Role",
        "Secret",
        "SecretHeaders",
        "SerializationError",
        "SignedThinking",
        "StopKind",
        "StopReason",
        "StreamError",
        "StructuredOutputError",
        "Text",
        "TextDelta",
        "Thinking",
        "ThinkingDelta",
        "Tool",
        "ToolAnnotations",
        "ToolDefinition",
        "ToolError",
        "ToolExecutionError",
        "ToolNotFoundError",
        "ToolRegistry",
        "ToolResult",
        "ToolUse",
        "TurnCancelled",
        "Usage",
        "messages_from_dicts",
        "messages_from_json",
        "messages_to_dicts",
        "messages_to_json",
        "open_runtime",
        "tool",
    ),
    "kova.actors": (
        "Actor",
        "ActorFactory",
        "ActorRef",
        "Backoff",
        "Call",
        "ChildSpec",
        "DEFAULT_MAILBOX_SIZE",
        "GetChild",
        "LATER",
        "ListChildren",
        "Mailbox",
        "RestartType",
        "Runtime",
        "SpawnChild",
        "StopChild",
        "Strategy",
        "StreamReceiver",
        "Supervisor",
        "UnknownMessage",
        "open_runtime",
        "open_supervisor",
        "supervisor_spec",
    ),
    "kova.agent": (
        "Agent",
        "AgentBuilder",
        "AgentConfig",
        "AgentEvent",
        "AgentResponse",
        "ApprovalDecision",
        "ApprovalHandler",
        "AwaitApproval",
        "Budget",
        "CallModel",
        "CancelToken",
        "ClearToolResults",
        "Compact",
        "Compaction",
        "ContextCompacted",
        "ContextPolicy",
        "Counters",
        "DEFER",
        "Deferred",
        "Deny",
        "Finished",
        "GuardPassed",
        "GuardTripped",
        "InputGuard",
        "LifecycleHook",
        "LifecycleSubscriber",
        "OutputGuard",
        "PendingApprovals",
        "PendingCall",
        "Prices",
        "ProviderCompaction",
        "ProviderRef",
        "RetryConfig",
        "RunTools",
        "SlidingWindow",
        "StructuredStream",
        "Summarize",
        "TextDelta",
        "ThinkingDelta",
        "ToolCallDeferred",
        "ToolCallDelta",
        "ToolCallFinished",
        "ToolCallStarted",
        "ToolGuard",
        "ToolsAdded",
        "ToolsFound",
        "Trip",
        "Turn",
        "TurnCompleted",
        "UsageLimits",
        "spawn_provider",
    ),
    "kova.asyncio": (
        "AgentEventStream",
        "AsgiBridge",
        "AsyncioAgent",
        "AsyncioRuntime",
        "StructuredValueStream",
        "asgi_app",
        "current_runtime",
        "on_asyncio",
        "open_agent",
        "open_runtime",
    ),
    "kova.cli": ("main",),
    "kova.durable": (
        "JournalClaim",
        "JournalError",
        "JournalRecord",
        "PostgresJournal",
        "PostgresJournalClaim",
        "SqliteJournal",
        "TurnClaimedError",
    ),
    "kova.errors": (
        "ActorError",
        "ActorFailed",
        "AgentLoopError",
        "ApprovalMismatchError",
        "BudgetExceeded",
        "BuildError",
        "ConfigError",
        "ContextBudgetExceededError",
        "ContextOverflow",
        "DuplicateToolError",
        "GuardrailTripped",
        "InvalidRequest",
        "InvalidResponse",
        "InvalidToolArguments",
        "KovaConnectionError",
        "KovaError",
        "KovaIOError",
        "KovaTimeoutError",
        "MailboxClosed",
        "MaxIterationsError",
        "McpCallInterruptedError",
        "McpError",
        "McpUnavailableError",
        "ModelNotFound",
        "ProviderAuthError",
        "ProviderError",
        "ProviderErrorClass",
        "ProviderOverloaded",
        "RateLimited",
        "SerializationError",
        "SessionBusyError",
        "SessionConflictError",
        "SessionError",
        "StreamError",
        "StructuredOutputError",
        "ToolDefinitionError",
        "ToolError",
        "ToolExecutionError",
        "ToolNotFoundError",
        "TurnCancelled",
        "UsageLimitExceeded",
        "WebFetchError",
    ),
    "kova.mcp": (
        "ConnectionStatus",
        "DEFAULT_CONNECT_TIMEOUT",
        "DEFAULT_REQUEST_TIMEOUT",
        "ElicitationHandler",
        "ElicitationRequest",
        "ElicitationResponse",
        "InProcessTransport",
        "LogHandler",
        "McpClient",
        "McpConnectionState",
        "McpLogMessage",
        "McpProgress",
        "McpPrompt",
        "McpPromptArgument",
        "McpPromptResult",
        "McpResource",
        "McpResourceContents",
        "McpResourceTemplate",
        "McpRoot",
        "McpServerInfo",
        "McpTool",
        "McpToolMemory",
        "PREFIX_SEPARATOR",
        "ProgressHandler",
        "ReconnectPolicy",
        "RememberedTools",
        "ResourceUpdatedHandler",
        "SseTransport",
        "StateChangeHandler",
        "StdioTransport",
        "StreamableHttpTransport",
        "TokenProvider",
        "ToolFilter",
        "Transport",
        "mcp_tools",
    ),
    "kova.providers": (
        "ChatRequest",
        "Codec",
        "CodecBase",
        "EmbeddingProvider",
        "Embeddings",
        "ErrorDetails",
        "ErrorEvent",
        "EventBatches",
        "EventStream",
        "FallbackOn",
        "FallbackProvider",
        "Framer",
        "HeaderAuth",
        "HttpProvider",
        "HttpSettings",
        "ModelInfo",
        "ModelPage",
        "ModelResponse",
        "NdjsonFramer",
        "Provider",
        "SseEvent",
        "SseFramer",
        "StopEvent",
        "StreamDecoder",
        "StreamEvent",
        "ToolUseDelta",
        "ToolUseEnd",
        "ToolUseStart",
        "UsageEvent",
        "WireRequest",
        "bearer_auth",
        "classify",
        "count_tokens",
        "expect_list",
        "expect_object",
        "expect_str",
        "header_auth",
        "heuristic_count_tokens",
        "list_models",
        "provider_error",
    ),
    "kova.providers.anthropic": (
        "ANTHROPIC_API_VERSION",
        "AnthropicConfig",
        "AnthropicProvider",
        "DEFAULT_MAX_TOKENS",
        "EFFORT_LEVELS",
        "Effort",
        "ThinkingDisplay",
    ),
    "kova.providers.bedrock": (
        "BedrockConfig",
        "BedrockProvider",
    ),
    "kova.providers.gemini": (
        "GeminiConfig",
        "GeminiEmbeddingConfig",
        "GeminiEmbeddingProvider",
        "GeminiProvider",
    ),
    "kova.providers.ollama": (
        "OllamaConfig",
        "OllamaEmbeddingConfig",
        "OllamaEmbeddingProvider",
        "OllamaProvider",
        "OllamaThink",
    ),
    "kova.providers.openai": (
        "OpenAiCompatibleProvider",
        "OpenAiConfig",
        "OpenAiEmbeddingConfig",
        "OpenAiEmbeddingProvider",
        "OpenAiResponsesConfig",
        "OpenAiResponsesProvider",
    ),
    "kova.sessions": (
        "PostgresSessionStore",
        "Session",
        "SessionInfo",
        "SessionState",
        "SessionStore",
        "SessionWrite",
        "SqliteSessionStore",
    ),
    "kova.telemetry": (
        "ActorRestarted",
        "DEFAULT_BOUNDS_MS",
        "ExporterConfig",
        "GuardFinished",
        "GuardStarted",
        "Histogram",
        "HistogramSummary",
        "McpRequestFinished",
        "McpRequestStarted",
        "Metrics",
        "MetricsCollector",
        "MetricsSnapshot",
        "MetricsSubscriber",
        "ModelCallFallback",
        "ModelCallFinished",
        "ModelCallRetrying",
        "ModelCallStarted",
        "ModelFirstToken",
        "OtlpProtocol",
        "Outcome",
        "Subscriber",
        "Subscription",
        "SupervisorGaveUp",
        "TelemetryConfig",
        "TelemetryConfigBuilder",
        "TelemetryEvent",
        "TelemetryHandle",
        "TelemetryHub",
        "ToolExecutionStarted",
        "ToolFinished",
        "ToolOutcome",
        "ToolStarted",
        "TurnFinished",
        "TurnStarted",
        "exponential_bounds",
        "open_metrics",
    ),
    "kova.telemetry.otel": (
        "OtelSubscriber",
        "PROVIDER_NAMES",
        "instrument",
        "observe_mailboxes",
        "uninstrument",
    ),
    "kova.serve": ("app", "serve_mcp_stdio"),
    "kova.a2a": ("RemoteAgent", "RemoteAgentError"),
    "kova.temporal": (
        "AgentWorkflow",
        "PAYLOAD_LIMIT",
        "PayloadTooLargeError",
        "TurnEvent",
        "TurnFailedError",
        "decide",
        "events",
        "model_activity",
        "pending",
        "response",
        "run_structured",
        "run_turn",
        "start_turn",
        "structured_output",
        "tool_activity",
        "worker",
    ),
    "kova.testing": (
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
    ),
    "kova.tools": (
        "ArgumentValidator",
        "DuplicateToolError",
        "FetchedText",
        "FunctionTool",
        "InvalidToolArguments",
        "Tool",
        "ToolContext",
        "ToolDefinitionError",
        "ToolPolicy",
        "ToolRegistry",
        "WebFetchError",
        "WebPolicy",
        "annotations_of",
        "argument_problems",
        "builtin_tools",
        "current_tool_context",
        "definition",
        "fetch_text",
        "tool",
        "validate_arguments",
    ),
    "kova.web": (
        "EventServer",
        "PROTOCOL_VERSION",
        "WebApproval",
        "WebRequest",
        "open_event_server",
    ),
}


def public_modules() -> list[str]:
    """Every module of kova whose dotted path has no private part."""
    names = ["kova"]
    for info in pkgutil.walk_packages(kova.__path__, "kova."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def exported(name: str) -> list[str]:
    return list(importlib.import_module(name).__all__)


def test_every_public_module_is_pinned() -> None:
    assert public_modules() == sorted(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_all_is_sorted_complete_public_and_pinned(name: str) -> None:
    module = importlib.import_module(name)
    names = exported(name)
    assert names == sorted(names), f"{name}.__all__ is not sorted"
    assert len(set(names)) == len(names)
    for symbol in names:
        assert not symbol.startswith("_"), f"{name} exports private {symbol}"
        assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol}"
    public = {
        attribute
        for attribute in vars(module)
        if not attribute.startswith("_") and not inspect.ismodule(getattr(module, attribute))
    }
    assert public - set(names) == set(), f"{name} has public names missing from __all__"
    assert tuple(names) == PUBLIC[name], (
        f"{name}'s public names changed: added {sorted(set(names) - set(PUBLIC[name]))}, "
        f"removed {sorted(set(PUBLIC[name]) - set(names))}. Pin them in tests/test_exports.py "
        "if that is on purpose (and list a removed one in docs/changes.md)."
    )


def test_moved_names_say_where_they_went() -> None:
    with pytest.raises(AttributeError, match=r"use kova\.providers\.ChatRequest"):
        kova.ChatRequest  # noqa: B018
    with pytest.raises(AttributeError, match=r"use kova\.TurnCancelled"):
        kova.Cancelled  # noqa: B018
    with pytest.raises(AttributeError, match=r"no attribute 'Nope'$"):
        kova.Nope  # noqa: B018


def test_every_agent_event_class_is_importable_from_kova_agent() -> None:
    import typing

    import kova.agent

    for event in typing.get_args(kova.agent.AgentEvent):
        assert getattr(kova.agent, event.__name__) is event
        assert event.__name__ in kova.agent.__all__
    for name in ("TextDelta", "ThinkingDelta"):  # and they stay in kova
        assert getattr(kova, name) is getattr(kova.agent, name)


def test_retry_config_has_a_real_signature() -> None:
    from kova.agent import RetryConfig

    parameters = inspect.signature(RetryConfig).parameters
    assert list(parameters) == [
        "max_retries",
        "initial_backoff",
        "multiplier",
        "max_backoff",
        "jitter",
        "max_retry_after",
        "max_unconfirmed_pause",
    ]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert parameters["max_retries"].default == 2
    assert parameters["initial_backoff"].annotation == "float"


if __name__ == "__main__":
    total = 0
    for module_name in public_modules():
        count = len(exported(module_name))
        total += count
        print(f"{count:5d}  {module_name}")
    print(f"{total:5d}  public names in {len(public_modules())} public modules")
