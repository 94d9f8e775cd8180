"""`bench cold`'s table holds each command to the target the issue sets for the store's size."""

from __future__ import annotations

from typing import Any

from octobrain.bench.cold import cold_table


def _report(memories: int, remember_p50: float) -> dict[str, Any]:
    timing = {"p50_ms": remember_p50, "p90_ms": remember_p50 * 2}
    return {
        "runs": 7,
        "model": "hash:384",
        "machine": "x86_64, 2 CPUs",
        "memories": memories,
        "service": {"remember": timing},
        "in_process": {"remember": {"p50_ms": 3000.0, "p90_ms": 3100.0}},
        "mcp": {},
        "mcp_in_process": {},
        "service_rss_mb": 500.0,
    }


def test_remember_is_held_to_250_ms_at_10k_and_400_ms_at_100k() -> None:
    table = cold_table([_report(10_000, 300.0), _report(100_000, 300.0)])
    rows = [line for line in table.splitlines() if line.startswith("| `remember`")]
    assert rows[0].endswith("| ≤ 250 ms | no |")
    assert rows[1].endswith("| ≤ 400 ms | yes |")
    assert "500 MiB at 10,000, 500 MiB at 100,000" in table
