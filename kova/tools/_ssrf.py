"""Which addresses a web fetch may connect to: the SSRF guard's address rules (pure; no I/O).

An address is refused when it, or an IPv4 address embedded in it, is not a public unicast
address: loopback, private (RFC 1918, ULA ``fc00::/7``), link-local, IPv6 site-local
(``fec0::/10``, deprecated but still routed in places), CGNAT (``100.64/10``),
multicast, reserved, unspecified (``0.0.0.0``, ``::``), documentation and benchmarking ranges,
and cloud metadata endpoints. Embedded forms are checked because a kernel or a NAT64/6to4
gateway will happily route them to the IPv4 address inside: IPv4-mapped (``::ffff:a.b.c.d``),
IPv4-compatible (``::a.b.c.d``), 6to4 (``2002::/16``), Teredo (``2001::/32``) and NAT64
(``64:ff9b::/96``, ``64:ff9b:1::/48``).

Host names are also parsed the way ``inet_aton`` (and so ``getaddrinfo``) reads them, so
``2130706433``, ``0x7f.1`` and ``0177.0.0.1`` are recognised as ``127.0.0.1`` before any DNS.
"""

from __future__ import annotations

import ipaddress
from typing import TypeAlias

__all__ = ["IPAddress", "address_problem", "parse_ip_host"]

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

_METADATA = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task credentials
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS IMDS over IPv6
    )
)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def _embedded(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses a packet to ``address`` may end up at."""
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    last32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in network for network in _NAT64):
        found.append(last32)
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # not :: and ::1 (checked as such)
        found.append(last32)
    return found


def _why_not_public(address: IPAddress) -> str | None:
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        # fec0::/10: deprecated (RFC 3879) but still routed inside some networks, and
        # Python's is_private and is_global do not cover it.
        return "a site-local address"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "a shared (CGNAT) address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a public address"
    return None


def address_problem(address: IPAddress, *, allow_private: bool) -> str | None:
    """Why a fetch must not connect to ``address``, or ``None`` when it may.

    Args:
        address: a resolved or literal address.
        allow_private: allow every non-public address except cloud metadata endpoints.
    """
    candidates: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            address = ipaddress.IPv6Address(address.compressed.split("%", 1)[0])
            candidates = [address]
        candidates.extend(_embedded(address))
    for candidate in candidates:
        if candidate in _METADATA:
            return f"{address} is a cloud metadata address"
    if allow_private:
        return None
    # The embedded IPv4 first: "a loopback address (it embeds 127.0.0.1)" says more than the
    # IPv6 form's own "private" classification.
    for candidate in [*candidates[1:], candidates[0]]:
        reason = _why_not_public(candidate)
        if reason is not None:
            inside = "" if candidate == address else f" (it embeds {candidate})"
            return f"{address} is {reason}{inside}"
    return None


def _ipv4_part(text: str) -> int | None:
    """One dotted part as ``inet_aton`` reads it: ``0x`` hex, leading-``0`` octal, decimal."""
    try:
        if text[:2].lower() == "0x":
            return int(text[2:] or "0", 16)
        if len(text) > 1 and text.startswith("0"):
            return int(text[1:], 8)
        return int(text, 10) if text.isdigit() else None
    except ValueError:
        return None


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or any(not part for part in parts):
        return None
    values = [_ipv4_part(part) for part in parts]
    if any(value is None for value in values):
        return None
    numbers = [value for value in values if value is not None]
    # a.b.c.d; a.b.c (c fills 16 bits); a.b (b fills 24 bits); a (all 32 bits)
    *leading, last = numbers
    if any(value > 255 for value in leading) or last >= 1 << (8 * (5 - len(numbers))):
        return None
    total = 0
    for value in leading:
        total = total << 8 | value
    total = total << (8 * (5 - len(numbers))) | last
    return ipaddress.IPv4Address(total)


def parse_ip_host(host: str) -> IPAddress | None:
    """The address a URL host names literally, in any form a resolver would accept, or
    ``None`` for a host name that needs DNS."""
    host = host.strip().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    return _legacy_ipv4(host)
