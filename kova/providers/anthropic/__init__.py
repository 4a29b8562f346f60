"""Anthropic's native Messages API: adaptive thinking, signed thinking round trips, prompt
caching, structured output and exact token counts."""

from ._client import AnthropicProvider as AnthropicProvider
from ._config import ANTHROPIC_API_VERSION as ANTHROPIC_API_VERSION
from ._config import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS
from ._config import EFFORT_LEVELS as EFFORT_LEVELS
from ._config import AnthropicConfig as AnthropicConfig
from ._config import Effort as Effort
from ._config import ThinkingDisplay as ThinkingDisplay

__all__ = [
    "ANTHROPIC_API_VERSION",
    "AnthropicConfig",
    "AnthropicProvider",
    "DEFAULT_MAX_TOKENS",
    "EFFORT_LEVELS",
    "Effort",
    "ThinkingDisplay",
]
