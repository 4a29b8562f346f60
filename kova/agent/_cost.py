"""What a model call costs in money: :class:`Prices` (the caller's own prices) and the
:class:`Pricer` an agent prices its calls with.

Prices come from two places, the caller's first:

- :class:`Prices`: USD per million tokens for models (and gateways) the caller names, exactly
  or by a prefix ending in ``*``;
- the price sheet of ``genai-prices`` (``pip install 'kova-sdk[prices]'``), a maintained
  database of the major providers' prices, looked up by the agent's provider (its host where
  the sheet knows it, else its wire format's provider: OpenAI, Anthropic, Google, AWS) and the
  model that answered.

A model found in neither has no cost (``None``): kova never guesses a price.

The sheet is read once per model and turned into a :class:`_Sheet` of ``Decimal`` prices for
the token kinds kova counts (input, cache reads, cache writes, input audio, output,
reasoning, output audio; and a price per request). A call is then priced with a few
``Decimal`` products, the way ``genai-prices`` computes it: the more specific kinds (a cache
read is an input token) are priced at their own price and taken out of their parent's count,
a kind without a price of its own stays in its parent, and a tiered price applies to all the
tokens once the prompt is past its threshold. ``genai-prices``' own ``calc_price`` takes about
70 us a call, too much for a turn's path; this takes a few.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from collections.abc import Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Final

from .._errors import BuildError
from .._record import Record, set_field
from .._responses import ModelResponse, Usage

__all__ = ["Prices", "Pricer", "price_of"]

_MILLION: Final = Decimal(1_000_000)
_THOUSAND: Final = Decimal(1_000)
_ZERO: Final = Decimal(0)

_KINDS: Final = (
    "input",
    "output",
    "cache_read",
    "cache_write",
    "reasoning",
    "input_audio",
    "output_audio",
)
"""The token kinds a :class:`Prices` entry may price (USD per million tokens)."""

# genai-prices' price keys for the kinds kova counts.
_SHEET_KEYS: Final = {
    "input_mtok": "input",
    "output_mtok": "output",
    "cache_read_mtok": "cache_read",
    "cache_write_mtok": "cache_write",
    "output_reasoning_mtok": "reasoning",
    "input_audio_mtok": "input_audio",
    "output_audio_mtok": "output_audio",
    "requests_kcount": "request",
}
# Kinds finer than what providers report to kova (a cache write's TTL, image or video
# tokens, cached audio, citations) and searches: their count is 0 for kova, so they add
# nothing and take nothing from their parent, as in genai-prices for the same usage.
_ZERO_KEYS: Final = frozenset(
    {
        "cache_write_5m_mtok",
        "cache_write_1h_mtok",
        "cache_audio_read_mtok",
        "cache_audio_write_mtok",
        "cache_image_read_mtok",
        "cache_text_read_mtok",
        "input_image_mtok",
        "input_video_mtok",
        "output_image_mtok",
        "output_video_mtok",
        "output_citation_mtok",
        "web_searches_kcount",
        "storage_searches_kcount",
    }
)

Price = Decimal | tuple[Decimal, tuple[tuple[int, Decimal], ...]]
"""A price per unit, or a tiered one: ``(base, ((start, price), ...))`` with ascending
starts; past ``start`` prompt tokens, ``price`` applies to all of a call's tokens."""


