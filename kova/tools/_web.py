"""``fetch_text`` (the SSRF-guarded HTTP helper) and the ``fetch_webpage`` tool.

Every hop of a fetch (the URL, then each redirect target) goes through the same steps:

1. The URL is normalized and checked against the policy: scheme (``https`` only unless the
   policy allows ``http``), then the denied and allowed rules, matched against its parsed
   parts (``_urls.py``). The normalized URL is the one fetched.
2. The host is turned into addresses once: parsed as an IP literal in any form a resolver
   accepts (see ``_ssrf.py``), or resolved by the (injectable) resolver. *Every* address is
   checked; one bad address refuses the host, so a name that resolves to a public and a
   private address cannot be used to reach the private one.
3. The connection is pinned to the first checked address: a custom httpcore2 network backend
   connects there whatever the URL says, while TLS still sends SNI for, and verifies the
   certificate of, the URL's host name. A second DNS lookup (rebinding: public at check time,
   loopback at connect time) therefore never happens.
4. Redirects are not followed by httpx; the ``Location`` goes back to step 1, at most
   ``max_redirects`` times.

The body is read up to ``max_bytes`` (the rest is never downloaded), and the whole fetch runs
under one ``timeout``. ``fetch_webpage`` converts HTML with kova's own linear converter
(``_html.py``) in a worker thread, within what is left of the same ``timeout`` and within
``max_chars``, and stops it when the call is cancelled.
"""

from __future__ import annotations

import functools
import ipaddress
import urllib.parse
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING, ClassVar, TypeAlias

import attrs
import trio

from .._models import ToolAnnotations, ToolResult
from .._record import Record, set_field
from ._errors import WebFetchError
from ._ssrf import address_problem, parse_ip_host
from ._urls import normalize_url, parse_rule

if TYPE_CHECKING:
    import ssl
    from collections.abc import Awaitable, Callable, Iterable, Sequence

    import httpcore2

    from .._models import JSONObject
    from ._html import Converted
    from ._policy import WebPolicy
    from ._ssrf import IPAddress

__all__ = ["FetchWebpage", "FetchedText", "Resolver", "WebFetchError", "fetch_text"]

Resolver: TypeAlias = "Callable[[str, int], Awaitable[Sequence[str]]]"
"""``async (host, port) -> addresses``: how host names become IP addresses (strings)."""

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml")


class FetchedText(Record):
    """What :func:`fetch_text` got."""

    url: str
    """The final URL, after redirects."""
    status: int
    """The HTTP status of the final response (not necessarily 2xx)."""
    content_type: str
    """The media type, lowercased, without parameters (``text/html``)."""
    text: str
    """The body, decoded (the response's charset, else UTF-8 with replacement)."""
    truncated: bool
    """The body or the text was cut at ``max_bytes`` or ``max_chars``."""


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The operating system's resolver (``getaddrinfo``), run by trio in a worker thread."""
    infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _refuse(url: str, why: str) -> WebFetchError:
    return WebFetchError(f"refused {url}: {why}", url=url)


def _check_url(url: str, policy: WebPolicy) -> tuple[str, str, int, IPAddress | None]:
    """The normalized URL to fetch, its host, port and literal address (if the host is one),
    for a URL the policy allows (see ``_urls.py`` for how rules are matched)."""
    allowed = ("https",) if policy.https_only else ("https", "http")
    if url.partition(":")[0].strip().lower() not in allowed:
        raise _refuse(url, f"only {' and '.join(allowed)} URLs may be fetched")
    ruled = bool(policy.allowed_urls or policy.denied_urls)
    try:
        normalized = normalize_url(url, strict_path=ruled)
    except ValueError as exc:
        raise _refuse(url, str(exc)) from exc
    if normalized.scheme not in allowed:
        raise _refuse(url, f"only {' and '.join(allowed)} URLs may be fetched")
    for text in policy.denied_urls:
        if parse_rule(text, deny=True).matches(normalized):
            raise _refuse(url, f"it matches the denied pattern {text!r}")
    if policy.allowed_urls and not any(
        parse_rule(text, deny=False).matches(normalized) for text in policy.allowed_urls
    ):
        raise _refuse(url, "it matches none of the allowed URL patterns")
    literal = parse_ip_host(normalized.host)
    if literal is not None:
        problem = address_problem(literal, allow_private=policy.allow_private_hosts)
        if problem is not None:
            raise _refuse(url, problem)
    return normalized.text, normalized.host, normalized.port, literal


