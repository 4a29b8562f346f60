"""Amazon Bedrock's Converse API on kova's own transport: SigV4 and the credential chain from
botocore, AWS event streams framed by botocore's parser, no threads. Needs the ``bedrock``
extra (``pip install kova-sdk[bedrock]``); ``import kova`` never loads botocore."""

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from ..._extras import require_extra as _require_extra

_require_extra("bedrock", "the Bedrock provider")  # found, not imported: no import cost

from ._client import BedrockProvider as BedrockProvider
from ._config import BedrockConfig as BedrockConfig

__all__ = ["BedrockConfig", "BedrockProvider"]
