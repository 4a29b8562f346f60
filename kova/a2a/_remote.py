"""A remote A2A agent, asked with a2a-sdk's client, usable as a tool."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from .._errors import KovaError

if TYPE_CHECKING:
    from ..tools import Tool

__all__ = ["RemoteAgent", "RemoteAgentError"]


class RemoteAgentError(KovaError):
    """The remote agent failed the task, or could not be reached."""


class RemoteAgent:
    """An agent served over A2A at ``url`` (its base URL: the agent card is read from
    ``url + "/.well-known/agent-card.json"``), asked with a2a-sdk's client.

    ``await remote.ask("...")`` sends one message and returns the answer's text;
    ``remote.as_tool()`` is a tool another agent can call with a prompt. Each call is a new
    task in a new context (the remote agent sees only that prompt).

    Args:
        url: the remote agent's base URL.
        token: a bearer token sent with every request (``Authorization: Bearer ...``).
        timeout: seconds a whole call may take.
    """

    __slots__ = ("_token", "timeout", "url")

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 300.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http(s) URL, not {url!r}")
        if token is not None and not isinstance(token, str):
            raise TypeError(f"token must be a str, not {type(token).__name__}")
        self.url = url.rstrip("/")
        self._token = token
        self.timeout = float(timeout)

    def __repr__(self) -> str:
        return f"RemoteAgent({self.url!r})"  # the token is a credential: never shown

    async def ask(self, prompt: str) -> str:
        """Send ``prompt`` as a new task; the text of the completed task's answer.

        Raises:
            RemoteAgentError: the task failed or was cancelled remotely, or the agent could
                not be reached (its card, its endpoint).
        """
        import httpx
        from a2a.client import A2AClientError, ClientConfig, create_client
        from a2a.types import a2a_pb2

        headers = {"authorization": f"Bearer {self._token}"} if self._token else {}
        message = a2a_pb2.Message(
            message_id=str(uuid.uuid4()),
            role=a2a_pb2.Role.ROLE_USER,
            parts=[a2a_pb2.Part(text=prompt)],
        )
        try:
            async with httpx.AsyncClient(headers=headers, timeout=self.timeout) as http:
                client = await create_client(
                    self.url, ClientConfig(httpx_client=http, streaming=False)
                )
                try:
                    task: Any = None
                    async for response in client.send_message(
                        a2a_pb2.SendMessageRequest(message=message)
                    ):
                        if response.HasField("task"):
                            task = response.task
                        elif response.HasField("message"):
                            return "".join(part.text for part in response.message.parts)
                finally:
                    await client.close()
        except (A2AClientError, httpx.HTTPError) as exc:
            raise RemoteAgentError(f"the A2A agent at {self.url} failed: {exc}") from exc
        if task is None:
            raise RemoteAgentError(f"the A2A agent at {self.url} answered no task")
        state = a2a_pb2.TaskState.Name(task.status.state)
        if state != "TASK_STATE_COMPLETED":
            said = "".join(part.text for part in task.status.message.parts)
            raise RemoteAgentError(f"the A2A task ended {state}: {said}")
        texts = [part.text for artifact in task.artifacts for part in artifact.parts]
        return "".join(texts)

    def as_tool(self, name: str = "remote_agent", description: str | None = None) -> Tool:
        """This remote agent as a tool: the model passes a prompt, the answer is the result
        (a failure is an error result the model sees)."""
        from ..tools import tool

        remote = self

        async def ask_remote(prompt: str) -> str:
            return await remote.ask(prompt)

        ask_remote.__doc__ = (
            f"{description or f'Ask the remote agent at {self.url}.'}\n\n"
            "Args:\n    prompt: what to ask it.\n"
        )
        made: Tool = tool(name=name, description=description)(ask_remote)
        return made