def usd(what: str, value: object, unit: str = "") -> Decimal:
    """``value`` (a ``Decimal``, ``int``, numeric ``str``, or ``float`` read by its shortest
    repr) as a finite ``Decimal`` of at least 0: a price, or a budget's amount (``unit``
    ``"USD"``). ``what`` names it in the errors."""
    number = f"a number of {unit}" if unit else "a number"
    if isinstance(value, bool):
        raise BuildError(f"{what} must be {number}, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BuildError(f"{what} must be finite, got {value!r}")
        value = Decimal(repr(value))  # 0.15 is 0.15, not its binary neighbour
    elif isinstance(value, int | str):
        try:
            value = Decimal(value)
        except ArithmeticError:
            raise BuildError(f"{what} must be {number}, got {value!r}") from None
    if not isinstance(value, Decimal):
        raise BuildError(
            f"{what} must be a Decimal, int, float or numeric str{f' ({unit})' if unit else ''}, "
            f"got {type(value).__name__}"
        )
    if not value.is_finite() or value < 0:
        raise BuildError(f"{what} must be at least 0, got {value}")
    return value


class Prices(Record):
    """Prices of the caller's own models and gateways, in USD per million tokens, given to an
    agent with ``AgentBuilder().prices(...)``::

        Prices({
            "my-llama": {"input": "0.20", "output": "0.60"},
            "gateway/*": {"input": 1, "output": 4, "cache_read": "0.1"},
            "gpt-4o": {"input": "2.25", "output": 9},  # a negotiated price
        })

    A model is named exactly, or by a prefix ending in ``*`` (the longest prefix wins; an
    exact name wins over any prefix); names are compared without case. Each entry needs
    ``input`` and ``output`` and may price ``cache_read``, ``cache_write``, ``reasoning``,
    ``input_audio`` and ``output_audio`` tokens apart (those without a price of their own
    cost what their parent does); ``request`` is a price per call. Numbers are ``Decimal``,
    ``int``, ``str`` or ``float`` (read by its shortest repr: ``0.15`` is 0.15).

    These prices come before the ``genai-prices`` sheet; ``sheet=False`` leaves the sheet out,
    so only these models have a cost.
    """

    models: Mapping[str, Mapping[str, Decimal]]
    """Each model's (or prefix's) prices, by kind."""
    sheet: bool
    """Whether models not named here are looked up in the ``genai-prices`` sheet."""

    def __init__(
        self,
        models: Mapping[str, Mapping[str, object]] | None = None,
        *,
        sheet: bool = True,
    ) -> None:
        if not isinstance(sheet, bool):
            raise BuildError(f"Prices(sheet=...) must be a bool, got {sheet!r}")
        if models is None:
            models = {}
        if not isinstance(models, Mapping):
            raise BuildError(
                "Prices() takes a mapping of model names to their prices, got "
                f"{type(models).__name__}"
            )
        checked: dict[str, Mapping[str, Decimal]] = {}
        for name, entry in models.items():
            if not isinstance(name, str) or not name.strip("*"):
                raise BuildError(f"a priced model needs a non-empty name, got {name!r}")
            if not isinstance(entry, Mapping):
                raise BuildError(
                    f"the prices of {name!r} must be a mapping of kinds to USD per million "
                    f"tokens, got {type(entry).__name__}"
                )
            unknown = sorted(str(kind) for kind in entry if kind not in (*_KINDS, "request"))
            if unknown:
                raise BuildError(
                    f"the prices of {name!r} name unknown kinds {unknown}; known: "
                    f"{', '.join((*_KINDS, 'request'))}"
                )
            missing = [kind for kind in ("input", "output") if kind not in entry]
            if missing:
                raise BuildError(f"the prices of {name!r} need {' and '.join(missing)}")
            key = name.lower()
            if key in checked:
                raise BuildError(f"{name!r} is priced twice (names are compared without case)")
            checked[key] = MappingProxyType(
                {kind: usd(f"the {kind} price of {name!r}", value) for kind, value in entry.items()}
            )
        set_field(self, "models", MappingProxyType(checked))
        set_field(self, "sheet", sheet)

    def _own(self, model: str) -> _Sheet | None:
        """The sheet of ``model`` from these prices (exact name, then longest prefix)."""
        models = self.models
        key = model.lower()
        entry = models.get(key)
        if entry is None:
            best = -1
            for name, prices in models.items():
                if name.endswith("*") and key.startswith(name[:-1]) and len(name) > best:
                    entry, best = prices, len(name)
        if entry is None:
            return None
        request = entry.get("request")
        return _Sheet(
            {kind: price for kind, price in entry.items() if kind != "request"},
            None if request is None else request * _THOUSAND,
        )


class _Sheet:
    """One model's prices, by kind (USD per million tokens; ``request``: per thousand calls,
    as the sheet gives it)."""

    __slots__ = (
        "cache_read",
        "cache_write",
        "cached_audio",
        "dearest_in",
        "dearest_out",
        "input",
        "input_audio",
        "output",
        "output_audio",
        "reasoning",
        "request",
    )

    def __init__(
        self, prices: Mapping[str, Price], request: Decimal | None, *, cached_audio: bool = False
    ) -> None:
        self.input: Price | None = prices.get("input")
        self.output: Price | None = prices.get("output")
        self.cache_read: Price | None = prices.get("cache_read")
        self.cache_write: Price | None = prices.get("cache_write")
        self.reasoning: Price | None = prices.get("reasoning")
        self.input_audio: Price | None = prices.get("input_audio")
        self.output_audio: Price | None = prices.get("output_audio")
        self.request = request
        # Cached audio has a price of its own, and kova's counts do not say how many of the
        # cached tokens were audio: a call with both has no cost (genai-prices refuses it too).
        self.cached_audio = cached_audio
        self.dearest_in = _dearest(
            (self.input, self.cache_read, self.cache_write, self.input_audio)
        )
        self.dearest_out = _dearest((self.output, self.reasoning, self.output_audio))

    def cost(self, usage: Usage) -> Decimal | None:
        """What ``usage`` costs; ``None`` if its counts contradict each other (more cached
        or audio tokens than prompt tokens, or cached audio priced apart)."""
        prompt = usage.input_tokens
        if self.cached_audio and usage.cache_read_tokens and usage.input_audio_tokens:
            return None
        total = _ZERO
        rest = prompt
        price = self.cache_read
        if price is not None and usage.cache_read_tokens:
            rest -= usage.cache_read_tokens
            total += _times(price, usage.cache_read_tokens, prompt)
        price = self.cache_write
        if price is not None and usage.cache_creation_tokens:
            rest -= usage.cache_creation_tokens
            total += _times(price, usage.cache_creation_tokens, prompt)
        price = self.input_audio
        if price is not None and usage.input_audio_tokens:
            rest -= usage.input_audio_tokens
            total += _times(price, usage.input_audio_tokens, prompt)
        price = self.input
        if price is not None and rest:
            total += _times(price, rest, prompt)
        rest_in = rest
        rest = usage.output_tokens
        price = self.reasoning
        if price is not None and usage.reasoning_tokens:
            rest -= usage.reasoning_tokens
            total += _times(price, usage.reasoning_tokens, prompt)
        price = self.output_audio
        if price is not None and usage.output_audio_tokens:
            rest -= usage.output_audio_tokens
            total += _times(price, usage.output_audio_tokens, prompt)
        price = self.output
        if price is not None and rest:
            total += _times(price, rest, prompt)
        if rest < 0 or rest_in < 0:
            return None
        request = self.request
        if request is not None:
            total += request * _THOUSAND  # per thousand calls, in micro-USD
        return total / _MILLION

    def worst(self, prompt: int, max_tokens: int) -> Decimal:
        """The most a call of ``prompt`` input tokens and at most ``max_tokens`` output
        tokens can cost: every input token at the dearest input-side price, every output
        token at the dearest output-side price."""
        total = _times(self.dearest_in, prompt, prompt) + _times(
            self.dearest_out, max_tokens, prompt
        )
        if self.request is not None:
            total += self.request * _THOUSAND
        return total / _MILLION


def _times(price: Price, count: int, prompt: int) -> Decimal:
    """``count`` tokens at ``price`` per million (its tier picked by ``prompt``), in
    micro-USD: a call's sum is divided by a million once (exact either way)."""
    if type(price) is Decimal:
        return price * count
    assert isinstance(price, tuple)
    base, tiers = price
    for start, tier_price in reversed(tiers):
        if prompt > start:
            return tier_price * count
    return base * count


def _dearest(prices: tuple[Price | None, ...]) -> Decimal:
    """The highest of ``prices`` (a tiered price by its highest tier: a worst case may only
    be too high)."""
    best = _ZERO
    for price in prices:
        if price is None:
            continue
        if type(price) is Decimal:
            top = price
        else:
            assert isinstance(price, tuple)
            base, tiers = price
            top = max((base, *(tier for _, tier in tiers)))
        best = max(best, top)
    return best


# -- the genai-prices sheet ---------------------------------------------------------------

# kova's wire formats and the sheet's provider that serves them at its official host.
_FAMILY: Final = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "bedrock": "aws",
}


