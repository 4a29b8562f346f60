"""Sessions: what a store holds of a conversation, the store protocol, and :class:`Session`.

A store keeps, per session id, the messages of its finished turns (each message with the
number of the turn that added it), a **version** that every change bumps, the pending state
of a turn that paused for approvals, and metadata (created, updated, title, token totals).
Every change is one atomic :meth:`SessionStore.write`: "the store holds version *v*; keep the
first *k* messages, add these, set the pending state" -- refused with
:class:`~kova.errors.SessionConflictError` when the store no longer holds version *v*, so two
writers (tasks, processes, machines) never both append after the same message. Appending,
rewinding, clearing and forking are all that one operation; a store for another database
(Redis, DynamoDB) implements four methods and is checked with
:func:`kova.testing.check_session_store`.

Two turns on one session never interleave: the second waits for the first
(``store.session(id)``, up to its ``timeout``) or fails at once with
:class:`~kova.errors.SessionBusyError` (``store.session(id, wait=False)``). kova's stores
see the turns of every process and machine using them (holds, :mod:`kova.sessions._sql`); a
store of your own, those of this process, and across processes the version check refuses
the second append. Nothing half-written is ever stored.
"""

from __future__ import annotations

import abc
import contextlib
import math
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import trio

from .._errors import SessionBusyError, SessionConflictError, SessionError, check_seconds
from .._json import dumps, loads
from .._messages import Message, Role, Text
from .._record import Record, evolve
from ._view import SessionState, working_messages

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType
    from typing import Self

    from ..agent._approvals import PendingApprovals
    from ..agent._events import AgentEvent, AgentResponse
    from ..agent._structured import StructuredStream

__all__ = [
    "MessageCache",
    "Session",
    "SessionInfo",
    "SessionStore",
    "SessionWrite",
    "check_session_id",
    "check_session_id_text",
    "message_from_text",
    "message_to_text",
    "view_from_text",
    "view_to_text",
    "view_update",
]

TITLE_LENGTH = 80
"""A session's default title: the first user message's text, cut to this many characters."""


class SessionInfo(Record):
    """What :meth:`SessionStore.list` says of one session."""

    id: str
    created: float
    """When it was first written (seconds since the epoch)."""
    updated: float
    """When it was last written."""
    title: str | None
    """Its title: the first prompt's text (cut to 80 characters) unless set."""
    messages: int
    """How many messages it holds."""
    input_tokens: int
    """Input tokens of every turn appended to it (a rewind or clear does not unspend them)."""
    output_tokens: int
    """Output tokens likewise."""
    pending: bool = False
    """Its last turn paused for approvals (resume it with ``agent.resume(session=...)``)."""


class SessionWrite(Record):
    """One atomic change of a session (see :meth:`SessionStore.write`)."""

    version: int
    """The version the writer read: the write is refused unless the store still holds it."""
    keep: int
    """Messages kept (the first ``keep``); the rest are removed. At most the stored count."""
    messages: tuple[Message, ...] = ()
    """Added after the kept ones."""
    turn: int = 0
    """The turn number of the added messages."""
    pending: str | None = None
    """The session's pending state after the write."""
    input_tokens: int = 0
    """Added to the session's totals."""
    output_tokens: int = 0
    title: str | None = None
    """Set as the session's title when given; otherwise the title is kept."""
    view: tuple[Message, ...] | None = None
    """A new compacted view standing for the first ``view_covers`` messages. ``None``: the
    stored view is kept, unless the write keeps fewer messages than it stands for (a rewind
    into them): then it is dropped."""
    view_covers: int = 0
    resumed: str | None = None
    """The session's :attr:`SessionState.resumed` after the write (set with a pending state
    kept as it is, when a resume takes its decisions; any other write clears it)."""


