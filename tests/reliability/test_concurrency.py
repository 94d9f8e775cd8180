"""Concurrency and load with real processes on one store (the fast CI subset of the soak)."""

from __future__ import annotations

from pathlib import Path

from tests.reliability.load import Plan, http_load, run_mixed, verify


def test_cli_stdio_and_http_writers_lose_nothing_and_see_each_other(tmp_path: Path) -> None:
    data = tmp_path / "data"
    plan = Plan(cli_workers=2, cli_ops=2, stdio_workers=1, http_workers=2, mcp_ops=6)
    ledger = run_mixed(data, tmp_path, plan)
    assert ledger.errors == []
    assert verify(data, ledger) == []
    writers = plan.cli_workers + plan.stdio_workers + plan.http_workers
    assert len(ledger.written) == plan.cli_workers * plan.cli_ops + (writers - 2) * plan.mcp_ops
    assert ledger.deleted and ledger.links and ledger.tags
    assert ledger.seen_others > 0


def test_http_concurrent_clients_have_zero_errors(tmp_path: Path) -> None:
    figures = http_load(tmp_path / "data", tmp_path, clients=4, requests=6, budget_s=120)
    assert figures["errors"] == 0, figures["error_samples"]
    assert figures["calls"] == 24
