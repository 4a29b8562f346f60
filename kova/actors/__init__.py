"""kova's actor runtime on trio: actors, refs, mailboxes, supervisors and the runtime.

See ``docs/actors.md`` for a guide.
"""

from ._actor import LATER as LATER
from ._actor import Actor as Actor
from ._actor import ActorRef as ActorRef
from ._actor import StreamReceiver as StreamReceiver
from ._mailbox import DEFAULT_MAILBOX_SIZE as DEFAULT_MAILBOX_SIZE
from ._mailbox import Mailbox as Mailbox
from ._messages import Call as Call
from ._messages import UnknownMessage as UnknownMessage
from ._runtime import Runtime as Runtime
from ._runtime import open_runtime as open_runtime
from ._spec import ActorFactory as ActorFactory
from ._spec import Backoff as Backoff
from ._spec import ChildSpec as ChildSpec
from ._spec import RestartType as RestartType
from ._spec import Strategy as Strategy
from ._subtree import GetChild as GetChild
from ._subtree import ListChildren as ListChildren
from ._subtree import SpawnChild as SpawnChild
from ._subtree import StopChild as StopChild
from ._subtree import supervisor_spec as supervisor_spec
from ._supervisor import Supervisor as Supervisor
from ._supervisor import open_supervisor as open_supervisor

__all__ = [
    "Actor",
    "ActorFactory",
    "ActorRef",
    "Backoff",
    "Call",
    "ChildSpec",
    "DEFAULT_MAILBOX_SIZE",
    "GetChild",
    "LATER",
    "ListChildren",
    "Mailbox",
    "RestartType",
    "Runtime",
    "SpawnChild",
    "StopChild",
    "Strategy",
    "StreamReceiver",
    "Supervisor",
    "UnknownMessage",
    "open_runtime",
    "open_supervisor",
    "supervisor_spec",
]
