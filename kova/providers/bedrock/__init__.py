"""Amazon Bedrock's Converse API on kova's own transport: SigV4 and the credential chain from
botocore, AWS event streams framed by botocore's parser, no threads. Needs the ``bedrock``
extra (``pip install kova-sdk[bedrock]``); ``import kova`` never loads botocore."""

from ._client import BedrockProvider as BedrockProvider
from ._config import BedrockConfig as BedrockConfig

__all__ = ["BedrockConfig", "BedrockProvider"]