class SessionStore(abc.ABC):
    """Where sessions live. kova ships :class:`~kova.sessions.SqliteSessionStore` and
    :class:`~kova.sessions.PostgresSessionStore`; a store of your own subclasses this,
    implements :meth:`read`, :meth:`write`, :meth:`list` and :meth:`delete`, and passes
    :func:`kova.testing.check_session_store`.

    A store is an async context manager (leaving the block closes its connections); the
    stores kova ships also work outside one (each operation connects as needed), so a
    session can be used from ``agent.run_sync``.
    """

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:  # noqa: B027 (a store with nothing to close keeps it)
        """Close what the store holds open (idempotent)."""

    def session(
        self, session_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> Session:
        """The session ``session_id`` (made by its first write; an unknown id is empty).

        Args:
            session_id: 1 to 512 characters.
            wait: a turn on this session while another runs on it waits for it, first come
                first served (``True``), or fails at once with
                :class:`~kova.errors.SessionBusyError` (``False``). kova's stores see turns
                of every process using them; a store of your own, those of this process.
            timeout: seconds a turn waits at most before it fails with
                :class:`~kova.errors.SessionBusyError` (``None``: the store's
                ``wait_timeout``, by default as long as it takes).

        Raises:
            ConfigError: ``timeout`` is not a positive, finite number of seconds.
        """
        check_session_id(session_id)
        if not isinstance(wait, bool):
            raise TypeError(f"wait must be a bool, got {type(wait).__name__}")
        check_seconds("timeout", timeout, optional=True)
        return Session(self, session_id, wait=wait, timeout=timeout)

    @abc.abstractmethod
    async def read(self, session_id: str) -> SessionState:
        """The session as stored now (``SessionState(version=0)`` for an unknown id), read in
        one consistent snapshot."""

    @abc.abstractmethod
    async def write(self, session_id: str, change: SessionWrite) -> int:
        """Apply ``change`` atomically and return the new version (the old plus one).

        All or nothing, durable when it returns: keep the first ``change.keep`` messages,
        add ``change.messages`` with turn number ``change.turn``, set the pending state, add
        the token counts, set the title if given (else keep it), set the compacted view if
        given (else drop it when ``change.keep`` is below what it covers), set ``updated``
        (and ``created`` for a new session).

        Raises:
            SessionConflictError: the store does not hold ``change.version``.
            SessionError: the store cannot be used.
        """

    @abc.abstractmethod
    async def list(self) -> list[SessionInfo]:
        """Every session the store holds, the most recently updated first."""

    @abc.abstractmethod
    async def delete(self, session_id: str) -> None:
        """Remove the session and everything it holds (idempotent)."""

    # -- one turn at a time per session, in this process ------------------------------------

    def _gate(
        self, session_id: str, wait: bool, timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        gates: dict[str, _GateState] | None = self.__dict__.get("_kova_gates")
        if gates is None:
            gates = self.__dict__["_kova_gates"] = {}
        return _Gate(gates, session_id, wait, timeout)


class _GateState:
    __slots__ = ("semaphore", "users")

    def __init__(self) -> None:
        self.semaphore = trio.Semaphore(1)
        self.users = 0


class _Gate:
    """Held while a turn (or a change) runs on one session: the next waits or is refused."""

    __slots__ = ("_gates", "_id", "_state", "_timeout", "_wait")

    def __init__(
        self, gates: dict[str, _GateState], session_id: str, wait: bool, timeout: float | None
    ) -> None:
        self._gates = gates
        self._id = session_id
        self._wait = wait
        self._timeout = timeout
        self._state: _GateState | None = None

    async def __aenter__(self) -> None:
        state = self._gates.get(self._id)
        if state is None:
            state = self._gates[self._id] = _GateState()
        if not self._wait and state.semaphore.value == 0:
            raise SessionBusyError(self._id)
        state.users += 1
        try:
            with trio.move_on_after(math.inf if self._timeout is None else self._timeout):
                await state.semaphore.acquire()
                self._state = state
                return
            raise SessionBusyError(
                self._id,
                f"session {self._id!r} is busy: another turn held it for the whole "
                f"{self._timeout:g} s this turn waited (its timeout); nothing was run",
            )
        except BaseException:
            self._left(state)
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        state, self._state = self._state, None
        assert state is not None
        state.semaphore.release()
        self._left(state)

    def _left(self, state: _GateState) -> None:
        state.users -= 1
        if state.users == 0 and self._gates.get(self._id) is state:
            del self._gates[self._id]


class Session:
    """One conversation in a store: ``session = store.session("alice")``.

    Pass it to a turn (``await agent.run("Hi", session=session)``): the turn runs over the
    session's history and its messages are appended when it completes (a cancelled or
    failed turn appends nothing). Or read and change it here.
    """

    __slots__ = ("id", "store", "timeout", "wait")

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        wait: bool = True,
        timeout: float | None = None,
    ) -> None:
        self.store = store
        self.id = session_id
        self.wait = wait
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    async def load(self, *, compacted: bool = False) -> list[Message]:
        """The messages of its finished turns, in order (a paused turn's too): all of them
        (for audit), or with ``compacted=True`` what the model continues from: the view a
        context policy last compacted them into, followed by the messages since."""
        state = await self.store.read(self.id)
        return list(working_messages(state) if compacted else state.messages)

    async def pending(self) -> PendingApprovals | None:
        """The calls its paused last turn waits for (decide them, then
        ``agent.resume(pending, session=session)``), or ``None``."""
        from ..agent._approvals import PendingApprovals

        text = (await self.store.read(self.id)).pending
        return None if text is None else PendingApprovals.from_json(text)

    async def info(self) -> SessionInfo | None:
        """Its :class:`SessionInfo` (``None``: the store holds no such session)."""
        for info in await self.store.list():
            if info.id == self.id:
                return info
        return None

    async def append(self, messages: Iterable[Message]) -> None:
        """Append ``messages`` as one finished turn (for turns run without ``session=``)."""
        added = _check_messages(messages)
        async with self._gate():
            state = await self._read_free("append to it")
            await self.store.write(self.id, _append(state, added))

    async def fork(self, at: int | None = None) -> Session:
        """A new session (a branch) holding this one's first ``at`` messages (all of them,
        and a paused turn's pending state, by default); this one is left as it is.

        Raises:
            ValueError: ``at`` is negative or past the last message.
        """
        if at is not None and (isinstance(at, bool) or not isinstance(at, int)):
            raise TypeError(f"at must be a message count (int) or None, got {type(at).__name__}")
        state = await self.store.read(self.id)
        count = len(state.messages)
        if at is not None and not 0 <= at <= count:
            raise ValueError(f"at must be between 0 and {count} (the session's messages), got {at}")
        keep = count if at is None else at
        branch = Session(
            self.store,
            f"{self.id[:499]}~{uuid.uuid4().hex[:12]}",
            wait=self.wait,
            timeout=self.timeout,
        )
        if keep or state.title:
            whole = keep == count
            view = state.view if state.view is not None and keep >= state.view_covers else None
            first = SessionWrite(
                version=0,
                keep=0,
                messages=state.messages[:keep],
                pending=state.pending if whole else None,
                title=state.title,
                view=view,
                view_covers=state.view_covers if view is not None else 0,
            )
            await self.store.write(branch.id, first)
        return branch

    async def rewind(self, turns: int = 1) -> int:
        """Remove its last ``turns`` turns (a paused turn counts as one, its pending state
        goes with it). Returns how many messages were removed.

        Raises:
            ValueError: ``turns`` is not positive.
        """
        if isinstance(turns, bool) or not isinstance(turns, int):
            raise TypeError(f"turns must be an int, got {type(turns).__name__}")
        if turns < 1:
            raise ValueError(f"turns must be at least 1, got {turns}")
        async with self._gate():
            state = await self.store.read(self.id)
            numbers = sorted(set(state.turns))
            if not numbers:
                return 0
            cut = numbers[-turns] if turns <= len(numbers) else numbers[0]
            keep = next(index for index, turn in enumerate(state.turns) if turn >= cut)
            await self.store.write(self.id, SessionWrite(version=state.version, keep=keep))
            return len(state.messages) - keep

    async def clear(self) -> None:
        """Remove every message and any pending state (its metadata stays)."""
        async with self._gate():
            state = await self.store.read(self.id)
            if state.version:
                await self.store.write(self.id, SessionWrite(version=state.version, keep=0))

    async def delete(self) -> None:
        """Remove the session from its store."""
        async with self._gate():
            await self.store.delete(self.id)

    # -- what the agent's entry points call with session= ----------------------------------

    def _gate(self) -> AbstractAsyncContextManager[None]:
        return self.store._gate(self.id, self.wait, self.timeout)

    async def _read_free(self, what: str) -> SessionState:
        state = await self.store.read(self.id)
        if state.pending is not None:
            raise SessionError(
                f"session {self.id!r} waits for decisions on a paused turn: resume it "
                f"(agent.resume(pending, session=...)) or rewind it before you {what}"
            )
        return state

    async def run_turn(
        self,
        prompt: Sequence[Message],
        run: Callable[[tuple[Message, ...]], Awaitable[Any]],
        *,
        structured: bool = False,
    ) -> Any:
        """What ``agent.run(prompt, session=...)`` (and ``run_structured``) do: the turn
        ``run(history + prompt)`` under this session's gate, its messages appended when it
        completes. ``structured``: ``run`` returns ``(value, response)``."""
        from .._errors import StructuredOutputError
        from ..agent._events import AgentResponse

        async with self._gate():
            state = await self._read_free("run a turn")
            try:
                result = await run((*working_messages(state), *prompt))
            except StructuredOutputError as error:
                # A structured turn that paused for approvals keeps its pause here.
                response = error.response
                if isinstance(response, AgentResponse) and response.pending is not None:
                    await self._commit(state, prompt, response)
                raise
            await self._commit(state, prompt, result[1] if structured else result)
            return result

    async def resume_turn(
        self,
        history: object,
        pending: PendingApprovals | None,
        resume: Callable[[tuple[Message, ...], PendingApprovals], Awaitable[AgentResponse]],
        *,
        journaled: bool = False,
    ) -> AgentResponse:
        """What ``agent.resume(pending, session=...)`` does: the paused turn stored here goes
        on with ``pending``'s decisions (the stored ones if ``None``); what it adds joins the
        same turn. The decisions are used once (recorded in the store before the turn goes
        on; given back if it fails), unless the turn is ``journaled`` (the journal records
        them, and a crashed resume goes on from it)."""
        pending = _pending_argument(history, pending)
        async with self._gate():
            state, decided = await self._paused(pending)
            if not journaled:
                state = await self._take_decisions(state, decided)
            try:
                response = await resume(working_messages(state), decided)
            except BaseException:
                if not journaled:
                    await self._give_back_decisions(state)
                raise
            await self._commit(state, (), response, same_turn=True)
            return response

    def stream_turn(
        self,
        prompt: object,
        open_stream: Callable[
            [tuple[Message, ...], PendingApprovals | None],
            AbstractAsyncContextManager[AsyncIterator[AgentEvent]],
        ],
        resume: PendingApprovals | None = None,
        *,
        journaled: bool = False,
    ) -> AbstractAsyncContextManager[AsyncIterator[AgentEvent]]:
        """What ``agent.stream(prompt, session=...)`` returns: the turn's events, its
        messages appended before its TurnCompleted is handed on. With ``resume`` the paused
        turn stored here goes on (no prompt), its decisions used once as for
        :meth:`resume_turn`."""
        from ._turns import SessionStream

        return SessionStream(self, prompt, open_stream, resume, journaled)

    def stream_structured_turn(
        self,
        prompt: Sequence[Message],
        open_stream: Callable[
            [tuple[Message, ...]], AbstractAsyncContextManager[StructuredStream[Any]]
        ],
    ) -> AbstractAsyncContextManager[StructuredStream[Any]]:
        """What ``agent.stream_structured(prompt, output, session=...)`` returns."""
        from ._turns import SessionStructuredStream

        return SessionStructuredStream(self, prompt, open_stream)

    async def _paused(self, pending: PendingApprovals | None) -> tuple[SessionState, Any]:
        from .._errors import ApprovalMismatchError
        from ..agent._approvals import PendingApprovals, same_pause

        state = await self.store.read(self.id)
        if state.pending is None:
            raise SessionError(f"session {self.id!r} has no paused turn to resume")
        stored = PendingApprovals.from_json(state.pending)
        if pending is None:
            pending = stored
        elif not isinstance(pending, PendingApprovals):
            raise TypeError(
                f"pending must be a kova.agent.PendingApprovals, got {type(pending).__name__}"
            )
        elif not same_pause(pending, stored):
            raise ApprovalMismatchError(
                f"these decisions are for other calls than the ones session {self.id!r} "
                "waits for (its pending state: await session.pending())"
            )
        return state, pending

    async def _take_decisions(self, state: SessionState, decided: Any) -> SessionState:
        """Record in the store that ``decided`` resumes the paused turn ``state`` holds (a
        write, so two processes cannot both take them); the state after it.

        Raises:
            ApprovalMismatchError: a resume took them already and did not finish.
        """
        from .._errors import ApprovalMismatchError

        nonce = decided.nonce
        if not nonce:
            return state
        if state.resumed == nonce:
            raise ApprovalMismatchError(
                f"these decisions were already used: a resume of session {self.id!r}'s paused "
                "turn took them and did not finish (its process died, or it runs elsewhere); "
                "a decided pause runs once. session.rewind() drops the paused turn; a turn "
                "resumed with journal= goes on from its journal"
            )
        version = await self.store.write(
            self.id,
            SessionWrite(
                version=state.version,
                keep=len(state.messages),
                pending=state.pending,
                resumed=nonce,
            ),
        )
        return evolve(state, version=version, resumed=nonce)

    async def _give_back_decisions(self, state: SessionState) -> None:
        """A resume that failed or was cancelled produced nothing: its decisions may be
        used again (unless the session changed meanwhile)."""
        if state.resumed is None:
            return
        with trio.CancelScope(shield=True), contextlib.suppress(SessionConflictError):
            await self.store.write(
                self.id,
                SessionWrite(
                    version=state.version, keep=len(state.messages), pending=state.pending
                ),
            )

    async def _commit(
        self,
        state: SessionState,
        prompt: Sequence[Message],
        response: AgentResponse,
        *,
        same_turn: bool = False,
    ) -> None:
        from ..agent._approvals import pending_document

        added = (*prompt, *response.new_messages)
        compaction = getattr(response, "compaction", None)  # a context policy's
        pending = response.pending
        change = evolve(
            _append(state, added, same_turn=same_turn),
            pending=None if pending is None else pending_document(pending),
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            view=None if compaction is None else tuple(compaction.history),
            view_covers=0 if compaction is None else len(state.messages) + len(added),
        )
        await self.store.write(self.id, change)


def _append(
    state: SessionState, added: tuple[Message, ...], *, same_turn: bool = False
) -> SessionWrite:
    """The write that appends ``added`` to ``state`` as its next turn (or as part of its
    last one, for ``same_turn``)."""
    return SessionWrite(
        version=state.version,
        keep=len(state.messages),
        messages=added,
        turn=(state.turns[-1] if state.turns else 0) + (0 if same_turn else 1),
        title=_title(added) if state.title is None else None,
    )


def _pending_argument(history: object, pending: object) -> Any:
    """The decisions of ``agent.resume(..., session=...)``: ``pending``, or a
    ``PendingApprovals`` given in the history's place (``agent.resume(pending,
    session=session)``)."""
    from ..agent._approvals import PendingApprovals

    if history is None:
        return pending
    if isinstance(history, PendingApprovals) and pending is None:
        return history
    raise TypeError(
        "with session=, a resumed turn's history comes from the session: pass only the "
        "decided pending (agent.resume(pending, session=session))"
    )


def _check_messages(messages: object) -> tuple[Message, ...]:
    if isinstance(messages, Message | str | bytes):
        raise TypeError("messages must be an iterable of kova.Message (one turn's messages)")
    if not isinstance(messages, Iterable):
        raise TypeError(
            f"messages must be an iterable of kova.Message, got {type(messages).__name__}"
        )
    try:
        added: tuple[object, ...] = tuple(messages)
    except TypeError:
        raise TypeError(
            f"messages must be an iterable of kova.Message, got {type(messages).__name__}"
        ) from None
    for index, message in enumerate(added):
        if not isinstance(message, Message):
            raise TypeError(f"messages[{index}] is a {type(message).__name__}, not a kova.Message")
    return cast("tuple[Message, ...]", added)


def _title(messages: Iterable[Message]) -> str | None:
    """The first user message's text, on one line, cut to :data:`TITLE_LENGTH`."""
    for message in messages:
        if message.role is Role.USER:
            text = " ".join(
                block.text for block in message.content if isinstance(block, Text)
            ).split()
            if text:
                # A lone surrogate (half an emoji) cannot be stored as UTF-8 outside JSON.
                # PostgreSQL's text holds no NUL character.
                title = " ".join(text).replace("\x00", "").encode("utf-8", "replace").decode()
                if len(title) > TITLE_LENGTH:
                    title = title[: TITLE_LENGTH - 1] + "\N{HORIZONTAL ELLIPSIS}"
                return title
    return None


class MessageCache:
    """The decoded messages of recently used sessions, by (session id, version, created):
    a load whose session is unchanged since this store last read or wrote it reads one row
    instead of every message (and decodes none). ``created`` tells a session deleted and
    made again (its versions start over) from the one cached. Bounded by ``limit`` messages
    in all, least recently used first out; safe from the store's worker threads."""

    __slots__ = ("_entries", "_limit", "_lock", "_size")

    def __init__(self, limit: int = 100_000) -> None:
        self._entries: OrderedDict[str, tuple[int, float, tuple[Message, ...], tuple[int, ...]]] = (
            OrderedDict()
        )
        self._limit = limit
        self._size = 0
        self._lock = threading.Lock()

    def get(
        self, session_id: str, version: int, created: float
    ) -> tuple[tuple[Message, ...], tuple[int, ...]] | None:
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is None or entry[0] != version or entry[1] != created:
                return None
            self._entries.move_to_end(session_id)
            return entry[2], entry[3]

    def entry(
        self, session_id: str
    ) -> tuple[int, float, tuple[Message, ...], tuple[int, ...]] | None:
        """What is cached of ``session_id``: (version, created, messages, turns)."""
        with self._lock:
            return self._entries.get(session_id)

    def put(
        self,
        session_id: str,
        version: int,
        created: float,
        messages: tuple[Message, ...],
        turns: tuple[int, ...],
    ) -> None:
        with self._lock:
            self._pop(session_id)
            if len(messages) > self._limit:
                return
            self._entries[session_id] = (version, created, messages, turns)
            self._size += len(messages)
            while self._size > self._limit:
                _, dropped = self._entries.popitem(last=False)
                self._size -= len(dropped[2])

    def wrote(
        self,
        session_id: str,
        before: int,
        created: float,
        change: SessionWrite,
    ) -> None:
        """After ``change`` was committed over version ``before``: the cached messages (if
        they were that version's) become the new version's."""
        with self._lock:
            entry = self._entries.get(session_id)
        if before == 0:
            base: tuple[tuple[Message, ...], tuple[int, ...]] | None = ((), ())
        elif entry is not None and entry[0] == before and entry[1] == created:
            base = entry[2], entry[3]
        else:
            base = None
        if base is None:
            self.drop(session_id)
            return
        keep = change.keep
        self.put(
            session_id,
            before + 1,
            created,
            (*base[0][:keep], *change.messages),
            (*base[1][:keep], *(change.turn,) * len(change.messages)),
        )

    def drop(self, session_id: str) -> None:
        with self._lock:
            self._pop(session_id)

    def _pop(self, session_id: str) -> None:
        old = self._entries.pop(session_id, None)
        if old is not None:
            self._size -= len(old[2])


def check_session_id_text(value: str) -> str | None:
    """What is wrong with ``value`` as a session id, or ``None``."""
    try:
        check_session_id(value)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def check_session_id(value: object) -> None:
    """Raises ``TypeError`` / ``ValueError`` unless ``value`` is a usable session id."""
    if not isinstance(value, str):
        raise TypeError(f"a session id must be a str, got {type(value).__name__}")
    if not value or len(value) > 512:
        raise ValueError(f"a session id must be 1 to 512 characters, got {len(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a session id holds a lone surrogate; it cannot be stored") from None
    if "\x00" in value:
        raise ValueError("a session id cannot hold a NUL character")


def message_to_text(message: Message) -> str:
    """A message as the JSON text stores keep (``Message.to_dict``; UTF-8-safe)."""
    return dumps(message.to_dict())


def view_update(change: SessionWrite, covers: int) -> tuple[bool, str | None, int]:
    """What a write does to the stored compacted view (which stands for ``covers``
    messages): (whether it is replaced, its new JSON text or ``None``, what it covers)."""
    if change.view is not None:
        return True, view_to_text(change.view), change.view_covers
    if change.keep < covers:  # a rewind into what the view stands for: it no longer does
        return True, None, 0
    return False, None, 0


def view_to_text(view: tuple[Message, ...] | None) -> str | None:
    """A compacted view as the JSON text stores keep (``None`` stays ``None``)."""
    return None if view is None else dumps([message.to_dict() for message in view])


def view_from_text(text: str | None, where: str) -> tuple[Message, ...] | None:
    """A stored compacted view back."""
    if text is None:
        return None
    try:
        data = loads(text)
        if not isinstance(data, list):
            raise ValueError("not a JSON array")
        return tuple(Message.from_dict(item) for item in data)
    except (ValueError, TypeError, AttributeError) as exc:
        raise SessionError(f"{where}: the stored compacted view cannot be read: {exc}") from None


def message_from_text(text: str, where: str) -> Message:
    """A stored message back; a :class:`~kova.errors.SessionError` names ``where`` if it
    cannot be read."""
    try:
        data = loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return Message.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise SessionError(f"{where}: a stored message cannot be read: {exc}") from None
