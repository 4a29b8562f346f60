"""A PDF and a recording handed to an agent, on Anthropic's wire format (a local fake server
stands in for the API), and what a provider that cannot take a block says before sending.

Run: python docs/examples/documents.py
"""

from __future__ import annotations

import trio

from kova import Audio, Document, InvalidRequest, Message, Text
from kova.agent import AgentBuilder
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.ollama import OllamaConfig, OllamaProvider
from kova.testing import Script, open_anthropic_server, reply_text

PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"  # a real file: path.read_bytes()


async def main() -> None:
    invoice = Document(data=PDF, title="Invoice 7", citations=True)
    history = [Message.user([Text(text="What is the total of this invoice?"), invoice])]

    script = Script([reply_text("The total is 1,240.00 EUR.")])
    async with open_anthropic_server(script, api_key="sk-ant-demo") as server:
        config = AnthropicConfig(
            model="claude-opus-4-8", api_key="sk-ant-demo", base_url=server.base_url
        )
        provider = AnthropicProvider(config)
        async with AgentBuilder().provider(provider).build() as agent:
            response = await agent.run(history)
        block = server.messages_requests()[0].json()["messages"][0]["content"][1]
    print("sent:", block["type"], block["source"]["type"], block["title"], block["citations"])
    print("answer:", response.text)

    # Ollama's chat API takes text and images only: the block is refused before sending.
    ollama = OllamaProvider(OllamaConfig(model="llama3.2", base_url="http://127.0.0.1:9"))
    async with AgentBuilder().provider(ollama).build() as agent:
        try:
            await agent.run([Message.user([Text(text="Listen."), Audio(data=b"RIFF")])])
        except InvalidRequest as exc:
            print("refused:", exc)


if __name__ == "__main__":
    trio.run(main)