async def _pick_address(
    url: str, host: str, port: int, policy: WebPolicy, resolver: Resolver
) -> IPAddress:
    """Resolve ``host`` once and check every address; the first one is used."""
    try:
        answers = await resolver(host, port)
    except OSError as exc:
        raise WebFetchError(f"could not resolve {host!r}: {exc}", url=url) from exc
    addresses: list[IPAddress] = []
    for answer in answers:
        try:
            address = ipaddress.ip_address(answer)
        except ValueError as exc:
            raise _refuse(url, f"the resolver answered {answer!r}, not an address") from exc
        problem = address_problem(address, allow_private=policy.allow_private_hosts)
        if problem is not None:
            raise _refuse(url, f"{host} resolves to a refused address: {problem}")
        addresses.append(address)
    if not addresses:
        raise WebFetchError(f"could not resolve {host!r}: no addresses", url=url)
    return addresses[0]


def _pinned_backend(
    host: str, address: IPAddress, inner: httpcore2.AsyncNetworkBackend
) -> httpcore2.AsyncNetworkBackend:
    import httpcore2

    class PinnedBackend(httpcore2.AsyncNetworkBackend):
        """Connects to the checked address, whatever host the URL names."""

        def __init__(
            self, host: str, address: IPAddress, inner: httpcore2.AsyncNetworkBackend
        ) -> None:
            self._host = host.encode("idna").decode("ascii").lower() if host else host
            self._address = address
            self._inner = inner

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
            local_address: str | None = None,
            socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
        ) -> httpcore2.AsyncNetworkStream:
            if host.lower().strip("[]") not in (self._host, str(self._address)):
                raise httpcore2.ConnectError(f"pinned to {self._host}, asked for {host}")
            return await self._inner.connect_tcp(
                str(self._address),
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            )

        async def connect_unix_socket(
            self,
            path: str,
            timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
            socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
        ) -> httpcore2.AsyncNetworkStream:
            raise httpcore2.ConnectError("unix sockets are not allowed")

        async def sleep(self, seconds: float) -> None:
            await trio.sleep(seconds)

    return PinnedBackend(host, address, inner)


class _TransportFailed(Exception):
    """An httpcore2 failure (mapped to :class:`WebFetchError` where the URL is known)."""


async def _get_once(
    url: str,
    host: str,
    address: IPAddress,
    policy: WebPolicy,
    inner: httpcore2.AsyncNetworkBackend | None,
    ssl_context: ssl.SSLContext,
) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
    """One GET over a connection pinned to ``address``: status, headers, body (at most
    ``max_bytes``) and whether it was cut.

    httpcore2 directly rather than an httpx2 client: httpx2's transport cannot take a network
    backend, and reading the body through httpx2's generator chain and stopping at the cap
    would leave its inner async generators to the garbage collector. ``identity`` encoding is
    asked for, so the cap counts the bytes that arrive (no decompression bomb).
    """
    import httpcore2
    import httpx2

    parsed = httpx2.URL(url)
    target = httpcore2.URL(
        scheme=parsed.raw_scheme, host=parsed.raw_host, port=parsed.port, target=parsed.raw_path
    )
    headers = [
        (b"User-Agent", policy.user_agent.encode("latin-1", errors="replace")),
        (b"Accept", b"text/html, text/*;q=0.9, */*;q=0.5"),
        (b"Accept-Encoding", b"identity"),
    ]
    backend = _pinned_backend(host, address, inner or httpcore2.TrioBackend())
    errors = (httpcore2.TimeoutException, httpcore2.NetworkError, httpcore2.ProtocolError)
    try:
        async with (
            httpcore2.AsyncConnectionPool(
                ssl_context=ssl_context, max_connections=1, network_backend=backend
            ) as pool,
            pool.stream("GET", target, headers=headers) as response,
        ):
            body = bytearray()
            truncated = False
            if response.status not in _REDIRECTS:
                stream = response.stream
                assert isinstance(stream, AsyncIterable)
                chunks = aiter(stream)
                try:
                    async for chunk in chunks:
                        body += chunk
                        if len(body) > policy.max_bytes:
                            del body[policy.max_bytes :]
                            truncated = True
                            break
                finally:
                    closer = getattr(chunks, "aclose", None)
                    if closer is not None:
                        await closer()
            return response.status, list(response.headers), bytes(body), truncated
    except errors as exc:
        raise _TransportFailed(_failure_reason(exc)) from exc


