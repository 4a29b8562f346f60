"""The SSRF guard, ``fetch_text`` and ``fetch_webpage``, against loopback servers only."""

from __future__ import annotations

import contextlib
import ssl
from typing import TYPE_CHECKING, Any

import attrs
import httpcore2
import pytest
import trio

from kova.testing._http_server import FakeResponse, RecordedRequest, serve_http
from kova.tools import WebFetchError, WebPolicy, fetch_text
from kova.tools._ssrf import address_problem, parse_ip_host
from kova.tools._web import FetchWebpage

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Sequence
    from pathlib import Path

LOOPBACK = WebPolicy(allow_private_hosts=True, https_only=False)
PUBLIC_IP = "93.184.216.34"  # never connected to: the backend below goes to loopback


# -- the address matrix ---------------------------------------------------------------------

REFUSED_URLS = [
    "https://127.0.0.1/",
    "https://127.8.9.10/",
    "https://localhost/",
    "https://[::1]/",
    "https://[::ffff:127.0.0.1]/",
    "http://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://[::127.0.0.1]/",  # IPv4-compatible
    "https://[2002:7f00:1::]/",  # 6to4 around 127.0.0.1
    "https://[64:ff9b::7f00:1]/",  # NAT64 around 127.0.0.1
    "https://[64:ff9b::a00:1]/",  # NAT64 around 10.0.0.1
    "https://2130706433/",  # decimal 127.0.0.1
    "https://0177.0.0.1/",  # octal
    "https://0x7f.0.0.1/",  # hex
    "https://0x7f000001/",
    "https://127.1/",  # short form
    "https://0.0.0.0/",
    "https://0/",
    "https://[::]/",
    "https://10.0.0.1/",
    "https://172.16.5.4/",
    "https://192.168.1.1/",
    "https://100.64.0.1/",  # CGNAT
    "https://169.254.169.254/latest/meta-data/",
    "https://169.254.1.1/",
    "https://[fd00:ec2::254]/",
    "https://[fc00::1]/",
    "https://[fe80::1]/",
    "https://224.0.0.1/",
    "https://[ff02::1]/",
    "https://240.0.0.1/",
    "https://255.255.255.255/",
    "https://192.0.2.1/",
    "https://198.18.0.1/",
]


async def no_dns(host: str, port: int) -> Sequence[str]:
    raise AssertionError(f"no DNS lookup expected for {host}")


async def localhost_only(host: str, port: int) -> Sequence[str]:
    assert host == "localhost"
    return ["127.0.0.1", "::1"]


@pytest.mark.parametrize("url", REFUSED_URLS)
async def test_private_and_reserved_addresses_are_refused(url: str) -> None:
    policy = WebPolicy(https_only=False)
    with pytest.raises(WebFetchError, match=r"^refused ") as caught:
        await fetch_text(url, policy, resolver=localhost_only)
    assert caught.value.url == url


@pytest.mark.parametrize("address", ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254"])
def test_metadata_addresses_are_refused_even_when_private_hosts_are_allowed(address: str) -> None:
    parsed = parse_ip_host(address)
    assert parsed is not None
    assert "metadata" in (address_problem(parsed, allow_private=True) or "")


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1.258", "10.1.1.2"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("example.com", None),
        ("256.1.1.1", None),
        ("08.1.1.1", None),
    ],
)
def test_ip_literals_are_parsed_as_a_resolver_would(host: str, expected: str | None) -> None:
    parsed = parse_ip_host(host)
    assert (str(parsed) if parsed is not None else None) == expected


