"""Which OpenAI models reason, for the Responses API's ``include: ["reasoning.encrypted_content"]``.

With ``store: false`` a reasoning model's reasoning must come back encrypted to be sent on in
a tool loop, so kova asks for it; a model that does not reason refuses the request outright
(400 "Encrypted content is not supported with this model", seen for gpt-4o, gpt-4.1-mini and
gpt-5-chat-latest). The table below says which is which by model id; a model it does not know
(a new one, an Azure deployment name, a compatible server's) is asked, and if it refuses, the
provider sends the request again without it and remembers that for the model
(:class:`~kova.providers.openai.OpenAiResponsesProvider`).
``OpenAiResponsesConfig(encrypted_reasoning=True/False)`` overrides the table.
"""

from __future__ import annotations

import re

__all__ = ["NON_REASONING_PATTERNS", "REASONING_PATTERNS", "is_encrypted_refusal", "reasons"]

REASONING_PATTERNS = (
    r"o\d(-.*)?",  # o1, o1-pro, o3, o3-mini, o3-pro, o3-deep-research, o4-mini, ...
    r"gpt-5(\.\d+)?(-(mini|nano|pro|codex)(-.*)?)?(-\d{4}-\d{2}-\d{2})?",  # gpt-5, gpt-5.4-mini
    r"gpt-5(\.\d+)?-codex(-.*)?",
    r"codex-.*",  # codex-mini-latest
    r"gpt-oss-.*",
)
"""Model ids that reason (full matches, dated snapshots included)."""

NON_REASONING_PATTERNS = (
    r"gpt-4.*",  # gpt-4, gpt-4-turbo, gpt-4o, gpt-4o-mini, gpt-4.1, gpt-4.1-mini, ...
    r"gpt-3\.5.*",
    r"chatgpt-.*",  # chatgpt-4o-latest
    r"gpt-5(\.\d+)?-chat(-.*)?",  # gpt-5-chat-latest, gpt-5.1-chat-latest
    r"computer-use-preview(-.*)?",
)
"""Model ids that do not reason, and refuse ``reasoning.encrypted_content``."""

_REASONING = re.compile("|".join(f"(?:{pattern})" for pattern in REASONING_PATTERNS))
_NON_REASONING = re.compile("|".join(f"(?:{pattern})" for pattern in NON_REASONING_PATTERNS))


def reasons(model: str) -> bool | None:
    """Whether ``model`` reasons: ``True``, ``False``, or ``None`` for a model the table
    does not know. A non-reasoning pattern wins (``gpt-5-chat-latest`` is no reasoner)."""
    if _NON_REASONING.fullmatch(model):
        return False
    if _REASONING.fullmatch(model):
        return True
    return None


def is_encrypted_refusal(status_code: int | None, message: str) -> bool:
    """Whether an error is the API refusing ``reasoning.encrypted_content`` for the model."""
    return status_code == 400 and "encrypted content is not supported" in message.lower()