def _failure_reason(exc: BaseException) -> str:
    """What went wrong, in words: httpcore2 wraps a TLS failure in a ``ConnectError`` whose
    own message is empty, so the reason is looked for in the errors it was raised from."""
    import ssl

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            detail = current.verify_message or current.reason or str(current)
            return f"TLS certificate verification failed: {detail}"
        if isinstance(current, ssl.SSLError):
            return f"TLS failed: {current.reason or current}"
        current = current.__cause__ or current.__context__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _charset(content_type: str) -> str | None:
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"') or None
    return None


async def _fetch(
    url: str,
    policy: WebPolicy,
    *,
    resolver: Resolver | None,
    network_backend: httpcore2.AsyncNetworkBackend | None,
    ssl_context: ssl.SSLContext | None,
) -> tuple[str, int, str, bytes, str | None, bool]:
    """Follow redirects; return the final URL, status, content type, body, charset, and
    whether the body was cut at ``max_bytes``."""
    import httpx2

    resolve = resolver or system_resolver
    context = ssl_context or httpx2.create_ssl_context()
    current = url
    for _hop in range(policy.max_redirects + 1):
        current, host, port, literal = _check_url(current, policy)
        address = literal or await _pick_address(current, host, port, policy, resolve)
        try:
            status, headers, body, truncated = await _get_once(
                current, host, address, policy, network_backend, context
            )
        except (_TransportFailed, httpx2.InvalidURL) as exc:
            raise WebFetchError(f"fetching {current} failed: {exc}", url=current) from exc
        location = _header(headers, b"location")
        if status in _REDIRECTS and location:
            current = urllib.parse.urljoin(current, location)
            continue
        media = _header(headers, b"content-type") or ""
        content_type = media.split(";", 1)[0].strip().lower()
        return current, status, content_type, body, _charset(media), truncated
    raise WebFetchError(f"more than {policy.max_redirects} redirects from {url}", url=current)


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name
        return body.decode("utf-8", errors="replace")