def test_public_addresses_pass() -> None:
    for address in ("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "1.1.1.1"):
        parsed = parse_ip_host(address)
        assert parsed is not None
        assert address_problem(parsed, allow_private=False) is None


async def test_a_name_resolving_to_any_private_address_is_refused() -> None:
    async def mixed(host: str, port: int) -> Sequence[str]:
        return [PUBLIC_IP, "10.0.0.7"]

    with pytest.raises(
        WebFetchError,
        match=r"internal\.example resolves to a refused address: 10\.0\.0\.7 is a private",
    ):
        await fetch_text("https://internal.example/", WebPolicy(), resolver=mixed)


@pytest.mark.parametrize(
    ("url", "policy", "match"),
    [
        ("http://example.com/", WebPolicy(), "only https URLs"),
        ("ftp://example.com/x", WebPolicy(https_only=False), "only https and http URLs"),
        ("file:///etc/passwd", WebPolicy(), "only https URLs"),
        ("https:///nohost", WebPolicy(), "no host"),
        (
            "https://example.com/admin/x",
            WebPolicy(denied_urls=["https://example.com/admin/*"]),
            "denied pattern",
        ),
        (
            "https://other.org/",
            WebPolicy(allowed_urls=["https://example.com/*"]),
            "none of the allowed",
        ),
    ],
)
async def test_url_rules(url: str, policy: WebPolicy, match: str) -> None:
    with pytest.raises(WebFetchError, match=match):
        await fetch_text(url, policy, resolver=no_dns)


def test_web_policy_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        WebPolicy(max_bytes=0)
    with pytest.raises(ValueError, match="default_format"):
        WebPolicy(default_format="pdf")  # type: ignore[arg-type]
    assert WebPolicy(denied_urls="https://x/*").denied_urls == ("https://x/*",)


# -- against a loopback server --------------------------------------------------------------


@attrs.define
class Server:
    url: str
    requests: list[RecordedRequest]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@pytest.fixture
async def server(nursery: trio.Nursery) -> Callable[..., Awaitable[Server]]:
    async def start(
        routes: dict[str, FakeResponse] | Callable[[RecordedRequest], Awaitable[FakeResponse]],
    ) -> Server:
        requests: list[RecordedRequest] = []

        async def handler(request: RecordedRequest) -> FakeResponse:
            requests.append(request)
            if callable(routes):
                return await routes(request)
            return routes.get(request.path, FakeResponse(status=404, body=b"not found"))

        url = await nursery.start(serve_http, handler)
        return Server(url=url, requests=requests)

    return start


@attrs.define
class LoopbackBackend(httpcore2.AsyncNetworkBackend):
    """Records where the pinned transport wanted to connect, and goes to loopback instead."""

    port: int
    asked: list[tuple[str, int]] = attrs.field(factory=list)
    inner: httpcore2.AsyncNetworkBackend = attrs.field(factory=httpcore2.TrioBackend)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        self.asked.append((host, port))
        return await self.inner.connect_tcp("127.0.0.1", self.port, timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)


def text(body: str, content_type: str = "text/plain; charset=utf-8") -> FakeResponse:
    return FakeResponse(headers={"content-type": content_type}, body=body.encode())


def redirect(location: str, status: int = 302) -> FakeResponse:
    return FakeResponse(status=status, headers={"location": location})


async def test_loopback_server_is_fetched_when_private_hosts_are_allowed(
    server: Callable[..., Awaitable[Server]],
) -> None:
    running = await server({"/hello": text("héllo")})
    page = await fetch_text(f"{running.url}/hello", LOOPBACK, resolver=no_dns)
    assert (page.status, page.content_type, page.text, page.truncated) == (
        200,
        "text/plain",
        "héllo",
        False,
    )
    assert running.requests[0].headers["user-agent"] == LOOPBACK.user_agent


async def test_loopback_is_refused_by_default_even_over_http(
    server: Callable[..., Awaitable[Server]],
) -> None:
    running = await server({"/": text("secret")})
    with pytest.raises(WebFetchError, match="loopback"):
        await fetch_text(f"{running.url}/", WebPolicy(https_only=False), resolver=no_dns)
    assert running.requests == []


async def test_connection_is_pinned_to_the_checked_address_against_dns_rebinding(
    server: Callable[..., Awaitable[Server]],
) -> None:
    running = await server({"/": text("public page"), "/next": text("second")})
    answers = [[PUBLIC_IP], ["127.0.0.1"]]
    lookups: list[str] = []

    async def rebinding(host: str, port: int) -> Sequence[str]:
        lookups.append(host)
        return answers[min(len(lookups), 2) - 1]

    backend = LoopbackBackend(port=running.port)
    policy = WebPolicy(https_only=False)
    page = await fetch_text(
        "http://rebind.test/", policy, resolver=rebinding, network_backend=backend
    )
    assert page.text == "public page"
    assert lookups == ["rebind.test"]  # resolved once
    assert backend.asked == [(PUBLIC_IP, 80)]  # connected to the checked address
    assert running.requests[0].headers["host"] == "rebind.test"
    # A second fetch sees the rebound (loopback) answer, and is refused before connecting.
    rebound = r"rebind\.test resolves to a refused address: 127\.0\.0\.1 is a loopback"
    with pytest.raises(WebFetchError, match=rebound):
        await fetch_text(
            "http://rebind.test/next", policy, resolver=rebinding, network_backend=backend
        )
    assert backend.asked == [(PUBLIC_IP, 80)]


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/secret",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:10.0.0.1]/",
        "file:///etc/passwd",
    ],
)
async def test_a_redirect_to_a_private_address_is_refused(
    server: Callable[..., Awaitable[Server]], target: str
) -> None:
    running = await server({"/": text("never")})
    location = target.format(port=running.port)
    running = await server({"/start": redirect(location), "/secret": text("secret")})

    async def public(host: str, port: int) -> Sequence[str]:
        return [PUBLIC_IP]

    backend = LoopbackBackend(port=running.port)
    with pytest.raises(WebFetchError, match=r"^refused ") as caught:
        await fetch_text(
            "http://public.test/start",
            WebPolicy(https_only=False),
            resolver=public,
            network_backend=backend,
        )
    assert caught.value.url == location
    assert [request.path for request in running.requests] == ["/start"]


