"""``@tool``: a plain Python function as a :class:`~kova.tools.Tool`."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import inspect
import json
import re
import sys
from collections.abc import Callable, Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    Literal,
    ParamSpec,
    TypeAlias,
    TypeVar,
    overload,
)

import attrs
import trio

from .._door import ASYNCIO_HOST, asyncio_tool_error
from .._log import get_logger
from .._models import Document, Image, Text, ToolAnnotations, ToolResult
from ._context import ToolContext, current_tool_context
from ._errors import InvalidToolArguments, ToolDefinitionError
from ._schema import ParameterSpec, build_parameters, parse_docstring
from ._validate import ArgumentValidator

if TYPE_CHECKING:
    from .._models import JSONObject

__all__ = ["FunctionTool", "tool"]

log = get_logger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

RunsOn: TypeAlias = Literal["trio", "asyncio"]
"""Which event loop a tool's coroutine is awaited on (see :func:`tool`)."""

_OUTSIDE: ToolContext[None] = ToolContext(call_id="", turn_id="", agent="", deps=None)
"""The context a tool called outside an agent's tool pool gets (``tool.execute(...)`` in a
test): empty ids, no deps."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What every provider accepts as a tool name (OpenAI and Anthropic use this exact rule)."""


class FunctionTool(Generic[P, R]):
    """A function wrapped by :func:`tool`: a :class:`~kova.tools.Tool` that is still callable.

    Calling it calls the function unchanged (``get_weather("Oslo")``); :meth:`execute` is the
    path the agent loop takes, with JSON arguments.
    """

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        abandon_on_cancel: bool = False,
        annotations: ToolAnnotations | None = None,
        runs_on: RunsOn = "trio",
        defer: bool = False,
        inline: bool = False,
    ) -> None:
        where = f"@tool {getattr(function, '__qualname__', function)!r}"
        if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
            raise ToolDefinitionError(f"{where}: a generator cannot be a tool; return a value")
        tool_name = name if name is not None else getattr(function, "__name__", None)
        if tool_name is None:
            raise ToolDefinitionError(f"{where}: it has no __name__; pass @tool(name=...)")
        if not isinstance(tool_name, str) or not _NAME.match(tool_name):
            raise ToolDefinitionError(
                f"{where}: tool name {tool_name!r} must be 1 to 64 characters of "
                "letters, digits, '_' or '-'"
            )
        if annotations is not None and not isinstance(annotations, ToolAnnotations):
            raise ToolDefinitionError(
                f"{where}: annotations must be a kova.ToolAnnotations, "
                f"not {type(annotations).__name__}"
            )
        if not isinstance(defer, bool):
            raise ToolDefinitionError(f"{where}: defer must be a bool, not {defer!r}")
        is_async = inspect.iscoroutinefunction(function) or (
            # a callable instance whose __call__ is async
            not inspect.isroutine(function) and inspect.iscoroutinefunction(type(function).__call__)
        )
        if runs_on not in ("trio", "asyncio"):
            raise ToolDefinitionError(
                f'{where}: runs_on must be "trio" or "asyncio", not {runs_on!r}'
            )
        if not isinstance(inline, bool):
            raise ToolDefinitionError(f"{where}: inline must be a bool, not {inline!r}")
        if inline and is_async:
            raise ToolDefinitionError(
                f"{where}: inline=True is for a plain function; an async one already runs in "
                "the turn's own task"
            )
        if runs_on == "asyncio" and not is_async:
            raise ToolDefinitionError(
                f'{where}: runs_on="asyncio" is for async functions written for asyncio '
                "libraries; a plain function already runs in a worker thread"
            )
        doc_description, argument_docs = parse_docstring(inspect.getdoc(function))
        parameters, specs = build_parameters(function, where=where, argument_docs=argument_docs)
        self._function = function
        self._name = tool_name
        self._description = description if description is not None else doc_description
        self._parameters: JSONObject = parameters
        self._specs: tuple[ParameterSpec, ...] = specs
        # Every parameter a keyword taken as the JSON holds it: valid arguments are the call's
        # keywords as they are (the schema allows no other property).
        self._plain = all(
            spec.trivial and not spec.context and not spec.positional_only for spec in specs
        )
        self._is_async = is_async
        self._runs_on: RunsOn = runs_on
        self._abandon_on_cancel = abandon_on_cancel
        self._annotations = annotations
        self._defer = defer
        self._inline = inline
        self._validator = ArgumentValidator(parameters)
        functools.update_wrapper(self, function)

    @property
    def name(self) -> str:
        """The tool's name: the function's ``__name__`` unless ``@tool(name=...)`` set it."""
        return self._name

    @property
    def description(self) -> str:
        """The docstring's text before its first section, unless ``description=`` set it."""
        return self._description

    @property
    def defer(self) -> bool:
        """Whether the model is offered this tool only once it finds it with
        ``search_tools`` (``@tool(defer=True)``; docs/tools.md, "Many tools")."""
        return self._defer

    @property
    def parameters(self) -> JSONObject:
        """The JSON Schema built from the signature (the same object on every access)."""
        return self._parameters

    @property
    def annotations(self) -> ToolAnnotations | None:
        """Hints for the host (``@tool(annotations=...)``), or ``None``."""
        return self._annotations

    @property
    def runs_on(self) -> RunsOn:
        """``"asyncio"`` for a coroutine awaited on the host asyncio loop (under
        :mod:`kova.asyncio`), else ``"trio"``."""
        return self._runs_on

    @property
    def function(self) -> Callable[P, R]:
        """The undecorated function."""
        return self._function

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<FunctionTool {self._name!r} wrapping {self._function!r}>"

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Validate ``arguments``, call the function with them and wrap what it returns.

        Invalid arguments are not an exception: they come back as an error result that lists
        the problems, for the model to correct. An exception raised by the function
        propagates (the agent loop reports it to the model in-band).

        A sync function runs in a worker thread (``trio.to_thread.run_sync``), so it does not
        block other tasks. An async function with ``runs_on="asyncio"`` is awaited as an
        asyncio task on the loop :mod:`kova.asyncio` runs kova on (without one it fails with
        a :class:`~kova.BuildError` naming the fix). Cancellation: an async function is
        cancelled as usual (an asyncio one through ``Task.cancel``, waited for). A thread
        cannot be interrupted: by default cancellation waits for the function to return (so
        no work outlives the call); with ``@tool(abandon_on_cancel=True)`` the call returns at
        once and the thread finishes in the background, its result discarded.

        Returns:
            ``str`` as the text; a ``ToolResult`` unchanged; ``Text``/``Image`` (or a list of
            them) as content parts; anything else as JSON text (dataclasses, attrs classes,
            pydantic models, enums, sets and dates are converted).
        """
        problems = self._validator.problems(arguments)
        if problems:
            return ToolResult.error(str(InvalidToolArguments(problems, tool_name=self._name)))
        return await self.execute_validated(arguments)

    async def execute_validated(
        self, arguments: JSONObject, *, tool_use_id: str = ""
    ) -> ToolResult:
        """:meth:`execute` for arguments already validated against :attr:`parameters`.

        The agent's tool pool validates every call before approval (through the
        :class:`~kova.tools.ToolRegistry`, which compiles the schema once); this skips the
        second, identical check. Arguments that do not match the schema may fail in the
        function itself. ``tool_use_id``: the result answers that call (a
        :class:`~kova.ToolResult` the function returns itself is returned as it is).
        """
        args: Any
        kwargs: Any
        args, kwargs = ((), arguments) if self._plain else self._bind(arguments)
        result: Any
        if self._runs_on == "asyncio":
            host = ASYNCIO_HOST.get()
            if host is None:
                raise asyncio_tool_error([self._name])
            call = functools.partial(self._function, *args, **kwargs)
            result = await host.run_on_host(call)  # type: ignore[arg-type]  # async, checked above
        elif self._is_async:
            result = await self._function(*args, **kwargs)  # type: ignore[misc]
        elif self._inline:  # declared quick: no worker thread (the hop costs ~60 us a call)
            result = self._function(*args, **kwargs)
        else:
            call = functools.partial(self._function, *args, **kwargs)
            result = await trio.to_thread.run_sync(
                call,
                abandon_on_cancel=self._abandon_on_cancel,
                # trio documents any object with these two methods; its stubs say CapacityLimiter.
                limiter=_Unpaused(trio.to_thread.current_default_thread_limiter()),  # type: ignore[arg-type]
            )
        return self._to_result(result, tool_use_id)

    def _bind(self, arguments: JSONObject) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for spec in self._specs:
            if spec.context:
                value: Any = current_tool_context() or _OUTSIDE
            elif spec.name in arguments:
                raw = arguments[spec.name]
                value = raw if spec.trivial else spec.convert(raw)
            elif spec.positional_only:
                value = spec.default  # positional: a later argument needs this slot filled
            else:
                continue
            if spec.positional_only:
                args.append(value)
            else:
                kwargs[spec.name] = value
        return args, kwargs

    def _to_result(self, value: object, tool_use_id: str = "") -> ToolResult:
        if isinstance(value, str):
            return ToolResult(content=value, tool_use_id=tool_use_id)
        if isinstance(value, ToolResult):
            return value
        if isinstance(value, Text | Image | Document):
            return ToolResult(content=(value,), tool_use_id=tool_use_id)
        if (
            isinstance(value, list | tuple)
            and value
            and all(isinstance(part, Text | Image | Document) for part in value)
        ):
            return ToolResult(content=tuple(value), tool_use_id=tool_use_id)
        try:
            text = json.dumps(value, default=_to_json, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            # A bug in the tool, not in the model's call; the model still gets an answer.
            log.warning("tool.result.unserializable", tool=self._name, error=str(exc))
            return ToolResult.error(
                f"tool {self._name!r} returned a {type(value).__name__}, "
                "which kova cannot send to the model as text or JSON",
                tool_use_id=tool_use_id,
            )
        return ToolResult(content=text, tool_use_id=tool_use_id)


class _Unpaused:
    """The run's default thread limiter, taken without a scheduler pass when a thread is
    free (``CapacityLimiter.acquire_on_behalf_of`` always makes one): the call waits for its
    thread right after, which is its checkpoint. The same limit on threads as
    ``trio.to_thread.run_sync`` without ``limiter=``; a hop costs ~5 us less CPU."""

    __slots__ = ("_limiter",)

    def __init__(self, limiter: trio.CapacityLimiter) -> None:
        self._limiter = limiter

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        try:
            self._limiter.acquire_on_behalf_of_nowait(borrower)
        except trio.WouldBlock:
            await self._limiter.acquire_on_behalf_of(borrower)

    def release_on_behalf_of(self, borrower: object) -> None:
        self._limiter.release_on_behalf_of(borrower)


def _to_json(value: object) -> Any:
    """``json.dumps`` fallback for the values a tool commonly returns."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if attrs.has(type(value)):
        return attrs.asdict(value, recurse=False)  # type: ignore[arg-type]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    if "pydantic" in sys.modules:
        import pydantic

        if isinstance(value, pydantic.BaseModel):
            return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_NO_FUNCTION: Final = object()