async def _get(
    url: str,
    policy: WebPolicy,
    *,
    resolver: Resolver | None = None,
    network_backend: httpcore2.AsyncNetworkBackend | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> FetchedText:
    """:func:`fetch_text` without the ``max_chars`` cut (HTML is converted first)."""
    with trio.move_on_after(policy.timeout) as deadline:
        final, status, content_type, body, charset, truncated = await _fetch(
            url,
            policy,
            resolver=resolver,
            network_backend=network_backend,
            ssl_context=ssl_context,
        )
    if deadline.cancelled_caught:
        raise WebFetchError(f"fetching {url} timed out after {policy.timeout:g} s", url=url)
    if not content_type.startswith(_TEXT_TYPES) and b"\0" in body[:8192]:
        kind = content_type or "unknown type"
        raise WebFetchError(f"{final} is binary content ({kind}), not text", url=final)
    return FetchedText(
        url=final,
        status=status,
        content_type=content_type,
        text=_decode(body, charset),
        truncated=truncated,
    )


async def fetch_text(
    url: str,
    policy: WebPolicy,
    *,
    resolver: Resolver | None = None,
    network_backend: httpcore2.AsyncNetworkBackend | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> FetchedText:
    """GET ``url`` under ``policy``'s SSRF guard and caps, and return its body as text.

    See the module docstring for the checks made on every hop. The text is the raw body
    decoded (no HTML conversion), at most ``policy.max_chars`` characters. Needs no extra.

    Args:
        url: an ``https`` URL (or ``http`` when ``policy.https_only`` is off).
        policy: what may be fetched and how much.
        resolver: turns a host name into addresses; defaults to the system's
            ``getaddrinfo``. Called once per hop.
        network_backend: the httpcore2 backend that opens the pinned connection (a test
            seam; defaults to httpcore2's trio backend). It is asked for the URL's host and
            port, and connects to the checked address instead.
        ssl_context: for TLS (defaults to httpx2's, verifying against the system's CAs).

    Returns:
        The final URL, status, content type, text and whether anything was cut. A non-2xx
        status is returned, not raised.

    Raises:
        WebFetchError: the URL, a redirect target or an address is refused by the policy;
            DNS, the connection or the protocol failed; too many redirects; the whole fetch
            took longer than ``policy.timeout``; or the body is binary.

    Cancellation: the connection is closed and nothing is returned.
    """
    page = await _get(
        url, policy, resolver=resolver, network_backend=network_backend, ssl_context=ssl_context
    )
    if len(page.text) > policy.max_chars:
        page = attrs.evolve(page, text=page.text[: policy.max_chars], truncated=True)
    return page


_HTML_TYPES = ("text/html", "application/xhtml+xml")


async def _convert(html: str, markdown: bool, policy: WebPolicy, seconds: float) -> Converted:
    """``html`` converted in a worker thread, within ``seconds`` and ``policy.max_chars``.

    The conversion is linear and checks a stop flag as it goes: when the time is up it
    returns what it has; when the call is cancelled, the flag is set on the way out, so the
    thread stops within a few hundred pieces of markup instead of running on abandoned.
    """
    import threading

    from ._html import convert_html

    stop = threading.Event()
    try:
        return await trio.to_thread.run_sync(
            functools.partial(
                convert_html,
                html,
                markdown=markdown,
                # A little past the cut, so the truncation note is still added.
                max_chars=policy.max_chars + 1,
                timeout=max(seconds, 0.0),
                stop=stop,
            ),
            abandon_on_cancel=True,
        )
    finally:
        stop.set()


class FetchWebpage(Record):
    """``fetch_webpage``: a page as markdown, plain text or HTML, under a :class:`WebPolicy`."""

    policy: WebPolicy
    resolver: Resolver | None
    """How host names are resolved (default: the system's resolver)."""
    network_backend: httpcore2.AsyncNetworkBackend | None
    """Opens the pinned connections (a test seam)."""

    def __init__(
        self,
        policy: WebPolicy,
        *,
        resolver: Resolver | None = None,
        network_backend: httpcore2.AsyncNetworkBackend | None = None,
    ) -> None:
        set_field(self, "policy", policy)
        set_field(self, "resolver", resolver)
        set_field(self, "network_backend", network_backend)

    name: ClassVar[str] = "fetch_webpage"
    description: ClassVar[str] = (
        "Fetch a public web page (https) and return its content as markdown (default), plain "
        "text or raw HTML. Private and internal addresses are refused; long pages are cut off "
        "with a note."
    )
    parameters: ClassVar[JSONObject] = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The page's URL."},
            "format": {"enum": ["markdown", "text", "html"], "description": "Output format."},
        },
        "required": ["url"],
        "additionalProperties": False,
    }
    annotations: ClassVar[ToolAnnotations] = ToolAnnotations(
        read_only=True, destructive=False, idempotent=True, open_world=True, title="Fetch web page"
    )

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Fetch and convert; refusals, failures and HTTP errors are error results."""
        url = arguments.get("url")
        if not isinstance(url, str) or not url:
            return ToolResult.error("'url' must be a non-empty string")
        wanted = arguments.get("format") or self.policy.default_format
        if wanted not in ("markdown", "text", "html"):
            return ToolResult.error("'format' must be 'markdown', 'text' or 'html'")
        # One time limit for the fetch and the conversion together.
        deadline = trio.current_time() + self.policy.timeout
        try:
            page = await _get(
                url, self.policy, resolver=self.resolver, network_backend=self.network_backend
            )
        except WebFetchError as exc:
            return ToolResult.error(str(exc))
        text = page.text
        notes = []
        if page.content_type in _HTML_TYPES and wanted != "html":
            remaining = deadline - trio.current_time()
            converted = await _convert(text, wanted == "markdown", self.policy, remaining)
            text = converted.text
            if converted.stopped == "time":
                notes.append(
                    f"[conversion stopped: the page took longer than the {self.policy.timeout:g} s "
                    "limit to convert; what was converted is above]"
                )
        if len(text) > self.policy.max_chars:
            text = text[: self.policy.max_chars]
            notes.append(f"[truncated at {self.policy.max_chars} characters]")
        elif page.truncated:
            notes.append(f"[truncated: the page is over {self.policy.max_bytes} bytes]")
        header = f"URL: {page.url}\nStatus: {page.status}\n\n"
        content = header + text + ("\n" + "\n".join(notes) if notes else "")
        if page.status >= 400:
            return ToolResult.error(content)
        return ToolResult(content=content)