async def test_redirects_are_followed_up_to_the_limit(
    server: Callable[..., Awaitable[Server]],
) -> None:
    async def loop(request: RecordedRequest) -> FakeResponse:
        hop = int(request.path.strip("/") or 0)
        return redirect(f"/{hop + 1}", status=301 if hop % 2 else 307)

    running = await server(loop)
    policy = attrs.evolve(LOOPBACK, max_redirects=3)
    with pytest.raises(WebFetchError, match="more than 3 redirects"):
        await fetch_text(f"{running.url}/", policy, resolver=no_dns)
    assert [request.path for request in running.requests] == ["/", "/1", "/2", "/3"]

    ok = await server({"/a": redirect("/b"), "/b": redirect("/c", 308), "/c": text("done")})
    page = await fetch_text(f"{ok.url}/a", policy, resolver=no_dns)
    assert (page.url, page.text) == (f"{ok.url}/c", "done")


async def test_size_caps(server: Callable[..., Awaitable[Server]]) -> None:
    running = await server({"/big": text("x" * 100_000)})
    page = await fetch_text(
        f"{running.url}/big", attrs.evolve(LOOPBACK, max_bytes=1000), resolver=no_dns
    )
    assert (len(page.text), page.truncated) == (1000, True)
    page = await fetch_text(
        f"{running.url}/big", attrs.evolve(LOOPBACK, max_chars=10), resolver=no_dns
    )
    assert (page.text, page.truncated) == ("x" * 10, True)


async def test_the_whole_fetch_has_a_time_limit(
    server: Callable[..., Awaitable[Server]], autojump_clock: trio.testing.MockClock
) -> None:
    async def slow(request: RecordedRequest) -> FakeResponse:
        await trio.sleep(1000)
        return text("late")

    running = await server(slow)
    with pytest.raises(WebFetchError, match="timed out after 5 s"):
        await fetch_text(f"{running.url}/", attrs.evolve(LOOPBACK, timeout=5), resolver=no_dns)
    assert trio.current_time() == 5


