"""A stdio MCP server written by hand that answers with what a well-behaved server never
sends: a result nested 10,000 levels deep, a lone surrogate escape (half an emoji), a line
that is not a JSON-RPC message. Its ``echo`` tool answers with the arguments as it read them
(Python's json, which keeps lone surrogates), so a test sees exactly what went on the wire."""

from __future__ import annotations

import json
import sys

DEEP = 10_000
TOOLS = ("deep", "surrogate", "envelope", "echo")


def send(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def answer(request_id: object, result: str) -> None:
    send('{"jsonrpc":"2.0","id":' + json.dumps(request_id) + ',"result":' + result + "}")


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            answer(request_id, json.dumps(result))
        elif method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]
            answer(request_id, json.dumps({"tools": tools}))
        elif method == "tools/call":
            name = message["params"]["name"]
            if name == "deep":
                deep = "[" * DEEP + "]" * DEEP
                answer(request_id, '{"content":[],"structuredContent":{"a":' + deep + "}}")
            elif name == "surrogate":
                answer(request_id, '{"content":[{"type":"text","text":"half \\ud83d"}]}')
            elif name == "envelope":  # neither result nor error
                send('{"jsonrpc":"2.0","id":' + json.dumps(request_id) + "}")
            else:
                arguments = json.dumps(message["params"].get("arguments"), ensure_ascii=True)
                text = {"type": "text", "text": arguments}
                answer(request_id, json.dumps({"content": [text]}))
        else:
            answer(request_id, "{}")


if __name__ == "__main__":
    main()