def _sheet_price(value: Any) -> Price:
    """A genai-prices price (a Decimal or TieredPrices) as a :data:`Price`."""
    if isinstance(value, Decimal):
        return value
    tiers = tuple(sorted((int(tier.start), Decimal(tier.price)) for tier in value.tiers))
    return (Decimal(value.base), tiers)


def _from_sheet(model_price: Any) -> _Sheet | None:
    """A genai-prices ``ModelPrice`` as a :class:`_Sheet`; ``None`` if it prices by a unit
    kova does not count (characters, messages, audio hours, pages): no guess then."""
    prices: dict[str, Price] = {}
    request: Decimal | None = None
    cached_audio = False
    for key, value in vars(model_price).items():
        if value is None or key.startswith("_"):
            continue
        cached_audio = cached_audio or key == "cache_audio_read_mtok"
        kind = _SHEET_KEYS.get(key)
        if kind is None:
            if key in _ZERO_KEYS:
                continue
            return None
        if kind == "request":
            request = Decimal(value)
        else:
            prices[kind] = _sheet_price(value)
    if "input" not in prices and "output" not in prices:
        return None
    return _Sheet(prices, request, cached_audio=cached_audio)


def _sheet_lookup(
    provider_id: str | None, api_url: str | None, model: str, *, by_model: bool = False
) -> tuple[Any, bool]:
    """The genai-prices model for ``model`` (``None`` if the sheet has none), and whether its
    price depends on the date or time (then it is resolved per call). Looked up by the
    provider's host, then by ``provider_id``; ``by_model``: by the model's name alone (a
    fallback provider, whose answering provider only the model names)."""
    try:
        from genai_prices import data_snapshot
    except ImportError:  # the extra is not installed: only the caller's prices
        return None, False
    snapshot = data_snapshot.get_snapshot()
    info = None
    searches: list[tuple[str | None, str | None]] = []
    if api_url is not None:
        searches.append((None, api_url))
    if provider_id is not None:
        searches.append((provider_id, None))
    elif by_model:
        searches.append((None, None))
    for by_id, by_url in searches:
        try:
            _provider, info = snapshot.find_provider_model(model, None, by_id, by_url)
        except LookupError:
            continue
        break
    if info is None:
        return None, False
    return info, isinstance(info.prices, list)


