"""Frozen value classes that cost nothing to define.

kova's data model, telemetry events and actor messages were frozen, slotted attrs classes.
attrs builds each one at import: it writes ``__init__``, ``__repr__``, ``__eq__`` and
``__hash__`` as source, compiles it and makes a second class for the slots, about a
millisecond per class, which made an agent program's import cost several tens of
milliseconds on top of ``import httpx2, trio`` just to define classes.

A :class:`Record` subclass spells out its slots and writes its keyword-only ``__init__``
(compiled once into the ``.pyc`` like any other code); the base class gives it what attrs
gave: immutability (``attrs.exceptions.FrozenInstanceError`` on assignment), ``repr``,
field-wise equality and hashing, pickling and copying, weak references, and the attrs
protocol itself (``attrs.has``, ``attrs.fields``, ``attrs.evolve``, ``attrs.asdict`` work on
every record; the attrs view of the fields is built the first time something asks for it).

Rules for a subclass:

- its fields are its annotations (``ClassVar`` aside), in order, and ``__slots__`` lists
  exactly them (a subclass of a record adds fields to its base's);
- ``__init__`` takes every field as an argument of the same name (``_private`` fields without
  the underscore, as in attrs) and sets each one with :func:`set_field` (validation and
  conversion happen there, before the value is stored);
- ``class X(Record, eq_exclude=("a",))`` leaves fields out of equality and hashing,
  ``repr_exclude=`` out of ``repr``.
"""

from __future__ import annotations

import inspect
import operator
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from attrs.exceptions import FrozenInstanceError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

__all__ = ["Record", "evolve", "set_field"]

set_field: Callable[[object, str, object], None] = object.__setattr__
"""Store a field in ``__init__`` (a record refuses ordinary assignment)."""


def _key_getter(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    if len(names) >= 2:
        return operator.attrgetter(*names)
    if len(names) == 1:
        name = names[0]
        return lambda value: (getattr(value, name),)
    return lambda _value: ()


class _AttrsFields:
    """``Record.__attrs_attrs__``: the attrs view of a record's fields, built on first use."""

    def __get__(self, instance: object, owner: type[Record]) -> Any:
        if owner is Record:
            return None
        fields = _attrs_fields(owner)
        type.__setattr__(owner, "__attrs_attrs__", fields)  # cached on the class
        return fields


def _attrs_fields(cls: type[Record]) -> Any:
    import attrs

    parameters = inspect.signature(cls.__init__).parameters
    annotations: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        annotations.update(getattr(klass, "__annotations__", {}))
    these = {}
    for name in cls.__record_fields__:
        alias = name if name in parameters else name.lstrip("_")  # attrs' rule for _private
        parameter = parameters.get(alias)
        default = (
            attrs.NOTHING
            if parameter is None or parameter.default is inspect.Parameter.empty
            else parameter.default
        )
        these[name] = attrs.field(
            default=default,
            init=parameter is not None,
            eq=name in cls.__record_eq__,
            repr=name in cls.__record_repr__,
            type=annotations.get(name),
            alias=alias,
        )
    shadow = attrs.make_class(cls.__name__, these, frozen=True, kw_only=True, slots=False)
    return attrs.fields(shadow)


class Record:
    """Base of kova's frozen value classes (see the module docstring)."""

    __slots__ = ("__weakref__",)

    __record_fields__: ClassVar[tuple[str, ...]] = ()
    __record_eq__: ClassVar[tuple[str, ...]] = ()
    __record_repr__: ClassVar[tuple[str, ...]] = ()
    __record_key__: ClassVar[Callable[[object], tuple[Any, ...]]]
    __attrs_attrs__: ClassVar[Any] = _AttrsFields()

    def __init_subclass__(
        cls, *, eq_exclude: tuple[str, ...] = (), repr_exclude: tuple[str, ...] = (), **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__slots__", ())
        if isinstance(own, str):
            own = (own,)
        # The fields in the order of their annotations (__slots__ is sorted).
        annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063  # the cheap way
        if len(annotations) == len(own):
            new = tuple(annotations)
        else:
            new = tuple(
                name
                for name, hint in annotations.items()
                if not str(hint).startswith(("ClassVar", "typing.ClassVar"))
            )
        if set(new) != set(own):
            raise TypeError(f"{cls.__name__}: __slots__ must list exactly its annotated fields")
        base = cls.__record_fields__
        fields = (*base, *new) if base else new
        eq_fields = (*cls.__record_eq__, *new) if base else new
        repr_fields = (*cls.__record_repr__, *new) if base else new
        if eq_exclude:
            eq_fields = tuple(name for name in eq_fields if name not in eq_exclude)
        if repr_exclude:
            repr_fields = tuple(name for name in repr_fields if name not in repr_exclude)
        cls.__record_fields__ = fields
        cls.__record_eq__ = eq_fields
        cls.__record_repr__ = repr_fields
        cls.__record_key__ = staticmethod(_key_getter(eq_fields))

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError

    def __repr__(self) -> str:
        name = self.__class__.__qualname__.rsplit(">.", 1)[-1]
        fields = ", ".join(f"{field}={getattr(self, field)!r}" for field in self.__record_repr__)
        return f"{name}({fields})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        key = type(self).__record_key__
        return key(self) == key(other)

    def __ne__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        key = type(self).__record_key__
        return key(self) != key(other)

    def __hash__(self) -> int:
        return hash((self.__class__, *type(self).__record_key__(self)))

    def __replace__(self, **changes: Any) -> Self:
        """``copy.replace(value, **changes)`` (Python 3.13): a copy with ``changes`` applied."""
        return evolve(self, **changes)

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__record_fields__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            set_field(self, name, value)


R = TypeVar("R", bound=Record)


def evolve(value: R, /, **changes: Any) -> R:
    """A copy of the record ``value`` with ``changes`` applied (like ``attrs.evolve``)."""
    fields = {name.lstrip("_"): getattr(value, name) for name in value.__record_fields__}
    return cast("R", cast("Any", type(value))(**{**fields, **changes}))
