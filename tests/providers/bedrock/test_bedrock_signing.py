"""SigV4 on botocore's signer, checked against the wire notes' vector and the fake server's
independent verification."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import httpx2
import pytest

from kova import ProviderAuthError, Secret
from kova.providers.bedrock._auth import AwsCredentials, SigV4Auth, environment_credentials
from kova.testing._http_server import RecordedRequest
from kova.testing._wire.bedrock import verify_sigv4

AKID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
URL = (
    "https://bedrock-runtime.us-east-1.amazonaws.com"
    "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse"
)
BODY = b'{"messages":[{"role":"user","content":[{"text":"Hello"}]}]}'


def _auth(token: str | None = None) -> SigV4Auth:
    credentials = AwsCredentials(
        access_key_id=Secret(AKID), secret_access_key=Secret(SECRET), session_token=Secret.of(token)
    )
    return SigV4Auth(
        credentials, region="us-east-1", clock=lambda: datetime(2025, 1, 1, tzinfo=UTC)
    )


def _request(url: str = URL, body: bytes = BODY) -> httpx2.Request:
    return httpx2.Request("POST", url, content=body, headers={"Content-Type": "application/json"})


def _recorded(request: httpx2.Request) -> RecordedRequest:
    path, _, query = request.url.raw_path.decode().partition("?")
    return RecordedRequest(
        method=request.method,
        path=path,
        query=dict(request.url.params.multi_items()) if query else {},
        headers={name: value for name, value in request.headers.items()},
        body=request.content,
    )


def test_wire_vector_signature() -> None:
    assert hashlib.sha256(BODY).hexdigest() == (
        "7421da8d1a0949a481724fee62d5886aacde03836bf58248adb73e8b61ac0d54"
    )
    request = _request()
    _auth().sign(request)
    assert request.headers["x-amz-date"] == "20250101T000000Z"
    assert request.headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250101/us-east-1/bedrock/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, "
        "Signature=430fc19a8c7b83676742769a83c5ff404a99331658bbca200dbf4f69742f9a3d"
    )


def test_canonical_uri_is_double_encoded() -> None:
    from botocore.auth import SigV4Auth as BotocoreSigner
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import ReadOnlyCredentials

    aws = AWSRequest(method="POST", url=URL, headers={"host": "h"}, data=BODY)
    aws.context["timestamp"] = "20250101T000000Z"
    signer = BotocoreSigner(ReadOnlyCredentials(AKID, SECRET, None), "bedrock", "us-east-1")
    assert "/model/us.anthropic.claude-sonnet-4-20250514-v1%253A0/converse\n" in (
        signer.canonical_request(aws)
    )


def test_session_token_is_sent_and_signed() -> None:
    request = _request()
    _auth("FQoGZXIvYXdzE-token").sign(request)
    assert request.headers["x-amz-security-token"] == "FQoGZXIvYXdzE-token"
    assert (
        "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,"
        in (request.headers["authorization"])
    )
    check = verify_sigv4(
        _recorded(request),
        {AKID: SECRET},
        region="us-east-1",
        session_tokens={AKID: "FQoGZXIvYXdzE-token"},
    )
    assert check.error is None


def test_arn_model_and_query_verify() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.x-v1:0"
    from kova.providers.bedrock._convert import model_path

    url = "http://127.0.0.1:9/" + model_path(arn, "converse").lstrip("/") + "?a=b c&nextToken=x/+="
    request = _request(url)
    _auth().sign(request)
    recorded = _recorded(request)
    assert "%2F" in recorded.path
    assert "%3A" in recorded.path
    assert verify_sigv4(recorded, {AKID: SECRET}, region="us-east-1").error is None


def test_a_changed_body_fails_verification() -> None:
    request = _request()
    _auth().sign(request)
    recorded = _recorded(request)
    tampered = RecordedRequest(
        method=recorded.method,
        path=recorded.path,
        headers=recorded.headers,
        body=recorded.body.replace(b"Hello", b"Hellp"),
    )
    assert verify_sigv4(recorded, {AKID: SECRET}, region="us-east-1").error is None
    assert verify_sigv4(tampered, {AKID: SECRET}, region="us-east-1").error is not None
    assert verify_sigv4(recorded, {AKID: "wrong"}, region="us-east-1").error is not None
    assert verify_sigv4(recorded, {AKID: SECRET}, region="eu-west-1").error is not None


def test_resigning_replaces_the_old_signature() -> None:
    request = _request()
    auth = _auth()
    auth.sign(request)
    first = request.headers["authorization"]
    auth.sign(request)
    assert request.headers["authorization"] == first
    assert len(request.headers.get_list("authorization")) == 1


def test_no_credentials_is_an_auth_error() -> None:
    with pytest.raises(ProviderAuthError):
        SigV4Auth(None, region="us-east-1").sign(_request())


def test_credentials_never_print() -> None:
    auth = _auth("token-value")
    assert auth.credentials is not None
    shown = repr(auth) + repr(auth.credentials) + str(auth.credentials)
    for secret in (AKID, SECRET, "token-value"):
        assert secret not in shown
    assert {s.reveal() for s in auth.secrets} == {AKID, SECRET, "token-value"}


def test_environment_credentials() -> None:
    assert environment_credentials({}) is None
    found = environment_credentials(
        {"AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "S", "AWS_SESSION_TOKEN": "T"}
    )
    assert found is not None
    assert found.session_token == Secret("T")
    assert found.source == "env"
