"""`memory ingest` then a sleep pass: every turn of a conversation kept, none named in a query,
no turn's words or vectors read."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from octobrain.memory.conversation import parse_text
from tests.ingest_support import brain

MINUTE = timedelta(minutes=1)


def test_a_sleep_pass_keeps_every_turn_of_a_conversation(tmp_path: Path) -> None:
    """Turns are a record of what was said: the same reply to five questions is five turns,
    each in its place, never merged into one summary like near-duplicate memories are."""
    now = datetime.now(UTC)
    records = []
    for i in range(5):
        asked = f"Can you look at the failure number {i} in the deploy job?"
        records.append(
            {"speaker": "Ana", "text": asked, "time": (now + 2 * i * MINUTE).isoformat()}
        )
        reply = "Thanks, sounds good to me!"
        records.append(
            {"speaker": "Bo", "text": reply, "time": (now + (2 * i + 1) * MINUTE).isoformat()}
        )
    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps(records)))
    twins = [
        f"Token refresh runs every five minutes on the {m} gateway." for m in ("", "api", "edge")
    ]
    for text in twins:  # three near-duplicate memories beside them still merge
        b.memorize(title="Token refresh", content=text)
    report = b.sleep_consolidate(threshold=0.85, min_size=3)
    merged = [m.content for c in report.consolidations for m in c.members]
    assert merged and "Thanks, sounds good to me!" not in merged
    replies = [h for h in b.recent(limit=100) if h.content == "Thanks, sounds good to me!"]
    assert len(replies) == 5


def test_a_sleep_pass_over_many_turns_names_none_of_them_in_a_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass never merges turns, so the turns a store holds add nothing to its queries: the
    `achieves` edges were looked up by naming every recent row, and a store of 200,000 turns
    made that one query 33 s of CPU and 9 GB. The notes beside the turns still merge."""
    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps([{"speaker": "Ana", "text": f"turn {i}"} for i in range(600)])))
    for where in ("", "api", "edge"):
        b.memorize(title="Token refresh", content=f"Token refresh runs every five minutes {where}.")
    import octobrain.memory.sleep as sleep_module

    named: list[int] = []

    def counting_sql_in(column: str, values: Any) -> str:
        named.append(len(values))
        return sql_in(column, values)

    from octobrain.store.sql import sql_in

    monkeypatch.setattr(sleep_module, "sql_in", counting_sql_in)
    monkeypatch.setattr(b.store, "relationships_of", _counting(b.store.relationships_of, named))
    report = b.sleep_consolidate(threshold=0.85, min_size=3)
    assert [len(c.members) for c in report.consolidations] == [3]
    assert max(named, default=0) < 600


def _counting(method: Any, named: list[int]) -> Any:
    def counted(ids: Any) -> Any:
        named.append(len(ids))
        return method(ids)

    return counted


def test_a_sleep_pass_reads_the_words_and_vectors_of_no_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass's recent rows and its statement pool (the conflict check's) read every working
    row of the scope whole, turns included, with their words and vectors, before dropping the
    turns: a store of 200,000 turns and one note read them all. Only the tags are read of a
    turn now."""
    from octobrain.store.memories import MemoryStore
    from octobrain.store.pinned import Pinned

    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps([{"speaker": "Ana", "text": f"turn {i}"} for i in range(600)])))
    for where in ("", "api", "edge"):
        b.memorize(title="Token refresh", content=f"Token refresh runs every five minutes {where}.")
    wide: list[int] = []  # rows of each read that held words or vectors

    def counting(read: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            table = read(*args, **kwargs)
            if {"content", "embedding"} & set(table.column_names):
                wide.append(table.num_rows)
            return table

        return counted

    for cls, name in ((MemoryStore, "scan_arrow"), (Pinned, "scan_arrow"), (Pinned, "take")):
        monkeypatch.setattr(cls, name, counting(getattr(cls, name)))
    report = b.sleep_consolidate(threshold=0.85, min_size=3, dry_run=True)
    assert [len(c.members) for c in report.consolidations] == [3]
    assert wide and max(wide) == 3, wide