"""``tool()`` called with options only (``@tool(name=...)``), not with a function."""


@overload
def tool(function: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    abandon_on_cancel: bool = False,
    annotations: ToolAnnotations | None = None,
    runs_on: RunsOn = "trio",
    defer: bool = False,
    inline: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    function: Callable[P, R] | object = _NO_FUNCTION,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    abandon_on_cancel: bool = False,
    annotations: ToolAnnotations | None = None,
    runs_on: RunsOn = "trio",
    defer: bool = False,
    inline: bool = False,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a function a tool, its schema built from its signature and docstring.

    Use it bare (``@tool``) or with options (``@tool(name="weather")``)::

        @tool
        def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
            \"\"\"Get the current weather for a city.

            Args:
                city: The city name, e.g. "Oslo".
                unit: Temperature unit.
            \"\"\"
            return f"12 degrees in {city}"

    The JSON Schema comes from the type hints: ``str``, ``int``, ``float``, ``bool``,
    ``None``, unions and ``Optional``, ``list``/``tuple``/``set``, ``dict[str, ...]``,
    ``Literal``, ``Enum``, ``TypedDict``, dataclasses, attrs classes, pydantic models, and
    ``Annotated[T, "description"]``. Parameters with defaults are optional. The description
    is the docstring's text before its first section; ``Args:`` entries describe the
    parameters. Arguments are validated against the schema before every call, and JSON is
    converted to the hinted Python types (enum members, dataclass instances, ...).

    Args:
        function: the function (when used bare).
        name: the tool name; defaults to the function's ``__name__``.
        description: the tool description; defaults to the docstring's free text.
        abandon_on_cancel: for a sync function, let cancellation return immediately and
            leave the worker thread to finish on its own (see :meth:`FunctionTool.execute`).
        annotations: hints for the host, e.g. ``ToolAnnotations(read_only=True)``; approval
            handlers receive them with every call.
        runs_on: ``"asyncio"`` for an async function written for asyncio libraries
            (asyncpg, redis.asyncio, aiohttp, ``asyncio.open_connection``): under
            :mod:`kova.asyncio` it is awaited on the application's asyncio loop, and
            cancelling the turn cancels it there. An agent with such a tool and no asyncio
            loop to run it on raises :class:`~kova.BuildError` when opened. Default
            ``"trio"``.
        defer: don't send this tool's definition to the model up front: the model finds
            it with the ``search_tools`` tool and it is offered from then on in the turn
            (docs/tools.md, "Many tools"). For agents with many tools.
        inline: for a plain (``def``) function that returns at once (no I/O, no waiting):
            call it in the turn's own task instead of a worker thread, which saves the
            thread hop (~70 us of CPU a call, measured). While it runs nothing else in the
            program runs, and a turn cannot be cancelled in the middle of it.

    Raises:
        ToolDefinitionError: at decoration time, when a parameter is ``self``, ``cls``,
            ``*args`` or ``**kwargs``, a type has no JSON Schema form, the function is a
            generator, the name is not 1-64 letters, digits, ``_`` or ``-``,
            ``annotations`` is not a ``ToolAnnotations``, or ``runs_on`` is not ``"trio"``
            or ``"asyncio"`` (``"asyncio"`` only for an async function), or ``inline``
            is not a bool (or is set for an async function).
        TypeError: ``function`` is given but is not callable (``tool(None)``).
    """

    def decorate(inner: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            inner,
            name=name,
            description=description,
            abandon_on_cancel=abandon_on_cancel,
            annotations=annotations,
            runs_on=runs_on,
            defer=defer,
            inline=inline,
        )

    if function is _NO_FUNCTION:
        return decorate
    if not callable(function):
        raise TypeError(
            f"@tool takes a function, got {type(function).__name__}: write @tool or "
            "@tool(name=...) above a def"
        )
    return decorate(function)