def load_sheet() -> None:
    """Import the ``genai-prices`` sheet (about 150 ms: an agent does it in a worker thread
    when it opens, so its first call does not block the event loop)."""
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return
    data_snapshot.get_snapshot()


class Pricer:
    """Prices an agent's model calls: its :class:`Prices`, then the sheet for its provider.

    Plain state (a cache of each model's :class:`_Sheet`, filled on first use), used from
    one trio run; every method is synchronous.
    """

    __slots__ = ("_api_url", "_by_model", "_cache", "_looks_up", "_prices", "_provider_id")

    def __init__(self, prices: Prices | None, provider: object) -> None:
        self._prices = prices if prices is not None else _DEFAULT
        name = getattr(provider, "name", None)
        name = name if isinstance(name, str) else ""
        self._provider_id = _FAMILY.get(name)
        # A fallback provider: the model that answered says whose it is.
        self._by_model = name.startswith("fallback(")
        url = getattr(getattr(provider, "transport", None), "base_url", None)
        # Ollama serves local models: the sheet's prices of the same names are not its own.
        self._api_url = url if isinstance(url, str) and name != "ollama" else None
        # Whether a model the caller's prices do not name is looked up in the sheet.
        self._looks_up = self._prices.sheet and (
            self._provider_id is not None or self._api_url is not None or self._by_model
        )
        # model -> (sheet or None, the genai-prices model when its price is dated)
        self._cache: dict[str, tuple[_Sheet | None, Any]] = {}

    def needs_sheet(self) -> bool:
        """Whether this pricer looks models up in the sheet and the sheet is not loaded yet
        (``genai-prices`` installed)."""
        if not self._looks_up or "genai_prices.data" in sys.modules:
            return False
        try:
            return importlib.util.find_spec("genai_prices") is not None
        except (ImportError, ValueError):
            return False

    @property
    def can_price(self) -> bool:
        """Whether any model may have a price here (the caller's prices name some, or the
        sheet is looked up for this provider); if not, every call's cost is ``None``."""
        return bool(self._prices.models) or self._looks_up

    def sheet(self, model: str | None, when: float | None = None) -> _Sheet | None:
        """``model``'s prices (at the time ``when``, default now, for a dated price), or
        ``None`` if nobody knows them."""
        if model is None:
            return None
        cache = self._cache
        cached = cache.get(model)
        if cached is None:
            if len(cache) >= 1024:  # models named per call: keep the cache bounded
                cache.clear()
            cached = cache[model] = self._resolve(model)
        sheet, dated = cached
        if dated is not None:
            from datetime import UTC, datetime

            moment = datetime.now(tz=UTC) if when is None else datetime.fromtimestamp(when, UTC)
            return _from_sheet(dated.get_prices(moment))
        return sheet

    def _resolve(self, model: str) -> tuple[_Sheet | None, Any]:
        own = self._prices._own(model)
        if own is not None or not self._looks_up:
            return own, None
        info, dated = _sheet_lookup(
            self._provider_id, self._api_url, model, by_model=self._by_model
        )
        if info is None:
            return None, None
        if dated:
            return None, info
        return _from_sheet(info.prices), None  # not dated: one price

    def cost(self, usage: Usage, model: str | None) -> Decimal | None:
        """What ``usage`` of a call answered by ``model`` costs (``None``: unknown)."""
        sheet = self.sheet(model)
        return None if sheet is None else sheet.cost(usage)

    def priced(self, response: ModelResponse, model: str | None) -> ModelResponse:
        """``response`` with its usage priced when first read (by the model that answered,
        else ``model``, the one asked for, at this moment's prices): the same cost as
        pricing it now, without importing the price sheet for a program that never reads
        one. A usage that has its cost already keeps it."""
        usage = response.usage
        if usage is None or usage.cost is not None:
            return response
        later = usage.priced_later((self.cost_of, response.model, model, time.time()))
        # Built directly: a generic evolve costs several times this.
        return ModelResponse(
            content=response.content,
            stop_reason=response.stop_reason,
            usage=later,
            thinking=response.thinking,
            model=response.model,
            id=response.id,
        )

    def cost_of(
        self, usage: Usage, answered: str | None, asked: str | None, when: float
    ) -> Decimal | None:
        """What ``usage`` of a call costs: by the model that answered (else ``asked``, the
        one asked for) at the time ``when`` (``None``: unknown)."""
        sheet = self.sheet(answered or asked, when)
        if sheet is None and answered is not None and asked is not None:
            sheet = self.sheet(asked, when)
        return None if sheet is None else sheet.cost(usage)


_DEFAULT: Final = Prices()


def price_of(model: str, usage: Usage, *, provider: str | None = None) -> Decimal | None:
    """What ``usage`` of ``model`` costs by the sheet (``provider``: the sheet's provider id,
    e.g. ``"openai"``), or ``None``. For tests and tools; an agent prices its own calls."""
    info, _dated = _sheet_lookup(provider, None, model)
    if info is None:
        return None
    from datetime import UTC, datetime

    sheet = _from_sheet(info.get_prices(datetime.now(tz=UTC)))
    return None if sheet is None else sheet.cost(usage)
