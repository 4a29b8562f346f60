"""AWS credentials and SigV4 signing as an ``httpx2.Auth`` flow, on botocore.

botocore is a library here, not the HTTP client: its credential chain finds the keys, its
:class:`botocore.auth.SigV4Auth` computes the signature, and the request goes out on kova's
own transport. The flow has ``requires_request_body = True``, so it signs the exact bytes that
are sent (the JSON body is serialized once, by the transport).

What is signed: ``host``, ``content-type``, ``x-amz-date``, ``x-amz-security-token`` (temporary
credentials) and any other header the request carries except those a proxy or the HTTP stack
may rewrite (``accept*``, ``content-length``, ``user-agent``, hop-by-hop headers: botocore's
own exclusion list). The path is signed double-encoded, as SigV4 wants for every service but
S3: the model id's ``%3A`` is ``%253A`` in the canonical request (botocore does this).

Credentials are resolved once. Explicit keys and environment variables need no I/O and are
read when the provider is built; botocore's chain (shared files, SSO, ``credential_process``,
container and instance metadata) may block on files, processes or the network, so
:func:`resolve_chain` runs in a worker thread (see :class:`~.BedrockProvider`).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import httpx2

from ..._errors import ProviderAuthError, ProviderError
from ..._record import Record
from ..._secret import Secret
from ._convert import PROVIDER

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Mapping

__all__ = [
    "SIGNING_NAME",
    "AwsCredentials",
    "SigV4Auth",
    "environment_credentials",
    "resolve_chain",
]

SIGNING_NAME = "bedrock"
"""The SigV4 service name of both Bedrock hosts (``bedrock-runtime`` is only the host prefix)."""

SIGV4_TIMESTAMP = "%Y%m%dT%H%M%SZ"

_UNSIGNED = frozenset(
    {
        # botocore's SIGNED_HEADERS_BLACKLIST ...
        "baggage",
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "traceparent",
        "tracestate",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amzn-trace-id",
        # ... and what httpx2 adds or may rewrite (botocore sends none of these before signing).
        "accept",
        "accept-encoding",
        "content-length",
        "authorization",
    }
)


class AwsCredentials(Record):
    """AWS credentials, every part masked (:class:`~kova.Secret`)."""

    access_key_id: Secret
    secret_access_key: Secret
    session_token: Secret | None = None
    source: str = "explicit"
    """Where they came from (botocore's method name: ``env``, ``shared-credentials-file``,
    ``sso``, ``iam-role``, ...), for messages."""

    @property
    def secrets(self) -> tuple[Secret, ...]:
        """Every secret part (to mask in error messages a server echoes)."""
        parts = (self.access_key_id, self.secret_access_key, self.session_token)
        return tuple(part for part in parts if part is not None)


def environment_credentials(environ: Mapping[str, str] | None = None) -> AwsCredentials | None:
    """``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN`` (botocore's first
    source), read without botocore; ``None`` when unset."""
    env = os.environ if environ is None else environ
    key = env.get("AWS_ACCESS_KEY_ID")
    secret = env.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        return None
    token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN")
    return AwsCredentials(
        access_key_id=Secret(key),
        secret_access_key=Secret(secret),
        session_token=Secret.of(token),
        source="env",
    )


def resolve_chain(profile: str | None) -> AwsCredentials | None:
    """botocore's credential chain for ``profile`` (``None``: the default profile), frozen.

    Blocking: it may read files, run a ``credential_process``, refresh an SSO token or ask the
    container or instance metadata service. Run it in a worker thread.

    Returns:
        The credentials, or ``None`` when the chain found none.

    Raises:
        ProviderAuthError: a source failed (unknown profile, expired SSO session, a failing
            credential process, ...).
    """
    import botocore.exceptions
    import botocore.session

    try:
        session = botocore.session.Session(profile=profile)
        found = session.get_credentials()
        if found is None:
            return None
        frozen = found.get_frozen_credentials()
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise ProviderError.credential_failure(
            f"AWS credentials could not be resolved: {exc}", provider=PROVIDER
        ) from exc
    if not frozen.access_key or not frozen.secret_key:
        return None
    return AwsCredentials(
        access_key_id=Secret(frozen.access_key),
        secret_access_key=Secret(frozen.secret_key),
        session_token=Secret.of(frozen.token),
        source=str(getattr(found, "method", "botocore")),
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SigV4Auth(httpx2.Auth):
    """Signs each request with AWS Signature Version 4 (botocore's signer), as sent.

    Args:
        credentials: the keys; ``None`` until resolved (:attr:`credentials` is set once).
        region: the signing region.
        service: the signing name (``bedrock`` for both Bedrock hosts).
        clock: the signing time (UTC); tests pin it to reproduce the wire notes' vector.
    """

    requires_request_body = True

    __slots__ = ("_clock", "credentials", "region", "service")

    def __init__(
        self,
        credentials: AwsCredentials | None,
        *,
        region: str,
        service: str = SIGNING_NAME,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.credentials = credentials
        self.region = region
        self.service = service
        self._clock = clock

    @property
    def secrets(self) -> tuple[Secret, ...]:
        """The secrets this flow holds (masked in echoed error messages)."""
        return self.credentials.secrets if self.credentials is not None else ()

    def __repr__(self) -> str:
        return f"SigV4Auth(region={self.region!r}, service={self.service!r})"

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        self.sign(request)
        yield request

    def sign(self, request: httpx2.Request) -> None:
        """Add ``x-amz-date`` (and the session token) and ``authorization`` to ``request``.

        Raises:
            ProviderAuthError: no credentials have been resolved.
        """
        credentials = self.credentials
        if credentials is None:
            raise ProviderAuthError("no AWS credentials to sign with", provider=PROVIDER)
        from botocore.auth import SigV4Auth as BotocoreSigner
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import ReadOnlyCredentials

        timestamp = self._clock().strftime(SIGV4_TIMESTAMP)
        headers = request.headers
        for name in ("authorization", "x-amz-date", "x-amz-security-token"):
            if name in headers:
                del headers[name]
        headers["x-amz-date"] = timestamp
        token = credentials.session_token.reveal() if credentials.session_token else None
        if token:
            headers["x-amz-security-token"] = token
        signed = {name: value for name, value in headers.items() if name not in _UNSIGNED}
        url = request.url
        path = url.raw_path.partition(b"?")[0].decode("ascii")
        aws_request = AWSRequest(
            method=request.method,
            # The path as it goes on the wire (percent-encoded once); botocore encodes it
            # again for the canonical request.
            url=f"{url.scheme}://{url.netloc.decode('ascii')}{path}",
            headers=signed,
            data=request.content,
            # The query canonicalized from its decoded pairs (each part encoded with only
            # ``-_.~`` safe), whatever encoding the HTTP client chose for the wire.
            params=list(url.params.multi_items()),
        )
        aws_request.context["timestamp"] = timestamp
        signer = BotocoreSigner(
            ReadOnlyCredentials(
                credentials.access_key_id.reveal(), credentials.secret_access_key.reveal(), token
            ),
            self.service,
            self.region,
        )
        canonical = signer.canonical_request(aws_request)
        signature = signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)
        signed_headers = signer.signed_headers(signer.headers_to_sign(aws_request))
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={signer.scope(aws_request)}, "
            f"SignedHeaders={signed_headers}, Signature={signature}"
        )
