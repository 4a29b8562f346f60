"""The signature of a pending approvals document: HMAC-SHA256 over its canonical JSON, the
decisions aside. Pure functions of the document (its ``to_dict()``), so the value
(:mod:`._approvals`) and the agent (:mod:`._signing`) share them; see :mod:`._signing` for
what is signed and why.

Only :mod:`hmac` and :mod:`hashlib` from the standard library; comparisons are
:func:`hmac.compare_digest`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

from .._errors import ApprovalMismatchError, BuildError, SerializationError
from .._secret import Secret

if TYPE_CHECKING:
    from .._messages import JSONValue

__all__ = [
    "KEYED",
    "KEY_VARIABLE",
    "LOCAL",
    "approval_keys",
    "seal",
    "unsigned_message",
    "verify",
]

KEY_VARIABLE: Final = "KOVA_APPROVAL_KEY"
"""The environment variable an agent without ``approval_key`` reads its key from."""

MIN_KEY_LENGTH: Final = 16
"""The shortest key accepted (characters): an HMAC key should be random and long; use 32
random bytes, hex-encoded."""

KEYED: Final = "hmac-sha256:"
"""The prefix of a signature made with an approval key (such a value may leave the
process)."""
LOCAL: Final = "local:"
"""The prefix of a seal made with this process's random key (it verifies here only)."""

_PROCESS_KEY: Final = os.urandom(32)
"""The key of values sealed without a configured key: they verify in this process only."""

_DOMAIN: Final = b"kova pending approvals v2\x00"


def unsigned_message() -> str:
    """The one line ``to_json`` fails with for a value that has no key's signature."""
    return (
        "these pending approvals are not signed with a key, so they cannot leave this "
        "process: give the agent one with AgentBuilder().approval_key(kova.Secret(...)) or "
        f"the {KEY_VARIABLE} environment variable"
    )


def approval_keys(keys: object) -> tuple[Secret, ...]:
    """``keys`` checked: a :class:`~kova.Secret` or a sequence of them (the first signs).

    Raises:
        BuildError: not Secrets, none at all, or one shorter than 16 characters.
    """
    items: Sequence[object]
    if isinstance(keys, Secret):
        items = (keys,)
    elif isinstance(keys, list | tuple):
        items = keys
    else:
        raise BuildError(
            "approval_key takes a kova.Secret (or a list of them, the first signing), got "
            f"{type(keys).__name__}"
        )
    if not items:
        raise BuildError("approval_key needs at least one key")
    checked: list[Secret] = []
    for index, key in enumerate(items):
        if not isinstance(key, Secret):
            raise BuildError(
                f"approval key {index} must be a kova.Secret (never a plain str), got "
                f"{type(key).__name__}"
            )
        if len(key.reveal()) < MIN_KEY_LENGTH:
            raise BuildError(
                f"approval key {index} is shorter than {MIN_KEY_LENGTH} characters: use 32 "
                "random bytes, hex-encoded (python -c 'import secrets; "
                "print(secrets.token_hex(32))')"
            )
        checked.append(key)
    return tuple(checked)


def _without_decisions(document: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """``document`` without what the person adds (decisions) and without its signature, at
    every level of inner turns."""
    out = {key: value for key, value in document.items() if key not in ("decisions", "signature")}
    inner = out.get("inner")
    if isinstance(inner, Mapping):
        pauses: dict[str, JSONValue] = {}
        for call_id, pause in inner.items():
            pending = pause.get("pending") if isinstance(pause, Mapping) else None
            if isinstance(pause, Mapping) and isinstance(pending, Mapping):
                pause = {**pause, "pending": _without_decisions(pending)}
            pauses[call_id] = pause
        out["inner"] = pauses
    return out


def _payload(document: Mapping[str, JSONValue], nonce: str) -> bytes:
    signed = _without_decisions(document)
    signed["nonce"] = nonce
    try:
        text = json.dumps(
            signed, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True
        )
    except (ValueError, TypeError, RecursionError) as exc:
        raise SerializationError(f"pending approvals cannot be signed: {exc}") from None
    return _DOMAIN + text.encode("ascii")


def _mac(key: Secret | bytes, data: bytes) -> str:
    raw = key if isinstance(key, bytes) else key.reveal().encode("utf-8", "surrogatepass")
    return hmac.new(raw, data, hashlib.sha256).hexdigest()


def seal(document: Mapping[str, JSONValue], keys: Sequence[Secret]) -> tuple[str, str]:
    """The nonce (the document's own, else one derived from what is signed) and the
    signature of ``document``: under ``keys[0]``, or this process's key when there is none."""
    nonce = document.get("nonce")
    if not isinstance(nonce, str) or not nonce:
        nonce = hashlib.sha256(_payload(document, "")).hexdigest()[:32]
    data = _payload(document, nonce)
    if keys:
        return nonce, KEYED + _mac(keys[0], data)
    return nonce, LOCAL + _mac(_PROCESS_KEY, data)


def verify(document: Mapping[str, JSONValue], keys: Sequence[Secret]) -> None:
    """Raises :class:`ApprovalMismatchError` unless ``document`` is exactly what one of
    ``keys`` (or, sealed without a key, this process) signed, decisions aside."""
    signature = document.get("signature")
    nonce = document.get("nonce")
    if not isinstance(signature, str) or not signature:
        raise ApprovalMismatchError(
            "these pending approvals carry no signature: resume only the response.pending "
            "an agent returned (or PendingApprovals.from_json of its to_json())"
        )
    if not isinstance(nonce, str) or not nonce:
        raise ApprovalMismatchError("these pending approvals carry no nonce")
    data = _payload(document, nonce)
    if signature.startswith(LOCAL):
        if hmac.compare_digest(signature, LOCAL + _mac(_PROCESS_KEY, data)):
            return
        raise ApprovalMismatchError(
            "these pending approvals do not match their signature: they were changed, or "
            "they were made by another process without a key (set an approval key to resume "
            "them elsewhere)"
        )
    if not signature.startswith(KEYED):
        raise ApprovalMismatchError("these pending approvals carry a signature of unknown kind")
    for key in keys:
        if hmac.compare_digest(signature, KEYED + _mac(key, data)):
            return
    if not keys:
        raise ApprovalMismatchError(
            "these pending approvals are signed with a key and this agent has none: give it "
            f"the key with AgentBuilder().approval_key(...) or {KEY_VARIABLE}"
        )
    raise ApprovalMismatchError(
        "these pending approvals do not match their signature: they were changed after the "
        "turn paused, or signed with a key this agent does not have"
    )
