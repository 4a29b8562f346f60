"""Model providers: the protocol, the shared heuristic token counter, and the providers."""

from ._base import EventBatches as EventBatches
from ._base import Provider as Provider
from ._base import heuristic_count_tokens as heuristic_count_tokens

__all__ = ["EventBatches", "Provider", "heuristic_count_tokens"]
