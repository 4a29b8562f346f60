"""TelemetryConfig: what an application calls once to send kova's logs, traces and metrics
somewhere. kova never installs anything unless :meth:`TelemetryConfig.init` is called.

``init()`` always installs a structlog pipeline (level filter, timestamps, a console or JSON
renderer on stderr), which kova's loggers then use (see :mod:`kova._log`). With an
exporter configured it also installs OpenTelemetry tracer and meter providers (the ``otel``
extra; OTLP over HTTP needs ``opentelemetry-exporter-otlp-proto-http``, over gRPC
``opentelemetry-exporter-otlp-proto-grpc``) as the global ones, where kova's spans and
metrics go. The API is the same with or without OpenTelemetry; asking for an exporter
without it installed is a :class:`~kova.BuildError` that names the package.
"""

from __future__ import annotations

import enum
import logging
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs
import structlog

from .._errors import BuildError, check_seconds
from .._record import EMPTY, Record

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "ExporterConfig",
    "OtlpProtocol",
    "TelemetryConfig",
    "TelemetryConfigBuilder",
    "TelemetryHandle",
]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
_LEVELS |= {"error": logging.ERROR, "critical": logging.CRITICAL}


class OtlpProtocol(enum.StrEnum):
    """How OTLP is carried."""

    GRPC = "grpc"
    """OTLP/gRPC (port 4317 by convention)."""
    HTTP = "http"
    """OTLP/HTTP with protobuf bodies (port 4318 by convention)."""


