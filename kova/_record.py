"""Frozen value classes that cost nothing to define, and kova's one rule for classes that
hold data.

**The rule** (also in ``docs/contributing.md``):

1. A frozen value -- the data model, stream and agent events, actor messages, results,
   codecs, a tool's own configuration, any internal value type -- is a :class:`Record`.
   Checks go in ``__post_init__``. A hand-written keyword-only ``__init__`` only where it
   pays: a class built per streamed token (measured, see below), one that converts its
   arguments (``Iterable`` to ``tuple``, ``None`` to a computed default), or one taken
   positionally (a codec's config, a tool's policy).
2. A user-facing configuration whose fields *convert* what the caller passes (a ``str`` key
   into a :class:`~kova.Secret`, a mapping into :class:`~kova.SecretHeaders`, a list into a
   tuple) is an ``@attrs.frozen(kw_only=True)`` class: mypy checks attrs converters (a
   caller may pass the ``str``), and a record would need a hand-written ``__init__``
   repeating every field. These are the provider configs (``HttpSettings`` and its
   subclasses), ``ToolPolicy``/``WebPolicy``, the MCP transports and ``TelemetryConfig``;
   each is imported only with its provider or feature, never by ``import kova.agent``.
3. Anything with mutable state -- an actor, a fake server, a session, an accumulator, a
   histogram -- is a plain class with ``__slots__`` and its own ``__init__``: neither attrs
   nor a record.

``tests/test_value_rule.py`` pins the rule: an attrs class outside the configurations it
lists fails it.

Measured (``bench/values.py``): defining a record costs a few percent of an attrs class
(attrs writes, compiles and re-slots each class at import), and constructing one with a
hand-written ``__init__`` costs what the same attrs class does.

kova's data model, telemetry events and actor messages were frozen, slotted attrs classes.
attrs builds each one at import: it writes ``__init__``, ``__repr__``, ``__eq__`` and
``__hash__`` as source, compiles it and makes a second class for the slots, about a
millisecond per class, which made an agent program's import cost several tens of
milliseconds on top of ``import httpx2, trio`` just to define classes.

A :class:`Record` subclass declares its fields as annotations, with defaults where it has
them, like a dataclass::

    class ToolStarted(Record):
        turn_id: int
        call: ToolUse
        error: str | None = None

Its metaclass turns the annotations into ``__slots__`` when the class is made (taking the
defaults out of the class body first, so slots and defaults coexist), and the base class
gives it what attrs gave: a keyword-only ``__init__``, immutability
(``attrs.exceptions.FrozenInstanceError`` on assignment), ``repr``, field-wise equality and
hashing, pickling and copying, weak references, and the attrs protocol itself (``attrs.has``,
``attrs.fields``, ``attrs.evolve``, ``attrs.asdict`` work on every record; the attrs view of
the fields is built the first time something asks for it). Nothing is compiled at import.

Type checkers see the same thing: ``Record`` is a :func:`typing.dataclass_transform` base
(keyword-only, frozen), so mypy synthesizes each subclass's ``__init__`` from its annotations
and checks every keyword of a constructor call; and to mypy's attrs plugin ``Record`` is an
attrs class, so ``attrs.evolve`` (and kova's :func:`evolve`) are checked against that
``__init__`` too.

Rules for a subclass:

- its fields are its annotations (``ClassVar`` aside), in order; a subclass of a record adds
  fields to its base's. Defaults are shared by every instance: use immutable values
  (``()``, ``frozenset()``, :data:`EMPTY` for a ``Mapping``, another record).
- The generic ``__init__`` takes every field as a keyword argument of the same name (no
  private ``_fields``) and stores it as given. It costs about half as much again as a
  hand-written one (a 6-field event: ~17k against ~12k instructions), so a class built per
  streamed token writes its own keyword-only ``__init__`` (setting each field with
  :func:`set_field`), and so does a class that converts its arguments (``Iterable`` to
  ``tuple``, ``None`` to a computed default) or takes them positionally. A class that only
  checks its values defines ``__post_init__(self)``, which the generic ``__init__`` calls
  after storing the fields.
- ``class X(Record, eq_exclude=("a",))`` leaves fields out of equality and hashing,
  ``repr_exclude=`` out of ``repr``. ``private=("_x",)`` adds slots that are no fields
  (state a value keeps for itself: not compared, shown, copied or pickled); its own
  ``__init__`` sets them.
- A subclass that adds no fields keeps its base's ``__init__``; under a base that wrote its
  own, it says so to type checkers with ``class X(Base, init=False)`` (else mypy would
  synthesize an ``__init__`` from the fields).
- A class may still spell out ``__slots__`` (exactly its fields) and its ``__init__``; it
  then takes no defaults in its body.
"""

