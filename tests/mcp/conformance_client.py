"""The client command the official MCP conformance suite runs, built on kova's McpClient.

The suite's runner starts a scenario server and runs::

    python tests/mcp/conformance_client.py <server-url>

with ``MCP_CONFORMANCE_SCENARIO`` naming the scenario (and ``MCP_CONFORMANCE_CONTEXT``
carrying scenario data such as pre-registered client credentials). Like the reference
"everything client", it connects (initialize), lists the tools and calls each one with
arguments made from its input schema; elicitation requests are accepted with the schema's
defaults and sampling requests are answered by a scripted model. Exit status 0 means the
client ran to the end; the runner judges conformance from what it saw on the wire.

kova keeps no OAuth state, so for the ``auth/*`` scenarios this command plays the host: it
runs the ``mcp`` package's ``OAuthClientProvider`` (an ``httpx2.Auth``) through the
transport's ``http_auth`` seam, with tokens kept in memory and the authorization step done
by following the test authorization server's redirect (it approves without a person). For
the client-credentials scenarios it runs the package's ``ClientCredentialsOAuthProvider``
(``client_secret_basic``) or ``PrivateKeyJWTOAuthProvider`` (a signed JWT assertion), and
for cross-app access (SEP-990) its ``IdentityAssertionOAuthProvider``, fed an ID-JAG from an
RFC 8693 token exchange at the scenario's identity provider.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import httpx2
import trio
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from kova import McpError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
from kova.mcp import ElicitationRequest, ElicitationResponse, McpClient, StreamableHttpTransport
from kova.testing import ScriptedProvider, reply_text


def sample_value(schema: object) -> object:
    """A plausible value for a JSON Schema (its default when it has one)."""
    if not isinstance(schema, dict):
        return None
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "integer" or kind == "number":
        return 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return sample_arguments(schema)
    return "test"


def sample_arguments(schema: object) -> dict[str, object]:
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or properties)
    return {name: sample_value(field) for name, field in properties.items() if name in required}


async def accept_with_defaults(request: ElicitationRequest) -> ElicitationResponse:
    # An empty form: kova fills every field the schema gives a default for.
    return ElicitationResponse(action="accept", content={})


REDIRECT_URI = "http://localhost:3000/callback"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


class MemoryTokens:
    """The host's token store, in memory (mcp's ``TokenStorage`` protocol)."""

    def __init__(self, client_info: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class HeadlessAuthorization:
    """Does the browser's part: open the authorization URL, read the redirect."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            response = await http.get(authorization_url)
        location = response.headers.get("location", "")
        query = parse_qs(urlsplit(location).query)
        self.result = AuthorizationCodeResult(
            code=query.get("code", [""])[0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None, "the redirect handler did not run"
        return self.result


async def _authorization_server(url: str) -> str:
    """The MCP server's authorization server (RFC 9728 protected resource metadata)."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    async with httpx2.AsyncClient() as http:
        for path in (
            f"/.well-known/oauth-protected-resource{parts.path}",
            "/.well-known/oauth-protected-resource",
        ):
            response = await http.get(origin + path)
            if response.status_code == 200:
                servers = response.json().get("authorization_servers") or []
                if servers:
                    return str(servers[0])
    raise RuntimeError(f"no protected resource metadata for {url}")


def _id_jag_exchange(context: dict[str, str]) -> Callable[[str, str], Awaitable[str]]:
    """RFC 8693 token exchange at the enterprise IdP: its ID token for an ID-JAG."""

    async def fetch(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient() as http:
            response = await http.post(
                context["idp_token_endpoint"],
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "subject_token": context["idp_id_token"],
                    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                    "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "audience": audience,
                    "resource": resource,
                    "client_id": context.get("idp_client_id", ""),
                },
            )
        response.raise_for_status()
        return str(response.json()["access_token"])

    return fetch


async def oauth(url: str) -> httpx2.Auth:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if "idp_id_token" in context:
        # Cross-app access (SEP-990): an ID-JAG from the enterprise IdP, then a JWT bearer
        # grant at the MCP server's authorization server.
        return IdentityAssertionOAuthProvider(
            server_url=url,
            storage=MemoryTokens(),
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            issuer=await _authorization_server(url),
            assertion_provider=_id_jag_exchange(context),
            token_endpoint_auth_method="client_secret_basic",
        )
    if "private_key_pem" in context:
        # client_credentials with a private_key_jwt client assertion (RFC 7523).
        signer = SignedJWTParameters(
            issuer=context["client_id"],
            subject=context["client_id"],
            signing_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "RS256"),
        )
        return PrivateKeyJWTOAuthProvider(
            server_url=url,
            storage=MemoryTokens(),
            client_id=context["client_id"],
            assertion_provider=signer.create_assertion_provider(),
            issuer=await _authorization_server(url),
        )
    if scenario.startswith("auth/client-credentials"):
        return ClientCredentialsOAuthProvider(
            server_url=url,
            storage=MemoryTokens(),
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            issuer=await _authorization_server(url),
        )
    pre_registered = None
    if "client_id" in context:
        pre_registered = OAuthClientInformationFull(
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            redirect_uris=[REDIRECT_URI],
            token_endpoint_auth_method="client_secret_basic"
            if context.get("client_secret")
            else "none",
        )
    browser = HeadlessAuthorization()
    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="kova conformance client",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=MemoryTokens(pre_registered),
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
        client_metadata_url=CLIENT_METADATA_URL,
    )


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    print(f"conformance client: scenario {scenario!r} at {url}", file=sys.stderr)
    sampling = ScriptedProvider(lambda request: reply_text("conformance sample answer"))
    async with McpClient.connect(
        StreamableHttpTransport(url, http_auth=await oauth(url)),
        elicitation=accept_with_defaults,
        sampling=sampling,
        request_timeout=20,
    ) as client:
        for tool in await client.tools_list():
            try:
                result = await client.tools_call(tool.name, sample_arguments(tool.parameters))
            except McpError as exc:
                print(f"tool {tool.name}: JSON-RPC error {exc}", file=sys.stderr)
            else:
                print(f"tool {tool.name}: {result.text[:200]!r}", file=sys.stderr)


if __name__ == "__main__":
    trio.run(main, sys.argv[-1])
