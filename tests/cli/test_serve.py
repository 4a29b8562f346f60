"""``kova serve``'s command line (the page itself is tested in tests/web/test_browser.py)."""

from __future__ import annotations

import pytest

from kova.cli import main


def test_serve_without_a_provider_says_how_to_choose_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kova.cli._providers import PROVIDERS

    monkeypatch.delenv("KOVA_PROVIDER", raising=False)
    for choice in PROVIDERS.values():
        if choice.key_env:
            monkeypatch.delenv(choice.key_env, raising=False)
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "no provider chosen: pass --provider" in err
    assert err.count("OPENAI_API_KEY") == 1  # openai and openai-responses share it


def test_serve_help_names_its_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = capsys.readouterr().out
    for flag in (
        "--demo",
        "--provider",
        "--model",
        "--base-url",
        "--host",
        "--port",
        "--yes",
        "--token",
    ):
        assert flag in help_text


def test_serve_demo_serves_the_page_and_stops_quietly_on_ctrl_c() -> None:
    import signal
    import subprocess
    import sys
    import urllib.request

    process = subprocess.Popen(
        [
            sys.executable,
            *("-m", "kova.cli._main", "serve", "--demo", "--port", "0"),
            *("--token", "demo-token-0123456789"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        url = lines[1].split("open ", 1)[1].strip()
        assert url.endswith("#token=demo-token-0123456789")
        with urllib.request.urlopen(url.split("#")[0], timeout=30) as page:  # loopback only
            assert b"<title>kova</title>" in page.read()
        # The same port serves the OpenAI-compatible API, with the token as bearer token.
        models = urllib.request.Request(
            url.split("#")[0] + "v1/models",
            headers={"Authorization": "Bearer demo-token-0123456789"},
        )
        with urllib.request.urlopen(models, timeout=30) as listed:  # loopback only
            assert b'"id":"kova"' in listed.read()
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert "Traceback" not in errors


async def test_serve_runs_a_real_provider_chosen_like_kova_chat() -> None:
    """``kova serve --provider openai --base-url ...``: the real OpenAI provider (against
    kova's fake server here) behind the page, with the built-in tools; Ctrl-C exits 130."""
    import os
    import signal
    import subprocess
    import sys

    import httpx2
    import trio

    from kova.testing import open_openai_server, reply_text

    async with open_openai_server([reply_text("hi")]) as fake:
        process = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "kova.cli._main",
                "serve",
                "--provider",
                "openai",
                "--model",
                "gpt-test",
                "--base-url",
                fake.base_url,
                "--port",
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "OPENAI_API_KEY": "sk-test"},
        )
        try:
            assert process.stdout is not None
            seen = b""
            with trio.fail_after(60):
                while b"#token=" not in seen:
                    chunk = await process.stdout.receive_some()
                    assert chunk, seen
                    seen += chunk
            assert b"kova serve: openai gpt-test" in seen
            # Its OpenAI-compatible API runs the agent: the model is offered the built-in tools.
            page = seen.split(b"open ", 1)[1].split(b"\n", 1)[0].decode()
            base, _, token = page.partition("/#token=")
            async with httpx2.AsyncClient() as client:
                answer = await client.post(
                    f"{base}/v1/chat/completions",
                    json={"model": "kova", "messages": [{"role": "user", "content": "hi"}]},
                    headers={"authorization": f"Bearer {token}"},
                )
            assert answer.status_code == 200, answer.text
            offered = {tool.name for tool in fake.chat_requests()[0].tools}
            assert {"read_file", "shell"} <= offered
            process.send_signal(signal.SIGINT)
            with trio.fail_after(30):
                await process.wait()
            assert process.stderr is not None
            errors = await process.stderr.receive_some()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 130
    assert b"Traceback" not in errors


def test_chat_and_serve_give_the_built_in_tools_confined_to_the_directory(tmp_path) -> None:
    from kova.cli._chat import builtin_tools_for_chat
    from kova.tools import annotations_of

    tools = {tool.name: tool for tool in builtin_tools_for_chat(tmp_path)}
    assert set(tools) == {
        "read_file",
        "list_dir",
        "search",
        "edit_file",
        "write_file",
        "patch_file",
        "shell",
    }
    # Everything that changes something asks first (the prompt and the page ask by this).
    for name in ("edit_file", "write_file", "patch_file", "shell"):
        assert not annotations_of(tools[name]).is_read_only
    assert annotations_of(tools["read_file"]).is_read_only
