"""`memory ingest`: the fields of a chat export's turn as exports write them — text that shows
nothing, a long speaker name, a time in milliseconds, a turn without a time, `24:00`."""

from __future__ import annotations

import json
from pathlib import Path

from octobrain.memory.conversation import parse_text
from tests.test_ingest import brain, stored

INVISIBLE = "\u200b\u00ad\u2060\ufeff"  # zero-width space, soft hyphen, word joiner, BOM


def test_a_turn_of_only_invisible_characters_is_skipped_and_counted(tmp_path: Path) -> None:
    # Before: stored as a memory no word finds (the analyser drops each of them), titled and
    # shown as empty.
    records = [
        {"speaker": "Ann", "text": INVISIBLE, "time": "2024-01-01T10:00:00Z"},
        {"speaker": "Ann", "text": f" {INVISIBLE}\n", "time": "2024-01-01T10:00:30Z"},
        {"speaker": "Bob", "text": "The deploy is on Friday.", "time": "2024-01-01T10:01:00Z"},
    ]
    b = brain(tmp_path)
    report = b.ingest(parse_text(json.dumps(records)))
    assert list(stored(b)) == ["The deploy is on Friday."]
    assert (report.added, report.blank) == (1, 2)
    assert "2 with blank text skipped (no visible character)" in report.summary("1")
    locomo = {"conversation": {"session_1": [{"speaker": "A", "text": INVISIBLE}]}}
    (conversation,) = parse_text(json.dumps([locomo]), "locomo")
    assert (len(conversation.turns), conversation.blank) == (0, 1)
