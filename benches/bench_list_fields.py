"""The list fields of a tool call (`tags`, `related_files`: `models.clean_tags` / `clean_files`)
as a hostile client sends them: 100,000 distinct tags and 60,000 distinct paths, about 1 MiB of
JSON each, the most one message holds. Each is refused ("at most 10 items"), after one pass:
the check ran under the MCP pool's lock, every other memory call waiting for it.

Run: .venv/bin/pytest benches/bench_list_fields.py --benchmark-only
"""

from __future__ import annotations

from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.models import clean_files, clean_tags

CASES = {
    "100,000 distinct tags": (clean_tags, [f"t{i}" for i in range(100_000)]),
    "60,000 distinct related files": (clean_files, [f"src/f{i}.py" for i in range(60_000)]),
}


def _refused(clean: Any, values: list[str]) -> str:
    try:
        clean(values)
    except InvalidInput as exc:
        return str(exc)
    raise AssertionError("accepted")


@pytest.mark.parametrize("name", list(CASES))
def test_list_field(benchmark: Any, name: str) -> None:
    benchmark.group = "list fields"
    benchmark.extra_info["case"] = name
    clean, values = CASES[name]
    out = benchmark.pedantic(_refused, args=(clean, values), rounds=3, iterations=1)
    assert "at most" in out
