"""The built-in tools under a policy, and approval by tool annotations (no network, no key).

Run it: python docs/examples/builtin_tools.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio

from kova import Message, ToolResult
from kova.agent import AgentBuilder, AgentResponse
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import ToolPolicy, WebFetchError, WebPolicy, builtin_tools, fetch_text


def show(response: AgentResponse) -> None:
    for message in response.new_messages:
        for block in message.content:
            if isinstance(block, ToolResult):
                status = "error" if block.is_error else "ok"
                first_line = block.text.splitlines()[0] if block.text else ""
                print(f"  [{status}] {first_line}")
    print(f"  model: {response.text}")


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "README.md").write_text("# demo\nversion = 1\n")
        (root / ".secrets").mkdir()
        (root / ".secrets" / "token").write_text("hunter2\n")
        policy = ToolPolicy(
            workspace_root=root,
            protected_paths=[root / ".secrets"],
            shell_timeout=10,
            shell_env={"GREETING": "hello from the policy"},
        )

        # 1. Approve exactly the read-only tools: one line, from the tools' annotations.
        print("read-only approval:")
        model = ScriptedProvider(
            [
                reply_tool_calls(
                    ("list_dir", {}),
                    ("search", {"pattern": "version"}),
                    ("read_file", {"path": ".secrets/token"}),
                    ("read_file", {"path": "../../etc/passwd"}),
                    ("edit_file", {"path": "README.md", "old_string": "1", "new_string": "2"}),
                    ("shell", {"command": "rm -rf ."}),
                ),
                reply_text("I could look, but not touch."),
            ]
        )
        agent = (
            AgentBuilder()
            .provider(model)
            .tools(*builtin_tools(policy))
            .approval_handler(lambda call, annotations: annotations.is_read_only)
            .build()
        )
        async with agent:
            show(await agent.run([Message.user("Bump the version.")]))

        # 2. Without an approval handler the writers run, still confined by the policy.
        print("no approval handler:")
        diff = "@@ -1,2 +1,2 @@\n # demo\n-version = 1\n+version = 2\n"
        model = ScriptedProvider(
            [
                reply_tool_calls(("patch_file", {"path": "README.md", "diff": diff})),
                reply_tool_calls(("shell", {"command": 'cat README.md; echo "$GREETING"'})),
                reply_text("Bumped to 2."),
            ]
        )
        agent = AgentBuilder().provider(model).tools(*builtin_tools(policy)).build()
        async with agent:
            response = await agent.run([Message.user("Bump the version.")])
        show(response)
        shell_result = [
            block
            for message in response.new_messages
            for block in message.content
            if isinstance(block, ToolResult)
        ][-1]
        print(shell_result.text)

    # 3. The SSRF guard refuses internal addresses before any connection is made.
    for url in ("https://169.254.169.254/latest/meta-data/", "https://[::ffff:127.0.0.1]/"):
        try:
            await fetch_text(url, WebPolicy())
        except WebFetchError as error:
            print(error)


if __name__ == "__main__":
    trio.run(main)