from __future__ import annotations

import inspect
import operator
from itertools import repeat
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar, cast, dataclass_transform

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Self

__all__ = ["EMPTY", "Record", "evolve", "set_field", "slot_setters"]

EMPTY: Mapping[str, Any] = MappingProxyType({})
"""The default of a ``Mapping`` field: one empty, read-only mapping every record shares."""

set_field: Callable[[object, str, object], None] = object.__setattr__
"""Store a field in ``__init__`` (a record refuses ordinary assignment)."""


def slot_setters(cls: type, *names: str) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of each of ``cls``'s slots ``names`` (its own descriptor's), for an
    ``__init__`` of a value made per call: a field stored through it costs about a third less
    than with :func:`set_field`, which looks the name up again and checks the type's MRO."""
    return tuple(getattr(cls, name).__set__ for name in names)


def _key_getter(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    if len(names) >= 2:
        return operator.attrgetter(*names)
    if len(names) == 1:
        name = names[0]
        return lambda value: (getattr(value, name),)
    return lambda _value: ()


def _own_fields(namespace: dict[str, Any]) -> tuple[str, ...]:
    """The fields a class body annotates: every annotation but ``ClassVar``."""
    annotations: dict[str, Any] = namespace.get("__annotations__", {})
    hints = annotations.values()
    # Class bodies run at import: look for ClassVar in all the (string) hints at once.
    if all(map(str.__instancecheck__, hints)) and "ClassVar" not in "".join(hints):
        return tuple(annotations)
    return tuple(
        name
        for name, hint in annotations.items()
        if not str(hint).startswith(("ClassVar", "typing.ClassVar"))
    )


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

    annotations: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        annotations.update(getattr(klass, "__annotations__", {}))
    generic = _is_generic(cls.__init__)
    parameters = {} if generic else inspect.signature(cls.__init__).parameters
    these = {}
    for name in cls.__record_fields__:
        if generic:
            alias, init, default = name, True, cls.__record_defaults__.get(name, attrs.NOTHING)
        else:
            alias = name if name in parameters else name.lstrip("_")  # attrs' rule for _private
            parameter = parameters.get(alias)
            init = parameter is not None
            default = (
                attrs.NOTHING
                if parameter is None or parameter.default is inspect.Parameter.empty
                else parameter.default
            )
        these[name] = attrs.field(
            default=default,
            init=init,
            eq=name in cls.__record_eq__,
            repr=name in cls.__record_repr__,
            type=annotations.get(name),
            alias=alias,
        )
    shadow = attrs.make_class(cls.__name__, these, frozen=True, kw_only=True, slots=False)
    return attrs.fields(shadow)


class _RecordType(type):
    """The metaclass of records: makes ``__slots__`` from the annotations and works out
    everything the base class's methods need, before the class is made (a dunder attribute
    set on a class afterwards costs more than one in its namespace). Instances are made by
    ``type.__call__``, so construction costs nothing extra."""

    @property
    def __signature__(cls) -> inspect.Signature | None:
        """What ``inspect.signature`` and ``help()`` show for a record with the generic
        ``__init__``: its fields as keyword-only parameters, with their annotations and
        defaults (``None`` for a class that wrote its own ``__init__``: inspect reads that)."""
        if not _is_generic(cast("Any", cls).__init__):
            return None
        annotations: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            annotations.update(inspect.get_annotations(klass))
        defaults: dict[str, Any] = getattr(cls, "__record_defaults__", {})
        empty = inspect.Parameter.empty
        return inspect.Signature(
            [
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=defaults.get(name, empty),
                    annotation=annotations.get(name, empty),
                )
                for name in getattr(cls, "__record_fields__", ())
            ]
        )

    def __new__(
        mcls,
        name: str,
        bases: tuple[type, ...],
        namespace: dict[str, Any],
        *,
        eq_exclude: tuple[str, ...] = (),
        repr_exclude: tuple[str, ...] = (),
        init: bool = True,
        private: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> _RecordType:
        if not bases:  # Record itself
            return super().__new__(mcls, name, bases, namespace, **kwargs)
        new = _own_fields(namespace)
        if "__slots__" in namespace:
            own = namespace["__slots__"]
            if set((own,) if isinstance(own, str) else own) != set(new):
                raise TypeError(f"{name}: __slots__ must list exactly its annotated fields")
            defaults = {}
        else:
            # A slot and a class attribute of the same name cannot coexist: the default
            # leaves the class body before the class (and its slots) is made.
            defaults = {field: namespace.pop(field) for field in new if field in namespace}
        namespace["__slots__"] = (*new, *private)  # the fields in the annotations' order
        base: Any = bases[0]  # the record this one extends (first, as a rule)
        if not isinstance(base, _RecordType):
            base = next(base for base in bases if isinstance(base, _RecordType))
        fields, eq_fields, repr_fields = new, new, new
        if base.__record_fields__:
            fields = (*base.__record_fields__, *new)
            eq_fields = (*base.__record_eq__, *new)
            repr_fields = (*base.__record_repr__, *new)
            defaults = {**base.__record_defaults__, **defaults}
        if eq_exclude:
            eq_fields = tuple(field for field in eq_fields if field not in eq_exclude)
        if repr_exclude:
            repr_fields = tuple(field for field in repr_fields if field not in repr_exclude)
        namespace["__record_fields__"] = fields
        namespace["__record_defaults__"] = defaults
        namespace["__record_eq__"] = eq_fields
        namespace["__record_repr__"] = repr_fields
        namespace["__record_key__"] = staticmethod(_key_getter(eq_fields))
        namespace["__record_init__"] = (
            tuple([field for field in fields if field not in defaults]),
            tuple(defaults.items()),
        )
        # A class that adds no fields keeps its base's __init__ (to mypy too: such a class
        # under a base that wrote its own __init__ says init=False).
        if new and init and "__init__" not in namespace:
            if any(map(str.startswith, new, repeat("_"))):
                raise TypeError(f"{name}: a record with private fields writes its own __init__")
            namespace["__init__"] = _init_checked if "__post_init__" in namespace else _init
        return super().__new__(mcls, name, bases, namespace, **kwargs)


if TYPE_CHECKING:
    # To mypy's attrs plugin, Record is an attrs class: it then checks attrs.evolve (and
    # kova's evolve) on every record against the record's __init__ (the one
    # dataclass_transform synthesized, or the one the class wrote).
    from attrs import evolve as evolve
    from attrs import frozen as _attrs_view
else:

    def _attrs_view(cls: type) -> type:
        return cls


@dataclass_transform(kw_only_default=True, frozen_default=True)
@_attrs_view
class Record(metaclass=_RecordType):
    """Base of kova's frozen value classes (see the module docstring)."""

    __slots__ = ("__weakref__",)

    __record_fields__: ClassVar[tuple[str, ...]] = ()
    __record_defaults__: ClassVar[dict[str, Any]] = {}
    __record_eq__: ClassVar[tuple[str, ...]] = ()
    __record_repr__: ClassVar[tuple[str, ...]] = ()
    __record_key__: ClassVar[Callable[[object], tuple[Any, ...]]]
    # The generic __init__'s view: the required fields, and the others with their defaults.
    __record_init__: ClassVar[tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]]
    __attrs_attrs__: ClassVar[Any] = _AttrsFields()

    if TYPE_CHECKING:  # the class keywords, which the metaclass takes

        def __init_subclass__(
            cls,
            *,
            eq_exclude: tuple[str, ...] = (),
            repr_exclude: tuple[str, ...] = (),
            init: bool = True,
            private: tuple[str, ...] = (),
        ) -> None: ...

    def __setattr__(self, name: str, value: object) -> None:
        _frozen()

    def __delattr__(self, name: str) -> None:
        _frozen()

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