async def test_binary_content_is_refused(server: Callable[..., Awaitable[Server]]) -> None:
    running = await server(
        {"/img": FakeResponse(headers={"content-type": "image/png"}, body=b"\x89PNG\0\0")}
    )
    with pytest.raises(WebFetchError, match="binary content"):
        await fetch_text(f"{running.url}/img", LOOPBACK, resolver=no_dns)


# -- fetch_webpage --------------------------------------------------------------------------

PAGE = """<!doctype html><html><head><title>Kova docs</title><style>body{}</style>
<script>alert('x')</script></head><body><h2>Tools</h2><p>Read <a href="/f">files</a>.</p>
<ul><li>one</li><li>two</li></ul><noscript>enable js</noscript></body></html>"""


async def test_fetch_webpage_converts_html(server: Callable[..., Awaitable[Server]]) -> None:
    running = await server({"/": text(PAGE, "text/html; charset=utf-8")})
    tool = FetchWebpage(LOOPBACK)
    markdown = await tool.execute({"url": f"{running.url}/"})
    assert not markdown.is_error
    assert markdown.text.startswith(f"URL: {running.url}/\nStatus: 200\n\n# Kova docs\n\n## Tools")
    assert "Read [files](/f)." in markdown.text
    assert "- one\n- two" in markdown.text
    assert "alert" not in markdown.text
    assert "enable js" not in markdown.text
    plain = await tool.execute({"url": f"{running.url}/", "format": "text"})
    assert (
        plain.text
        == f"URL: {running.url}/\nStatus: 200\n\nKova docs\n\nTools\n\nRead files.\n\n- one\n- two"
    )
    raw = await tool.execute({"url": f"{running.url}/", "format": "html"})
    assert "<script>" in raw.text


async def test_fetch_webpage_reports_refusals_and_http_errors_in_band(
    server: Callable[..., Awaitable[Server]],
) -> None:
    running = await server({})
    refused = await FetchWebpage(WebPolicy()).execute({"url": f"{running.url}/"})
    assert refused.is_error
    assert refused.text.startswith("refused http://127.0.0.1")
    missing = await FetchWebpage(LOOPBACK).execute({"url": f"{running.url}/nope"})
    assert missing.is_error
    assert "Status: 404" in missing.text


async def test_fetch_webpage_caps_characters(server: Callable[..., Awaitable[Server]]) -> None:
    running = await server({"/": text("<p>" + "word " * 1000 + "</p>", "text/html")})
    result = await FetchWebpage(attrs.evolve(LOOPBACK, max_chars=50)).execute(
        {"url": f"{running.url}/", "format": "text"}
    )
    assert result.text.endswith("\n[truncated at 50 characters]")


# -- issue 29: site-local IPv6, TLS reasons, policy types ---------------------------------


@pytest.mark.parametrize("address", ["fec0::1", "fed0::1", "feff:ffff::1"])
def test_deprecated_ipv6_site_local_addresses_are_refused(address: str) -> None:
    import ipaddress

    problem = address_problem(ipaddress.ip_address(address), allow_private=False)
    assert problem is not None
    assert "site-local" in problem
    assert address_problem(ipaddress.ip_address(address), allow_private=True) is None


def _self_signed_server_context(directory: Path) -> ssl.SSLContext:
    """A TLS server context with a fresh self-signed certificate (no CA trusts it)."""
    import datetime

    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kova self-signed")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (directory / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (directory / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / "cert.pem", directory / "key.pem")
    return context


