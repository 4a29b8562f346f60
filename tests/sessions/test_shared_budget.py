"""A budget shared by processes through a session store's file: every reservation and
settlement is one transaction, so turns in several processes together never spend more than
the budget; a process that dies mid-call leaves its hold counted as spent, never free."""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import textwrap
import time
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest
import trio

from kova import InferenceConfig, Usage
from kova.agent import AgentBuilder, Prices
from kova.errors import BudgetExceeded, BuildError
from kova.sessions import SessionStore, SqliteSessionStore
from kova.sessions._budget import _HOLD_SECONDS, _figures, _reserve
from kova.testing import ScriptedProvider, ScriptRequest, reply_text

if TYPE_CHECKING:
    from pathlib import Path

PRICES = Prices({"scripted": {"input": 1, "output": 2}})  # USD per million tokens
MAX_TOKENS = 100


def _holds(path: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT amount, spent FROM kova_budget_holds").fetchall()


def _spent(path: Path, name: str = "fleet") -> Decimal:
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT spent FROM kova_budgets WHERE name = ?", (name,)).fetchone()
    return Decimal(row[0]) if row else Decimal(0)


async def _two_stores_share_one_budget(one: SessionStore, two: SessionStore) -> Decimal:
    """Two stores of one database stand for two processes: four agents, 200 concurrent
    turns on a $0.01 budget. What the model's answers cost."""
    rng = random.Random(7)
    real: list[Decimal] = []

    def model(request: ScriptRequest) -> object:
        usage = Usage(input_tokens=rng.randint(1, 10), output_tokens=rng.randint(1, MAX_TOKENS))
        real.append(Decimal(usage.input_tokens + 2 * usage.output_tokens) / 1_000_000)
        return reply_text("ok", usage=usage)

    budgets = [one.budget("0.01", name="fleet"), two.budget("0.01", name="fleet")]  # type: ignore[attr-defined]
    assert budgets[0].shared
    assert "fleet" in repr(budgets[0])
    agents = [
        AgentBuilder()
        .provider(ScriptedProvider(model))
        .prices(PRICES)
        .budget(budgets[index % 2])
        .inference_config(InferenceConfig(max_tokens=MAX_TOKENS))
        .build()
        for index in range(4)
    ]
    outcomes = {"ok": 0, "refused": 0}

    async def turn(index: int) -> None:
        try:
            await agents[index % 4].run(f"turn {index}")
        except BudgetExceeded:
            outcomes["refused"] += 1
        else:
            outcomes["ok"] += 1

    async with agents[0], agents[1], agents[2], agents[3], trio.open_nursery() as nursery:
        for index in range(200):
            nursery.start_soon(turn, index)
    assert outcomes["ok"] > 20, outcomes
    assert outcomes["refused"] > 20, outcomes
    return sum(real, Decimal(0))


async def test_two_stores_on_one_file_share_one_budget(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as one, SqliteSessionStore(path) as two:
        real = await _two_stores_share_one_budget(one, two)
    assert real == _spent(path) <= Decimal("0.01")
    assert _holds(path) == []  # every hold settled


async def test_two_postgres_stores_share_one_budget(postgres_db: str) -> None:
    pytest.importorskip("psycopg")
    import psycopg

    from kova.sessions import PostgresSessionStore

    async with PostgresSessionStore(postgres_db) as one, PostgresSessionStore(postgres_db) as two:
        real = await _two_stores_share_one_budget(one, two)
    with psycopg.connect(postgres_db) as db:
        spent = db.execute("SELECT spent FROM kova_budgets WHERE name = 'fleet'").fetchone()
        holds = db.execute("SELECT count(*) FROM kova_budget_holds").fetchone()
    assert spent is not None
    assert real == Decimal(spent[0]) <= Decimal("0.01")
    assert holds == (0,)


PROCESS = textwrap.dedent(
    """
    import json, random, sys, trio
    from decimal import Decimal
    from kova import InferenceConfig, Usage
    from kova.agent import AgentBuilder, Prices
    from kova.errors import BudgetExceeded
    from kova.sessions import SessionStore, SqliteSessionStore
    from kova.testing import ScriptedProvider, reply_text

    path, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    real = []

    async def model(request):
        await trio.sleep(rng.random() / 100)
        usage = Usage(input_tokens=rng.randint(1, 10), output_tokens=rng.randint(1, 100))
        real.append(str(Decimal(usage.input_tokens + 2 * usage.output_tokens) / 1_000_000))
        return reply_text("ok", usage=usage)

    async def main():
        refused = 0
        async with SqliteSessionStore(path) as store:
            builder = (
                AgentBuilder()
                .provider(ScriptedProvider(model))
                .prices(Prices({"scripted": {"input": 1, "output": 2}}))
                .budget(store.budget("0.01", name="fleet"))
                .inference_config(InferenceConfig(max_tokens=100))
            )
            async with builder.build() as agent, trio.open_nursery() as nursery:
                async def turn(index):
                    nonlocal refused
                    try:
                        await agent.run(f"turn {index}")
                    except BudgetExceeded:
                        refused += 1
                for index in range(60):
                    nursery.start_soon(turn, index)
        print(json.dumps({"real": real, "refused": refused}))

    trio.run(main)
    """
)


async def test_processes_sharing_a_budget_never_spend_more_than_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    script = tmp_path / "process.py"
    script.write_text(PROCESS)
    results: list[dict[str, object]] = []

    async def run(seed: int) -> None:
        done = await trio.run_process(
            [sys.executable, str(script), str(path), str(seed)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        results.append(json.loads(done.stdout))

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for seed in range(3):
                nursery.start_soon(run, seed)
    real = sum(Decimal(cost) for result in results for cost in result["real"])  # type: ignore[attr-defined]
    refused = sum(result["refused"] for result in results)  # type: ignore[misc]
    assert refused > 0  # 180 turns of up to $0.00021 each do not fit in $0.01
    assert real == _spent(path) <= Decimal("0.01")
    assert _holds(path) == []


def test_a_hold_whose_process_died_counts_as_spent(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    now = time.time()
    with sqlite3.connect(path, isolation_level=None) as db:
        entry, spent, reserved = _reserve(db, "fleet", Decimal(1), None, Decimal("0.4"), now)
        assert entry is not None
        assert (spent, reserved) == (0, Decimal("0.4"))
        # Still in flight an hour less a second later; then its process must be gone.
        assert _figures(db, "fleet", None, now + _HOLD_SECONDS - 1) == (0, Decimal("0.4"))
        assert _figures(db, "fleet", None, now + _HOLD_SECONDS) == (Decimal("0.4"), 0)
        refused, _, _ = _reserve(db, "fleet", Decimal(1), None, Decimal("0.7"), now + 7200)
        assert refused is None


async def test_a_shared_budget_with_a_window(tmp_path: Path) -> None:
    usage = Usage(input_tokens=100, output_tokens=100)
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        budget = store.budget("0.001", window=3600, name="hourly")
        builder = (
            AgentBuilder()
            .provider(ScriptedProvider([reply_text("a", usage=usage) for _ in range(2)]))
            .prices(PRICES)
            .budget(budget)
            .inference_config(InferenceConfig(max_tokens=200))
        )
        async with builder.build() as agent:
            await agent.run("one")
            await agent.run("two")
    assert budget.spent == Decimal("0.0006")
    assert budget.reserved == 0
    assert _holds(tmp_path / "s.db") == [("0.0003", 1), ("0.0003", 1)]


def test_a_shared_budget_needs_a_name() -> None:
    store = SqliteSessionStore("unused.db")
    with pytest.raises(BuildError, match="non-empty str"):
        store.budget(1, name="")