def _frozen() -> NoReturn:
    # attrs' own error, so assigning to any frozen kova value (a record or an attrs config)
    # raises the same type; imported here, when it is raised, not with this module.
    from attrs.exceptions import FrozenInstanceError

    raise FrozenInstanceError


def _init(self: Record, /, *args: Any, **values: Any) -> None:
    """The ``__init__`` of a record that writes none, until its first call: that call writes
    the class its own ``__init__`` (:func:`_compiled_init`) and hands over to it."""
    _compiled_init(type(self))(self, *args, **values)


def _init_checked(self: Record, /, *args: Any, **values: Any) -> None:
    """:func:`_init` for a class with a ``__post_init__``."""
    _compiled_init(type(self))(self, *args, **values)


_GENERIC_INITS = (_init, _init_checked)


def _is_generic(init: object) -> bool:
    """Whether ``init`` is the ``__init__`` the base gives (before or after compiling)."""
    return init in _GENERIC_INITS or getattr(init, "__record_generic__", False)


def _compiled_init(cls: type[Record]) -> Callable[..., None]:
    """Write, compile and install on ``cls`` a keyword-only ``__init__`` that stores each
    field (``object.__setattr__`` per field, then ``__post_init__`` if the class has one).

    Done the first time the class is instantiated, not at import: most of kova's records are
    never built in a given program. Compiled, a 6-field record is built in about the
    instructions a hand-written ``__init__`` takes; the generic loop over the fields took half
    as much again. Python's own argument checks raise the ``TypeError`` a call of the wrong
    shape gets, named ``Cls.__init__()``.
    """
    required, optional = cls.__record_init__
    namespace: dict[str, Any] = {}
    parameters = [*required]
    for index, (name, default) in enumerate(optional):
        namespace[f"__default{index}"] = default
        parameters.append(f"{name}=__default{index}")
    body = []
    for index, (name, setter) in enumerate(
        zip(cls.__record_fields__, slot_setters(cls, *cls.__record_fields__), strict=True)
    ):
        namespace[f"__set{index}"] = setter
        body.append(f"    __set{index}(self, {name})")
    if _has_post_init(cls):
        body.append("    self.__post_init__()")
    signature = f"self, *, {', '.join(parameters)}" if parameters else "self"
    source = f"def __init__({signature}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(compile(source, f"<record {cls.__qualname__}>", "exec"), namespace)
    init: Any = namespace["__init__"]
    init.__code__ = init.__code__.replace(co_qualname=f"{cls.__name__}.__init__")
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__record_generic__ = True
    type.__setattr__(cls, "__init__", init)
    return cast("Callable[..., None]", init)


def _has_post_init(cls: type) -> bool:
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is _init_checked:
            return True
        if init is _init:
            return False
    return False


R = TypeVar("R", bound=Record)

if not TYPE_CHECKING:

    def evolve(value: R, /, **changes: Any) -> R:
        """A copy of the record ``value`` with ``changes`` applied (like ``attrs.evolve``)."""
        fields = {name.lstrip("_"): getattr(value, name) for name in value.__record_fields__}
        return cast("R", cast("Any", type(value))(**{**fields, **changes}))
