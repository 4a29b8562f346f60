"""The LiteLLM proxy pointed at kova.serve.app: an ``openai/<agent>`` model of the proxy's
config whose ``api_base`` is the served ``/v1``, and the official ``openai`` client talking to
the proxy (chat completions, streamed and not, and the Responses API, which the proxy bridges
to chat completions). The proxy runs as its own program from its own virtual environment
(.ci/litellm-setup.sh installs it; CI runs that, ``python3 dev.py test`` does not: the proxy
takes 30-80 s to start on a loaded machine); the test is skipped, loudly, where it is not
installed."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
from pathlib import Path

import httpx2
import openai
import pytest
import trio
from tied_process import tied_popen

import kova.serve

from ._agents import TOKEN, open_agent
from ._serving import serving

ROOT = Path(__file__).resolve().parents[2]
LITELLM_DIR = Path(os.environ.get("KOVA_LITELLM_DIR", ROOT / ".ci" / ".cache" / "litellm"))
PROXY = LITELLM_DIR / "bin" / "litellm"
STARTUP = 120.0
"""Real time: the proxy imports a great deal before it listens (30 s on a loaded machine)."""

pytestmark = [
    pytest.mark.skipif(
        not PROXY.exists(),
        reason=f"the LiteLLM proxy is not installed at {PROXY} (bash .ci/litellm-setup.sh)",
    ),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
    # The openai client's own stream iterators, left after the proxy's [DONE] (closed by
    # their stream, finalized by the garbage collector): the vendor's, not kova's.
    pytest.mark.filterwarnings("ignore:Async generator 'openai.:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object:"
        "pytest.PytestUnraisableExceptionWarning"
    ),
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_the_litellm_proxy_pointed_at_kova_serve(tmp_path: Path) -> None:
    master_key = "sk-" + secrets.token_hex(32)
    port = _free_port()
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        config = tmp_path / "litellm.yaml"
        config.write_text(
            "model_list:\n"
            "  - model_name: kova-helper\n"
            "    litellm_params:\n"
            "      model: openai/helper\n"
            f"      api_base: {url}/v1\n"
            f"      api_key: {TOKEN}\n"
        )
        environment = {
            **os.environ,
            "LITELLM_MASTER_KEY": master_key,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no download of the price list
            "LITELLM_TELEMETRY": "False",
        }
        command = [str(PROXY), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
        with (tmp_path / "proxy.log").open("wb") as log:
            # Started from this (the main) thread, tied to the run's life: a killed test run
            # leaves no proxy behind (trio's open_process starts it from a worker thread).
            process = tied_popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=tmp_path
            )
        proxy = f"http://127.0.0.1:{port}"
        try:
            with trio.fail_after(STARTUP):
                async with httpx2.AsyncClient() as http:
                    while True:
                        assert process.poll() is None, (tmp_path / "proxy.log").read_text()
                        try:
                            if (await http.get(proxy + "/health/liveliness")).status_code == 200:
                                break
                        except httpx2.TransportError:
                            pass
                        await trio.sleep(0.2)
            async with openai.AsyncOpenAI(
                base_url=proxy + "/v1", api_key=master_key, timeout=60, max_retries=0
            ) as client:
                answer = await client.chat.completions.create(
                    model="kova-helper", messages=[{"role": "user", "content": "weather"}]
                )
                pieces = []
                stream = await client.chat.completions.create(
                    model="kova-helper",
                    messages=[{"role": "user", "content": "hello there"}],
                    stream=True,
                )
                async with stream:  # the proxy sends on after [DONE]: close what is left
                    async for chunk in stream:
                        if chunk.choices and chunk.choices[0].delta.content:
                            pieces.append(chunk.choices[0].delta.content)
                response = await client.responses.create(model="kova-helper", input="responses")
        finally:
            process.send_signal(signal.SIGINT)
            with trio.move_on_after(10):
                await trio.to_thread.run_sync(process.wait, abandon_on_cancel=True)
            if process.poll() is None:
                process.kill()
                process.wait()
    assert answer.choices[0].message.content == "It is -3°C, snow in Oslo."
    assert answer.usage is not None
    assert answer.usage.completion_tokens > 0
    assert "".join(pieces) == "You said: hello there"
    assert len(pieces) > 2  # streamed through, not gathered
    assert response.output_text == "You said: responses"