async def test_a_failed_certificate_check_says_why(nursery: trio.Nursery, tmp_path: Path) -> None:
    context = _self_signed_server_context(tmp_path)

    async def handshake(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, context, server_side=True)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await tls.do_handshake()

    listeners = await nursery.start(trio.serve_tcp, handshake, 0)
    port = listeners[0].socket.getsockname()[1]
    with pytest.raises(WebFetchError) as caught:
        await fetch_text(
            f"https://127.0.0.1:{port}/", WebPolicy(allow_private_hosts=True), resolver=no_dns
        )
    message = str(caught.value)
    assert "TLS certificate verification failed" in message
    assert "self-signed" in message or "self signed" in message


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"allow_private_hosts": "no"}, TypeError, "allow_private_hosts must be True or False"),
        ({"allow_private_hosts": "false"}, TypeError, "allow_private_hosts"),
        ({"allow_private_hosts": 0}, TypeError, "allow_private_hosts"),
        ({"https_only": "0"}, TypeError, "https_only"),
        ({"https_only": None}, TypeError, "https_only"),
        ({"timeout": float("inf")}, ValueError, "timeout must be a positive, finite"),
        ({"timeout": float("nan")}, ValueError, "timeout"),
        ({"timeout": "30"}, TypeError, "seconds"),
        ({"max_bytes": 1.5}, TypeError, "max_bytes must be an int"),
        ({"max_chars": True}, TypeError, "max_chars"),
        ({"max_redirects": -1}, ValueError, "max_redirects"),
        ({"user_agent": 7}, TypeError, "user_agent"),
        ({"user_agent": "kova\r\nX-Injected: 1"}, ValueError, "user_agent must be one line"),
        ({"allowed_urls": 5}, TypeError, "URL rules"),
        ({"denied_urls": [""]}, TypeError, "URL rules"),
        ({"default_format": "pdf"}, ValueError, "default_format"),
    ],
)
def test_every_web_policy_field_is_type_checked(
    fields: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        WebPolicy(**fields)


# -- issue 29: the HTML conversion is linear, bounded and stops when cancelled ---------------


def test_html_becomes_markdown_with_structure() -> None:
    from kova.tools._html import html_to_markdown, html_to_text

    page = (
        "<title>T</title><h1>A &amp; B</h1><p>a <b>bold</b> <em>it</em> <code>x</code></p>"
        "<blockquote><p>q1</p><p>q2</p></blockquote><pre>def f():\n    return 1\n</pre>"
        "<ol><li>a<ul><li>b</li></ul></li><li>c</li></ol>"
        "<table><tr><th>H</th><th>I</th></tr><tr><td>1<td>2</tr></table>"
        "<p>x<br>y</p><a href='/i'><img src='i.png' alt='icon'></a><a href='javascript:x'>js</a>"
        "<svg><text>hidden</text></svg><script>if (a < b) {}</script><!-- note -->"
    )
    assert html_to_markdown(page) == (
        "# T\n\n# A & B\n\na **bold** *it* `x`\n\n> q1\n>\n> q2\n\n"
        "```\ndef f():\n    return 1\n```\n\n1. a\n  - b\n2. c\n\n"
        "| H | I |\n| --- | --- |\n| 1 | 2 |\n\nx\ny\n\n[![icon](i.png)](/i)js"
    )
    assert html_to_text(page) == (
        "T\n\nA & B\n\na bold it x\n\nq1\n\nq2\n\ndef f():\n    return 1\n\n"
        "1. a\n  - b\n2. c\n\n| H | I |\n| 1 | 2 |\n\nx\ny\n\niconjs"
    )


def test_html_rules_breaks_numbering_and_cells_without_rows() -> None:
    from kova.tools._html import html_to_markdown, html_to_text

    page = (
        "<p>a</p><hr><ol start='3'><li>c</li><li>d</li></ol>"
        "<table><td>x<br>y</td><td>z</td></table>"
        "<img alt='only alt'><img src='data:image/png;base64,AA' alt='inline'>"
        "<a href='/1'>one<a href='/2'>two</a>"
        "<template><p>never</p></template><br/>end"
    )
    assert html_to_markdown(page) == (
        "a\n\n---\n\n3. c\n4. d\n\n| x y | z |\n| --- | --- |\n\n"
        "only altinline[one](/1)[two](/2)\nend"
    )
    assert html_to_text(page) == "a\n\n3. c\n4. d\n\n| x y | z |\n\nonly altinlineonetwo\nend"


@pytest.mark.parametrize(
    "page",
    [
        "<div>x " * 200_000 + "</div>" * 200_000,  # 2.6 MB of nesting (was a RecursionError)
        "<blockquote><ul><li><table><tr><td>x " * 50_000,
        "<" * 1_000_000,
        "<a " + 'b="' * 300_000,  # quotes never closed
        "<!--" * 250_000,
        "</div>" * 200_000,
    ],
    ids=["nested-divs", "nested-structure", "lt-run", "open-quotes", "open-comments", "ends"],
)
def test_hostile_html_converts_to_the_size_limit_without_recursion(page: str) -> None:
    from kova.tools._html import convert_html

    converted = convert_html(page, markdown=True, max_chars=100_000)
    assert len(converted.text) <= 100_000
    assert converted.stopped in (None, "size")


def test_the_conversion_stops_at_its_deadline_with_what_it_has() -> None:
    from kova.tools._html import convert_html

    converted = convert_html("<p>x</p>" * 100_000, markdown=False, max_chars=10**7, timeout=0.0)
    assert converted.stopped == "time"
    assert converted.text.startswith("x")  # what was converted before it stopped


async def test_a_cancelled_conversion_leaves_no_thread_converting() -> None:
    import sys
    import time

    from kova.tools import _html
    from kova.tools._web import _convert

    page = "<div>" * 4_000_000  # tens of seconds of work under load, were it not stopped

    def converting() -> bool:
        for frame in sys._current_frames().values():
            current: Any = frame
            while current is not None:
                if current.f_code is _html._convert.__code__:
                    return True
                current = current.f_back
        return False

    def stopped_within(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while converting():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    with trio.move_on_after(0.2):  # wall clock: the thread must really have started
        await _convert(page, True, WebPolicy(), 600.0)
    assert await trio.to_thread.run_sync(stopped_within, 5.0)


async def test_fetch_webpage_converts_a_deeply_nested_page(
    server: Callable[..., Awaitable[Server]],
) -> None:
    page = "<html><body>" + "<div>x " * 100_000 + "</div>" * 100_000 + "</body></html>"
    running = await server({"/": text(page, "text/html")})
    result = await FetchWebpage(LOOPBACK).execute({"url": f"{running.url}/"})
    assert not result.is_error
    assert result.text.endswith(f"[truncated at {LOOPBACK.max_chars} characters]")
    assert "x\nx\nx" in result.text


# -- issue 29: URL rules match parsed, normalized URLs ----------------------------------------

SUBDOMAINS = WebPolicy(allowed_urls=["https://*.example.com/*"])
DENY_EVIL = WebPolicy(denied_urls=["https://evil.com/*"])
DENY_PRIVATE = WebPolicy(denied_urls=["https://docs.example.com/private/*"])


@pytest.mark.parametrize(
    ("url", "policy", "refused"),
    [
        # An allowed subdomain rule: the host is matched as a host, whole labels only.
        ("https://attacker.test/x.example.com/", SUBDOMAINS, "none of the allowed"),
        ("https://attacker.test/?.example.com", SUBDOMAINS, "none of the allowed"),
        ("https://attacker.test#.example.com", SUBDOMAINS, "none of the allowed"),
        ("https://x.example.com@attacker.test/", SUBDOMAINS, "credentials"),
        ("https://example.com.attacker.test/", SUBDOMAINS, "none of the allowed"),
        ("https://evilexample.com/", SUBDOMAINS, "none of the allowed"),
        ("https://example.com/", SUBDOMAINS, "none of the allowed"),  # the domain itself
        ("https://a.example.com:8443/", SUBDOMAINS, "none of the allowed"),  # not its port
        ("https://a.example.com\\@attacker.test/", SUBDOMAINS, "backslash"),
        # A denial is not beaten by case, a trailing dot, the default port, userinfo,
        # escapes in the host, another port.
        ("https://EVIL.com/", DENY_EVIL, "denied pattern"),
        ("https://evil.com./", DENY_EVIL, "denied pattern"),
        ("https://evil.com:443/", DENY_EVIL, "denied pattern"),
        ("https://evil.com:8443/x", DENY_EVIL, "denied pattern"),
        ("https://user:pw@evil.com/", DENY_EVIL, "credentials"),
        ("https://%65vil.com/", DENY_EVIL, "denied pattern"),
        ("https://evil.com", DENY_EVIL, "denied pattern"),  # no path at all
        # Nor by escapes or dot segments in the path.
        ("https://docs.example.com/%70rivate/x", DENY_PRIVATE, "denied pattern"),
        ("https://docs.example.com/%70%72%69vate/x", DENY_PRIVATE, "denied pattern"),
        ("https://docs.example.com/public/../private/x", DENY_PRIVATE, "denied pattern"),
        ("https://docs.example.com/public/%2e%2e/private/x", DENY_PRIVATE, "denied pattern"),
        ("https://docs.example.com/./private/x", DENY_PRIVATE, "denied pattern"),
        ("https://DOCS.example.com./private/x", DENY_PRIVATE, "denied pattern"),
        ("https://docs.example.com//private/x", DENY_PRIVATE, "empty segment"),
        ("https://docs.example.com/private%2fx", DENY_PRIVATE, "encoded slash"),
    ],
)
async def test_url_rule_bypass_forms_are_refused(url: str, policy: WebPolicy, refused: str) -> None:
    with pytest.raises(WebFetchError, match=refused):
        await fetch_text(url, policy, resolver=no_dns)


@pytest.mark.parametrize(
    ("url", "policy", "fetched"),
    [
        ("https://a.example.com/page", SUBDOMAINS, "https://a.example.com/page"),
        ("https://A.B.EXAMPLE.COM./page", SUBDOMAINS, "https://a.b.example.com/page"),
        ("https://a.example.com:443/x?q=1", SUBDOMAINS, "https://a.example.com/x?q=1"),
        ("https://docs.example.com/public/x", DENY_PRIVATE, "https://docs.example.com/public/x"),
        ("https://docs.example.com/privatex", DENY_PRIVATE, "https://docs.example.com/privatex"),
        ("https://good.com/%7Euser/a/./b/../c", DENY_EVIL, "https://good.com/~user/a/c"),
    ],
)
def test_allowed_urls_are_fetched_in_their_normalized_form(
    url: str, policy: WebPolicy, fetched: str
) -> None:
    from kova.tools._web import _check_url

    assert _check_url(url, policy)[0] == fetched


@pytest.mark.parametrize(
    ("rule", "url", "matches"),
    [
        ("https://api-*.example.com/*", "https://api-eu.example.com/v1", True),
        ("https://api-*.example.com/*", "https://api-eu.x.example.com/v1", False),
        ("https://example.com:*/*", "https://example.com:8443/", True),
        ("*://example.com/*", "http://example.com/", True),
        ("*://example.com/*", "http://example.com:8080/", False),
        ("https://*/docs/*", "https://any.host/docs/a/b", True),
        ("https://example.com/docs/*", "https://example.com/docs", False),
        ("https://[::1]:8443/*", "https://[::1]:8443/x", True),
        ("https://0x7f.1/*", "https://127.0.0.1/x", True),  # IP literals compared canonically
    ],
)
def test_rule_matching(rule: str, url: str, matches: bool) -> None:
    from kova.tools._urls import normalize_url, parse_rule

    assert parse_rule(rule, deny=False).matches(normalize_url(url)) is matches


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("example.com/*", "scheme://host/path"),
        ("ftp://example.com/*", "http, https or \\*"),
        ("https://example.com/*?q=1", "no query"),
        ("https://user@example.com/*", "userinfo"),
        ("https://example.com:http/*", "port must be a number"),
        ("https:///x", "no host"),
        ("https://*.ex*.com/*", "only wildcard"),
    ],
)
def test_a_rule_that_cannot_be_read_fails_when_the_policy_is_built(rule: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WebPolicy(allowed_urls=[rule])
    with pytest.raises(ValueError, match=message):
        WebPolicy(denied_urls=[rule])
