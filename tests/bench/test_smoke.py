"""The benchmark harness runs end to end on a tiny size (the benchmarks themselves are not part
of the suite: ``python bench/run.py``)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def _load_run_module():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_run", BENCH / "run.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_run"] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_tiny_run_produces_every_scenario(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "run.py"),
            "--tiny",
            "--clients",
            "httpx2 (trio),kova (trio),kova agent (trio)",
            "--apis",
            "openai",
            "--json",
            str(out),
            "--no-chart",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    scenarios = result["scenarios"]
    both = {"httpx2 (trio)", "kova (trio)", "kova agent (trio)"}
    for key in ("b/openai", "c/openai", "c_cpu/openai", "d/openai", "d_rss/openai"):
        clients = {row["client"]: row["values"] for row in scenarios[key]}
        assert set(clients) == both, key
        assert all(v > 0 for values in clients.values() for v in values), key
    turns = {row["client"]: row["values"] for row in scenarios["e/openai"]}
    assert set(turns) == {"httpx2 (trio)", "kova agent (trio)"}
    imports = {row["client"] for row in scenarios["a"]}
    assert both <= imports
    # the agent-path targets sit beside the provider-path ones, from the same run
    targets = {row["target"] for row in result["targets"]}
    assert "agent: `Agent.stream` events/s (c), openai" in targets
    assert "provider: streaming events/s (c), openai" in targets
    connections = [r for r in result["targets"] if r["key"] == "d_conn/openai"]
    assert connections[0]["ratio"] == 1.0  # every agent stream had its connection at once
    assert {row["client"] for row in scenarios["f"]["openai"]} == {
        "floor: split + json.loads",
        "kova codec",
    }
    assert [hop["api"] for hop in scenarios["hop"]] == ["openai"]
    # the markdown table: ratios to the floor and to kova
    assert "| kova (trio) |" in proc.stdout
    assert "x floor | x kova" in proc.stdout
    assert out.with_suffix(".md").read_text() in proc.stdout + "\n"


def test_chart_of_the_target_ratios(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # a bench-only dependency
    run = _load_run_module()
    rows = [
        {
            "target": "agent: `Agent.stream` events/s (c), openai",
            "limit": ">= 0.9",
            "ratio": 0.95,
            "met": True,
        },
        {
            "target": "agent: `Agent.run` calls/s (b), openai",
            "limit": ">= 0.85",
            "ratio": 0.7,
            "met": False,
        },
        {
            "target": "actor hop per streamed event, openai",
            "limit": "< 5%",
            "ratio": 0.01,
            "met": True,
        },
    ]
    path = tmp_path / "ratios.png"
    assert run.chart(rows, str(path))
    assert path.read_bytes().startswith(b"\x89PNG")


def test_missing_peer_is_skipped() -> None:
    run = _load_run_module()
    missing = run.Client(
        "ghost", "ghost:Ghost", "peer", ("openai",), ("b",), ("no_such_module_kova_bench",), ""
    )
    assert not run.available(missing)
    assert all(run.available(c) for c in run.CLIENTS if c.group == "floor")


def test_mock_server_payloads_round_trip() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import payloads
    finally:
        sys.path.remove(str(BENCH))
    body = payloads.sse_body("openai", 3).decode()
    texts = [
        json.loads(line[6:])["choices"][0]["delta"].get("content")
        for line in body.split("\n")
        if line.startswith("data: {") and '"choices":[{' in line
    ]
    assert "".join(t for t in texts if t) == payloads.answer_text(3)
    assert body.rstrip().endswith("data: [DONE]")
    assert payloads.parse_model("bench-tool-n20") == (True, 20)
    assert payloads.parse_model("bench-n7") == (False, 7)


def test_gemini_and_ollama_streams_are_held_to_their_issue_target() -> None:
    run = _load_run_module()

    def rows(kova: float) -> list[dict[str, object]]:
        return [
            {"client": run.FLOOR, "values": [100.0]},
            {"client": run.KOVA, "values": [kova]},
        ]

    scenarios = {f"c/{api}": rows(85.0) for api in ("openai", "gemini", "ollama")}
    targets = {
        row["key"]: row
        for row in run.evaluate_targets(scenarios, ["openai", "gemini", "ollama"])
        if row["target"].startswith("provider: streaming events/s")
    }
    assert sorted(targets) == ["c/gemini", "c/ollama", "c/openai"]  # one row each
    assert targets["c/openai"]["limit"] == ">= 0.8"
    assert targets["c/openai"]["met"]
    for api in ("gemini", "ollama"):
        assert targets[f"c/{api}"]["limit"] == ">= 0.9"
        assert not targets[f"c/{api}"]["met"]


def test_responses_payloads_decode_with_kova_and_the_floor_parse() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import payloads
    finally:
        sys.path.remove(str(BENCH))
    from kova import TextDelta
    from kova.providers import SseFramer
    from kova.providers.openai._responses_stream import ResponsesStreamDecoder

    body = payloads.sse_body("responses", 5)
    events = [
        json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: ")
    ]
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == payloads.answer_text(5)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"
    decoder = ResponsesStreamDecoder(endpoint="http://bench")
    decoded = [*decoder.feed(SseFramer().feed(body)), *decoder.finish()]
    assert decoder.error is None
    assert "".join(e.text for e in decoded if isinstance(e, TextDelta)) == payloads.answer_text(5)
    assert b'"type":"function_call"' in payloads.build("responses", False, True, 1)
