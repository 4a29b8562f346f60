"""HttpTransport builds kova's own client's requests without ``client.build_request`` (which
parses the same URL again for every request): the request must be the one build_request
would make, byte for byte, and a caller-owned client's requests still go through
build_request, with everything that client adds."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from kova import InvalidRequest, KovaConnectionError, Secret, SecretHeaders
from kova._json import dumps_bytes
from kova.providers import HeaderAuth, bearer_auth, header_auth
from kova.providers._http import _MAX_CACHED_URLS, HttpTransport

if TYPE_CHECKING:
    from collections.abc import Mapping

_JSON = {"content-type": "application/json"}


def _ok(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json={})


def _expected(
    client: httpx2.AsyncClient,
    transport: HttpTransport,
    method: str,
    path: str,
    body: Any,
    params: Mapping[str, str] | None,
    headers: Mapping[str, str] | None,
) -> httpx2.Request:
    content = None if body is None else dumps_bytes(body)
    if body is not None:
        headers = {**(headers or {}), **({} if headers and "content-type" in headers else _JSON)}
    request = client.build_request(
        method, transport.url(path), content=content, params=params, headers=headers
    )
    if transport.auth is not None:  # as client.send's auth flow completes it
        next(transport.auth.auth_flow(request))
    return request


def _same(built: httpx2.Request, expected: httpx2.Request) -> None:
    assert built.method == expected.method
    assert str(built.url) == str(expected.url)
    assert built.headers.raw == expected.headers.raw
    assert built.content == expected.content
    assert built.extensions == expected.extensions


CASES = [
    ("POST", "/v1/messages", {"model": "m", "messages": [{"role": "user"}]}, None, None),
    ("POST", "v1/chat/completions", {"a": "é ☃"}, None, {"x-extra": "1"}),
    ("POST", "/v1/x", {"a": 1}, {"api-version": "2024-10-21"}, {"Content-Type": "text/json"}),
    ("POST", "/models/m:streamGenerateContent", {}, {"alt": "sse", "key": "k"}, None),
    ("GET", "/v1/models", None, None, None),
    ("GET", "/v1/models", None, {"limit": "5"}, {"accept": "application/json"}),
    ("POST", "http://elsewhere.test:8080/abs/path?q=1", {"b": [1, 2]}, None, None),
]


AUTHS = [None, bearer_auth(Secret("sk-b")), header_auth("x-api-key", Secret("sk-h"))]


@pytest.mark.parametrize("auth", AUTHS, ids=["no auth", "bearer", "x-api-key"])
@pytest.mark.parametrize("secret", [False, True], ids=["dict", "SecretHeaders"])
@pytest.mark.parametrize(("method", "path", "body", "params", "headers"), CASES)
async def test_kova_s_own_client_builds_what_build_request_would(
    method: str,
    path: str,
    body: Any,
    params: Mapping[str, str] | None,
    headers: Mapping[str, str] | None,
    secret: bool,
    auth: HeaderAuth | None,
) -> None:
    # A codec's headers are SecretHeaders: from the second request of a path on, its head
    # is made from the first one's (HttpTransport._build), with its own Content-Length and
    # a HeaderAuth's header (the request is then sent with AS_BUILT, not the auth flow).
    if secret:
        headers = SecretHeaders(headers)
    transport = HttpTransport(
        auth=auth,
        provider="test",
        base_url="http://api.test:1234/base/",
        transport=httpx2.MockTransport(_ok),
        headers={"x-api-key": "sk-test", "anthropic-version": "2023-06-01"},
        timeout=12.5,
        connect_timeout=3.0,
    )
    async with transport.open():
        client = transport._client
        assert client is not None
        for round in range(3):  # then from the cached URL (and head)
            if body is not None:
                body = {**body, "round": "x" * round}  # another Content-Length each time
            built = transport._build(method, path, json_body=body, params=params, headers=headers)
            _same(built, _expected(client, transport, method, path, body, params, headers))
        # The head kept (made requests matched httpx2's own: see HttpTransport._keep_head).
        kept = body is not None and params is None and (secret or headers is None)
        assert len(transport._heads) == kept
        # A cookie the server set goes back as build_request would send it.
        client.cookies.set("__cf_bm", "abc", domain=built.url.host)
        built = transport._build(method, path, json_body=body, params=params, headers=headers)
        assert built.headers["cookie"] == "__cf_bm=abc"
        _same(built, _expected(client, transport, method, path, body, params, headers))


async def test_a_server_s_cookie_is_sent_back_on_the_next_request() -> None:
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("cookie"))
        return httpx2.Response(200, json={}, headers={"set-cookie": "session=s1; Path=/"})

    transport = HttpTransport(
        provider="test", base_url="http://api.test/", transport=httpx2.MockTransport(handler)
    )
    async with transport.open():
        await transport.request_json("POST", "/v1/x", json_body={})
        await transport.request_json("POST", "/v1/x", json_body={})
    assert seen == [None, "session=s1"]


async def test_a_caller_owned_client_s_requests_carry_what_that_client_adds() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json={})

    client = httpx2.AsyncClient(
        transport=httpx2.MockTransport(handler),
        headers={"x-gateway": "g1"},
        params={"tenant": "t1"},
        timeout=7.0,
    )
    transport = HttpTransport(provider="test", base_url="http://api.test/", client=client)
    async with client, transport.open():
        await transport.request_json("POST", "/v1/x", json_body={}, params={"v": "2"})
    (request,) = seen
    assert request.headers["x-gateway"] == "g1"
    assert request.url.params["tenant"] == "t1"
    assert request.url.params["v"] == "2"
    assert request.extensions["timeout"]["read"] == 7.0


async def test_a_request_copied_from_the_kept_head_is_sent_whole() -> None:
    # What the server receives: the same head as the first request's, and each body with
    # its own length (the head kept is never changed by a request copied from it).
    seen: list[tuple[list[tuple[bytes, bytes]], bytes]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append((request.headers.raw, request.content))
        return httpx2.Response(200, json={})

    headers = SecretHeaders({"anthropic-version": "2023-06-01"})
    transport = HttpTransport(
        provider="test", base_url="http://api.test/", transport=httpx2.MockTransport(handler)
    )
    async with transport.open():
        for body in ({"a": 1}, {"a": "longer"}, {"a": 1}):
            await transport.request_json("POST", "/v1/x", json_body=body, headers=headers)
    assert [content for _, content in seen] == [b'{"a":1}', b'{"a":"longer"}', b'{"a":1}']
    lengths = [dict(raw)[b"Content-Length"] for raw, _ in seen]
    assert lengths == [b"7", b"14", b"7"]
    assert seen[0][0] == seen[2][0]
    assert [name for name, _ in seen[0][0]] == [name for name, _ in seen[1][0]]


async def test_the_url_cache_is_bounded() -> None:
    transport = HttpTransport(
        provider="test", base_url="http://api.test/", transport=httpx2.MockTransport(_ok)
    )
    async with transport.open():
        for i in range(_MAX_CACHED_URLS + 10):
            request = transport._build(
                "GET", f"/models/m{i}", json_body=None, params=None, headers=None
            )
            assert request.url.path == f"/models/m{i}"
            request = transport._build(
                "POST", f"/models/m{i}", json_body={}, params=None, headers=None
            )
            assert request.url.path == f"/models/m{i}"
        assert len(transport._urls) <= _MAX_CACHED_URLS
        assert len(transport._heads) <= _MAX_CACHED_URLS


@pytest.mark.parametrize("injected", [False, True])
@pytest.mark.parametrize("path", ["http://[::1/x", "/v1beta/models/gemini-\ud83d:generateContent"])
async def test_a_path_that_is_no_url_fails_that_request_only(path: str, injected: bool) -> None:
    # httpx2 refuses it as build_request would (InvalidURL, or UnicodeEncodeError for half an
    # emoji a caller's model name carried): kova says so as the request's error, and the
    # transport serves the next request.
    mock = httpx2.MockTransport(_ok)
    transport = (
        HttpTransport(
            provider="test", base_url="http://api.test/", client=httpx2.AsyncClient(transport=mock)
        )
        if injected
        else HttpTransport(provider="test", base_url="http://api.test/", transport=mock)
    )
    async with transport.open():
        client = transport._client
        assert client is not None
        with pytest.raises((httpx2.InvalidURL, UnicodeError)) as theirs:
            client.build_request("GET", path)
        with pytest.raises(InvalidRequest) as ours:
            await transport.request_json("GET", path)
        assert str(theirs.value) in str(ours.value)
        assert repr(path) in str(ours.value)
        assert await transport.request_json("GET", "/v1/models") == {}


async def test_a_header_auth_changed_between_requests_sends_its_new_header() -> None:
    # The auth header is kept in the head with the request's other headers; a HeaderAuth
    # given another key (rotated in place) makes a new head, never the old key.
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("authorization"))
        return httpx2.Response(200, json={})

    auth = bearer_auth(Secret("sk-old"))
    transport = HttpTransport(
        provider="test",
        base_url="http://api.test/",
        transport=httpx2.MockTransport(handler),
        auth=auth,
    )
    headers = SecretHeaders({"anthropic-version": "2023-06-01"})
    async with transport.open():
        for key in ("sk-old", "sk-old", "sk-new", "sk-new"):
            auth.secret = Secret(key)
            await transport.request_json("POST", "/v1/x", json_body={}, headers=headers)
        assert len(transport._heads) == 2
    assert seen == ["Bearer sk-old", "Bearer sk-old", "Bearer sk-new", "Bearer sk-new"]
    assert not transport._heads  # the auth headers they hold go with the client


async def test_kova_s_own_client_sends_as_client_send_would(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # HttpTransport._send skips client.send's layers on kova's own client: what they do
    # for kova still happens (httpx2's log line, the request on a transport error, the
    # URL's user:password as basic auth when there is no other auth).
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/down":
            raise httpx2.ConnectError("refused")
        seen.append(request.headers.get("authorization"))
        return httpx2.Response(200, json={})

    mock = httpx2.MockTransport(handler)
    transport = HttpTransport(provider="test", base_url="http://api.test/", transport=mock)
    async with transport.open():
        with caplog.at_level(logging.INFO, logger="httpx2"):
            await transport.request_json("POST", "/v1/x", json_body={})
        with pytest.raises(KovaConnectionError) as failed:
            await transport.request_json("POST", "/down", json_body={})
    assert [record.getMessage() for record in caplog.records] == [
        'HTTP Request: POST http://api.test/v1/x "HTTP/1.1 200 OK"'
    ]
    cause = failed.value.__cause__
    assert isinstance(cause, httpx2.ConnectError)
    assert cause.request.url.path == "/down"
    userinfo = HttpTransport(provider="test", base_url="http://u:p@api.test/", transport=mock)
    async with userinfo.open():
        await userinfo.request_json("POST", "/v1/x", json_body={})
    assert seen == [None, "Basic dTpw"]
