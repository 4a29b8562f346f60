"""TelemetryConfig: the builder, the structlog pipeline, and an OTLP/HTTP export to a loopback
collector decoded with opentelemetry-proto (in a child process: OpenTelemetry's global
providers can be installed once per process)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import pytest
import structlog
import trio
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import kova
from kova.telemetry import ExporterConfig, OtlpProtocol, TelemetryConfig
from kova.testing._http_server import FakeResponse, RecordedRequest, serve_http

if TYPE_CHECKING:
    from pathlib import Path

EXPORT_SCRIPT = '''
import sys

import trio

from kova import Message
from kova.agent import AgentBuilder
from kova.telemetry import ExporterConfig, OtlpProtocol, TelemetryConfig
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def main() -> None:
    provider = ScriptedProvider([reply_tool_calls(("add", {"a": 1, "b": 2})), reply_text("3")])
    async with AgentBuilder().provider(provider).tool(add).build() as agent:
        await agent.run([Message.user("1 + 2?")])


handle = (
    TelemetryConfig.builder()
    .log_level("warning")
    .exporter(ExporterConfig.otlp(sys.argv[1], protocol=OtlpProtocol.HTTP))
    .service_name("export-test")
    .build()
    .init()
)
assert handle.otel
trio.run(main)
handle.shutdown()
print("exported")
'''


async def test_otlp_http_export_reaches_a_loopback_collector(tmp_path: Path) -> None:
    received: list[RecordedRequest] = []

    async def collector(request: RecordedRequest) -> FakeResponse:
        received.append(request)
        return FakeResponse(headers={"content-type": "application/x-protobuf"})

    script = tmp_path / "export.py"
    script.write_text(EXPORT_SCRIPT)
    async with trio.open_nursery() as nursery:
        base_url = await nursery.start(serve_http, collector)
        result = await trio.run_process(
            [sys.executable, str(script), base_url],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        nursery.cancel_scope.cancel()
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert {request.path for request in received} == {"/v1/traces", "/v1/metrics"}
    assert all(r.headers["content-type"] == "application/x-protobuf" for r in received)

    spans = []
    for request in received:
        if request.path == "/v1/traces":
            export = ExportTraceServiceRequest.FromString(request.body)
            for resource_spans in export.resource_spans:
                service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}[
                    "service.name"
                ]
                assert service == "export-test"
                for scope_spans in resource_spans.scope_spans:
                    assert scope_spans.scope.name == "kova"
                    spans.extend(scope_spans.spans)
    by_id = {span.span_id: span for span in spans}
    names = sorted(
        (span.name, by_id[span.parent_span_id].name if span.parent_span_id else None)
        for span in spans
    )
    assert names == [
        ("chat scripted", "invoke_agent kova"),
        ("chat scripted", "invoke_agent kova"),
        ("execute_tool add", "invoke_agent kova"),
        ("invoke_agent kova", None),
    ]
    tool_span = next(span for span in spans if span.name == "execute_tool add")
    attributes = {a.key: a.value for a in tool_span.attributes}
    assert attributes["gen_ai.tool.name"].string_value == "add"
    assert attributes["gen_ai.tool.call.id"].string_value == "call_1"

    metric_names = set()
    for request in received:
        if request.path == "/v1/metrics":
            export_metrics = ExportMetricsServiceRequest.FromString(request.body)
            for resource_metrics in export_metrics.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    metric_names.update(metric.name for metric in scope_metrics.metrics)
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= metric_names


def test_builder_is_the_seeds_fluent_form() -> None:
    config = (
        TelemetryConfig.builder()
        .log_level("debug")
        .exporter(ExporterConfig.otlp("http://localhost:4317", protocol=OtlpProtocol.GRPC))
        .sampling_rate(0.5)
        .build()
    )
    assert config == TelemetryConfig(
        log_level=logging.DEBUG,
        exporter=ExporterConfig.otlp("http://localhost:4317"),
        sampling_rate=0.5,
    )


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: TelemetryConfig(sampling_rate=1.5), "sampling_rate"),
        (lambda: TelemetryConfig(log_level="loud"), "log_level"),
        (lambda: ExporterConfig.otlp("localhost:4317"), "http"),
        (lambda: ExporterConfig.otlp("http://x", protocol="carrier-pigeon"), "protocol"),
        (lambda: TelemetryConfig.builder().exporter("http://x"), "ExporterConfig"),  # type: ignore[arg-type]
    ],
)
def test_bad_values_are_build_errors(make: object, match: str) -> None:
    with pytest.raises(kova.BuildError, match=match):
        make()  # type: ignore[operator]


def test_init_without_exporter_installs_structlog_and_shutdown_restores(
    capsys: pytest.CaptureFixture[str],
) -> None:
    was_configured = structlog.is_configured()
    before = structlog.get_config()
    handle = TelemetryConfig.builder().log_level("info").json_logs().build().init()
    try:
        assert not handle.otel
        assert structlog.is_configured()
        from kova._log import get_logger

        get_logger("kova.test").debug("hidden")
        get_logger("kova.test").info("shown", answer=42)
    finally:
        handle.shutdown()
        handle.shutdown()  # idempotent
    assert structlog.is_configured() == was_configured
    assert structlog.get_config() == before
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert '"event": "shown"' in lines[0]
    assert '"answer": 42' in lines[0]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: TelemetryConfig(service_name=5), "service_name must be a non-empty str"),
        (lambda: TelemetryConfig(json_logs="yes"), "json_logs must be True or False"),
        (lambda: TelemetryConfig(metric_interval="60"), "metric_interval must be a positive"),
        (lambda: TelemetryConfig(metric_interval=0), "metric_interval must be a positive"),
        (lambda: TelemetryConfig(sampling_rate="0.5"), "sampling_rate must be a number"),
        (lambda: TelemetryConfig(exporter="http://localhost:4318"), "exporter must be an"),
        (lambda: ExporterConfig.otlp(4318), "endpoint must be an http"),
        (lambda: ExporterConfig.otlp("http://x", headers={"key": 1}), "headers must map"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_build_error_naming_it(build, match):
    # Before: accepted, then an AttributeError from init() ('int' has no attribute 'rstrip'
    # for otlp(4318)) or a wrong setting silently used ("yes" as a true json_logs).
    with pytest.raises(kova.BuildError, match=match):
        build()