def _level(value: int | str) -> int:
    if isinstance(value, bool):
        raise BuildError(f"log_level must be a level name or number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lower() in _LEVELS:
        return _LEVELS[value.lower()]
    raise BuildError(f"log_level must be one of {sorted(_LEVELS)} or a number, got {value!r}")


def _check_rate(_instance: object, _attribute: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuildError(f"sampling_rate must be a number between 0 and 1, got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise BuildError(f"sampling_rate must be between 0 and 1, got {value!r}")


def _check_exporter(_instance: object, _attribute: object, value: Any) -> None:
    if value is not None and not isinstance(value, ExporterConfig):
        raise BuildError(
            f"exporter must be an ExporterConfig (ExporterConfig.otlp(...)), got {value!r}"
        )


def _check_service_name(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise BuildError(f"service_name must be a non-empty str, got {value!r}")


def _check_flag(_instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise BuildError(f"{attribute.name} must be True or False, got {value!r}")


def _check_interval(_instance: object, _attribute: object, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuildError(f"metric_interval must be a positive number of seconds, got {value!r}")
    check_seconds("metric_interval", value)


class ExporterConfig(Record):
    """Where traces and metrics go. Make one with :meth:`otlp`.

    A frozen value (a :class:`~kova._record.Record`): it converts nothing, it only checks
    ``endpoint``.
    """

    endpoint: str
    """The collector's base URL, e.g. ``http://localhost:4318`` (HTTP: ``/v1/traces`` and
    ``/v1/metrics`` are added)."""
    protocol: OtlpProtocol = OtlpProtocol.GRPC
    headers: Mapping[str, str] = EMPTY
    """Extra request headers (an API key for a hosted collector)."""
    kind: Literal["otlp"] = "otlp"

    def __post_init__(self) -> None:
        if not isinstance(self.endpoint, str) or not self.endpoint.startswith(
            ("http://", "https://")
        ):
            raise BuildError(f"the OTLP endpoint must be an http(s) URL, got {self.endpoint!r}")
        if not isinstance(self.headers, Mapping) or not all(
            isinstance(name, str) and isinstance(value, str) for name, value in self.headers.items()
        ):
            raise BuildError("the OTLP headers must map str to str")

    @classmethod
    def otlp(
        cls,
        endpoint: str,
        *,
        protocol: OtlpProtocol | str = OtlpProtocol.GRPC,
        headers: Mapping[str, str] | None = None,
    ) -> ExporterConfig:
        """Export with OTLP to ``endpoint``.

        Raises:
            BuildError: not an http(s) URL, or an unknown protocol.
        """
        try:
            chosen = OtlpProtocol(protocol)
        except ValueError:
            raise BuildError(f"protocol must be 'grpc' or 'http', got {protocol!r}") from None
        if isinstance(endpoint, str):
            endpoint = endpoint.rstrip("/")
        if headers is not None and not isinstance(headers, Mapping):
            raise BuildError(f"the OTLP headers must map str to str, got {headers!r}")
        return cls(endpoint=endpoint, protocol=chosen, headers=dict(headers or {}))


@attrs.frozen(kw_only=True)
class TelemetryConfig:
    """Logs, traces and metrics for an application. Build it with :meth:`builder` (the
    seed's fluent form) or directly; :meth:`init` installs it.

    An attrs class by kova's rule for configurations whose fields convert what the caller
    passes (``log_level="debug"`` becomes ``logging.DEBUG``; see :mod:`kova._record`).
    """

    log_level: int = attrs.field(default=logging.INFO, converter=_level)
    """The lowest level logged (a :mod:`logging` number or ``"debug"``... ``"critical"``)."""
    exporter: ExporterConfig | None = attrs.field(default=None, validator=_check_exporter)
    """Where traces and metrics go; ``None``: logs only."""
    sampling_rate: float = attrs.field(default=1.0, validator=_check_rate)
    """The fraction of traces kept (parent-based: a turn follows its caller's decision)."""
    service_name: str = attrs.field(default="kova", validator=_check_service_name)
    """``service.name`` of the exported resource."""
    json_logs: bool = attrs.field(default=False, validator=_check_flag)
    """Render log lines as JSON instead of for a console."""
    metric_interval: float = attrs.field(default=60.0, validator=_check_interval)
    """Seconds between metric exports."""

    @classmethod
    def builder(cls) -> TelemetryConfigBuilder:
        """``TelemetryConfig.builder().log_level("debug").build().init()``."""
        return TelemetryConfigBuilder()

    def init(self) -> TelemetryHandle:
        """Install the logging pipeline and, with an exporter, OpenTelemetry.

        Returns:
            A handle whose :meth:`~TelemetryHandle.shutdown` flushes and uninstalls.

        Raises:
            BuildError: an exporter is configured but OpenTelemetry (or the exporter for its
                protocol) is not installed, or another tracer provider is already installed.
        """
        tracer_provider = meter_provider = None
        if self.exporter is not None:
            tracer_provider, meter_provider = _install_otel(self, self.exporter)
        previous = structlog.get_config() if structlog.is_configured() else None
        _configure_structlog(self, otel=tracer_provider is not None)
        return TelemetryHandle(tracer_provider, meter_provider, previous)


class TelemetryConfigBuilder:
    """The seed's fluent form of :class:`TelemetryConfig`."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def log_level(self, level: int | str) -> Self:
        """See :attr:`TelemetryConfig.log_level`."""
        self._values["log_level"] = level
        return self

    def exporter(self, exporter: ExporterConfig) -> Self:
        """See :attr:`TelemetryConfig.exporter`."""
        if not isinstance(exporter, ExporterConfig):
            raise BuildError(f"exporter must be an ExporterConfig, got {exporter!r}")
        self._values["exporter"] = exporter
        return self

    def sampling_rate(self, rate: float) -> Self:
        """See :attr:`TelemetryConfig.sampling_rate`."""
        self._values["sampling_rate"] = rate
        return self

    def service_name(self, name: str) -> Self:
        """See :attr:`TelemetryConfig.service_name`."""
        self._values["service_name"] = name
        return self

    def json_logs(self, enabled: bool = True) -> Self:
        """See :attr:`TelemetryConfig.json_logs`."""
        self._values["json_logs"] = enabled
        return self

    def metric_interval(self, seconds: float) -> Self:
        """See :attr:`TelemetryConfig.metric_interval`."""
        self._values["metric_interval"] = seconds
        return self

    def build(self) -> TelemetryConfig:
        """The config.

        Raises:
            BuildError: a value is out of range.
        """
        return TelemetryConfig(**self._values)


class TelemetryHandle:
    """What :meth:`TelemetryConfig.init` installed."""

    def __init__(
        self,
        tracer_provider: Any,
        meter_provider: Any,
        previous_logging: dict[str, Any] | None = None,
    ) -> None:
        # Any: OpenTelemetry SDK types, absent without the otel extra.
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._previous_logging = previous_logging
        self._closed = False

    @property
    def otel(self) -> bool:
        """Whether OpenTelemetry providers were installed."""
        return self._tracer_provider is not None

    def force_flush(self) -> None:
        """Export what is buffered now (blocks until done or timed out)."""
        if self._tracer_provider is not None:
            self._tracer_provider.force_flush()
        if self._meter_provider is not None:
            self._meter_provider.force_flush()

    def shutdown(self) -> None:
        """Flush and stop the exporters, and put logging back as it was before ``init()``
        (kova's quiet default, or the structlog configuration the application had).
        Idempotent. It blocks while exporting (call it at exit, or from a thread)."""
        if self._closed:
            return
        self._closed = True
        if self._tracer_provider is not None:
            from .otel import uninstrument

            uninstrument()
            self._tracer_provider.shutdown()
        if self._meter_provider is not None:
            self._meter_provider.shutdown()
        if self._previous_logging is None:
            structlog.reset_defaults()
        else:
            structlog.configure(**self._previous_logging)


def _configure_structlog(config: TelemetryConfig, *, otel: bool) -> None:
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if otel:
        processors.append(_add_trace_ids)
    processors.append(
        structlog.processors.JSONRenderer()
        if config.json_logs
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(config.log_level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def _add_trace_ids(_logger: object, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Put the current span's trace and span ids on a log line (OpenTelemetry installed)."""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event["trace_id"] = format(context.trace_id, "032x")
        event["span_id"] = format(context.span_id, "016x")
    return event


def _install_otel(config: TelemetryConfig, exporter: ExporterConfig) -> tuple[Any, Any]:
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    except ImportError as exc:
        raise BuildError("an exporter needs OpenTelemetry: pip install 'kova-sdk[otel]'") from exc
    if type(trace.get_tracer_provider()).__name__ != "ProxyTracerProvider":
        raise BuildError(
            "an OpenTelemetry tracer provider is already installed; send kova's spans to it "
            "with kova.telemetry.otel.instrument() (use TelemetryConfig for logs only)"
        )
    span_exporter, metric_exporter = _otlp_exporters(exporter)
    resource = Resource.create({"service.name": config.service_name})
    tracer_provider = TracerProvider(
        resource=resource, sampler=ParentBased(TraceIdRatioBased(config.sampling_rate))
    )
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    reader = PeriodicExportingMetricReader(
        metric_exporter, export_interval_millis=config.metric_interval * 1000.0
    )
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    from .otel import instrument

    instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return tracer_provider, meter_provider


def _otlp_exporters(exporter: ExporterConfig) -> tuple[Any, Any]:
    headers = dict(exporter.headers)
    if exporter.protocol is OtlpProtocol.HTTP:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise BuildError(
                "OTLP/HTTP needs pip install opentelemetry-exporter-otlp-proto-http"
            ) from exc
        return (
            OTLPSpanExporter(endpoint=f"{exporter.endpoint}/v1/traces", headers=headers),
            OTLPMetricExporter(endpoint=f"{exporter.endpoint}/v1/metrics", headers=headers),
        )
    try:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[import-not-found]
            OTLPMetricExporter as GrpcMetricExporter,
        )
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
            OTLPSpanExporter as GrpcSpanExporter,
        )
    except ImportError as exc:
        raise BuildError(
            "OTLP/gRPC needs pip install opentelemetry-exporter-otlp-proto-grpc"
        ) from exc
    return (
        GrpcSpanExporter(endpoint=exporter.endpoint, headers=headers),
        GrpcMetricExporter(endpoint=exporter.endpoint, headers=headers),
    )
