"""The Bedrock provider: config + codec + a SigV4 (or bearer) auth flow on the one HTTP
provider."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from ..._errors import InvalidRequest, ProviderAuthError, ProviderError
from .._auth import bearer_auth
from .._codec import heuristic_tokens
from .._keyed import KeyedHttpProvider
from ._auth import AwsCredentials, SigV4Auth, environment_credentials, resolve_chain
from ._codec import BedrockCodec
from ._convert import PROVIDER
from ._framing import EventFrame

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import httpx2

    from ..._models import ChatRequest
    from ._config import BedrockConfig

__all__ = ["BedrockProvider"]


class BedrockProvider(KeyedHttpProvider[EventFrame]):
    """Amazon Bedrock's Converse API as a kova :class:`~kova.providers.Provider`.

    Requests go out on kova's own HTTP transport under trio, signed with botocore's SigV4
    signer (or with a Bedrock API key as ``Authorization: Bearer``); streams are framed by
    botocore's event-stream parser. No thread carries a request or a stream.

    Args:
        config: region, model, credentials and request defaults.
        client: a caller-owned ``httpx2.AsyncClient`` to send requests with (kova never
            closes it).
        transport: an httpx2 transport for the client kova creates (tests). Pass at most one
            of ``client``/``transport``.

    Credentials are resolved once, in the order :class:`BedrockConfig` lists. A Bedrock API
    key (given, or ``AWS_BEARER_TOKEN_BEDROCK`` when the config was built), explicit keys and
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` are read here, at construction.
    Otherwise botocore's chain (the named profile, shared files, SSO, ``credential_process``,
    container, instance metadata) runs once, in a worker thread, when the provider is first
    opened; cancelling that ``open()`` abandons the thread. When nothing
    is found, every call raises :class:`~kova.ProviderAuthError` before anything is sent.
    Temporary credentials are not refreshed: re-construct the provider to rotate them.

    Error statuses are classified by their ``x-amzn-ErrorType`` (``ThrottlingException`` is
    :class:`~kova.RateLimited`, ...). An exception message inside a ConverseStream
    (``throttlingException``, ``modelStreamErrorException``, ...) raises its classified error
    after the events before it, retryable only while no content has reached the consumer; a
    corrupted event-stream message (bad CRC, truncated) raises :class:`~kova.InvalidResponse`.
    :meth:`list_models` lists the foundation models (ListFoundationModels), then the inference
    profiles (ListInferenceProfiles, ``object="inference_profile"``), from the control plane.

    Use it inside ``async with provider.open():`` (an agent opens it for you). Calls are safe
    from many tasks at once.
    """

    config: BedrockConfig

    def __init__(
        self,
        config: BedrockConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self._auth_error: ProviderAuthError | None = None
        self._resolving: trio.Event | None = None
        self._sigv4: SigV4Auth | None = None
        self._exact_count = config.exact_token_count
        # Models CountTokens answered "doesn't support counting tokens" for: not asked again.
        self._uncountable: set[str] = set()
        auth: httpx2.Auth
        token = config.api_key
        if token is not None:
            auth = bearer_auth(token)
        else:
            self._sigv4 = SigV4Auth(self._initial_credentials(), region=config.region)
            auth = self._sigv4
        super().__init__(
            BedrockCodec(config),
            base_url=config.runtime_url,
            auth=auth,
            client=client,
            transport=transport,
            **config.http_options(),
        )

    def _initial_credentials(self) -> AwsCredentials | None:
        config = self.config
        if config.access_key_id is not None and config.secret_access_key is not None:
            return AwsCredentials(
                access_key_id=config.access_key_id,
                secret_access_key=config.secret_access_key,
                session_token=config.session_token,
            )
        if config.profile is None:
            return environment_credentials()
        return None  # the named profile: botocore's chain, in a worker thread on open()

    @property
    def credentials_source(self) -> str | None:
        """Where the credentials came from (``"api_key"``, ``"explicit"``, ``"env"``,
        ``"shared-credentials-file"``, ``"sso"``, ...), ``None`` while unresolved."""
        if self._sigv4 is None:
            return "api_key"
        credentials = self._sigv4.credentials
        return credentials.source if credentials is not None else None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Hold the HTTP connection pool for the block; the first ``open()`` resolves
        botocore's credential chain if the credentials were not given (see the class
        docstring). Cancelling it during that resolution abandons the worker thread."""
        async with super().open():
            await self._resolve()
            yield

    async def _resolve(self) -> None:
        sigv4 = self._sigv4
        while sigv4 is not None and sigv4.credentials is None and self._auth_error is None:
            if self._resolving is not None:
                # Another open() is resolving: wait for it (and retry if it was cancelled).
                await self._resolving.wait()
                continue
            done = self._resolving = trio.Event()
            try:
                credentials = await trio.to_thread.run_sync(
                    resolve_chain, self.config.profile, abandon_on_cancel=True
                )
                if credentials is None:
                    self._auth_error = ProviderError.credential_failure(
                        "no AWS credentials found (explicit keys, profile, environment, shared "
                        "files, SSO, credential_process, container, instance metadata) and no "
                        "Bedrock API key (AWS_BEARER_TOKEN_BEDROCK)",
                        provider=PROVIDER,
                    )
                else:
                    sigv4.credentials = credentials
            except ProviderAuthError as exc:
                self._auth_error = exc
            finally:
                self._resolving = None
                done.set()

    def _require_key(self) -> None:
        """Before every call: the credentials, or :class:`~kova.ProviderAuthError` (none
        found, or not resolved yet: outside ``async with provider.open()``)."""
        if self._auth_error is not None:
            raise self._auth_error
        if self._sigv4 is not None and self._sigv4.credentials is None:
            raise ProviderError.credential_failure(
                "AWS credentials are not resolved yet: call inside `async with provider.open()`",
                provider=PROVIDER,
            )

    async def count_tokens(self, request: ChatRequest) -> int:
        """Prompt tokens: exact from the CountTokens API where the model supports it; the
        offline heuristic (:func:`~kova.providers.heuristic_count_tokens`) for models it
        does not (CountTokens answers those with a ``ValidationException`` saying so; the
        provider then stops asking for that model) or when ``exact_token_count`` is off.

        Raises:
            InvalidRequest: any other ``ValidationException`` (e.g. "Input is too long for
                requested model"): the request itself is wrong, and an estimate would hide it.
            ProviderError: other errors, classified as for :meth:`chat_completion`.
        """
        if not self._exact_count:
            return heuristic_tokens(request)
        model_id = request.config.model or self.config.model_id
        if model_id in self._uncountable:
            return heuristic_tokens(request)
        try:
            return await super().count_tokens(request)
        except InvalidRequest as exc:
            if not _counting_unsupported(exc):
                raise
            self._uncountable.add(model_id)
            return heuristic_tokens(request)


def _counting_unsupported(error: InvalidRequest) -> bool:
    # "The provided model doesn't support counting tokens." (the ValidationException AWS
    # sends for a model CountTokens does not cover); other validation errors say otherwise.
    message = str(error).lower()
    return "support" in message and "token" in message


if TYPE_CHECKING:
    from .._base import Provider

    _check: type[Provider] = BedrockProvider
