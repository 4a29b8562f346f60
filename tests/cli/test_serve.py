"""``kova serve``'s command line (the page itself is tested in tests/web/test_browser.py)."""

from __future__ import annotations

import pytest

from kova.cli import main


def test_serve_without_a_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve"])
    assert exited.value.code == 2
    assert "--demo" in capsys.readouterr().err


def test_serve_help_names_its_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = capsys.readouterr().out
    for flag in ("--demo", "--host", "--port", "--system", "--yes"):
        assert flag in help_text


def test_serve_demo_serves_the_page_and_stops_quietly_on_ctrl_c() -> None:
    import signal
    import subprocess
    import sys
    import urllib.request

    process = subprocess.Popen(
        [sys.executable, "-m", "kova.cli._main", "serve", "--demo", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        url = lines[1].split("open ", 1)[1].strip()
        assert "#token=" in url
        with urllib.request.urlopen(url.split("#")[0], timeout=30) as page:  # loopback only
            assert b"<title>kova</title>" in page.read()
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert "Traceback" not in errors
