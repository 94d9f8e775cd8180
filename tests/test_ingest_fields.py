"""`memory ingest`: the fields of a chat export's turn as exports write them — text that shows
nothing, a long speaker name, a time in milliseconds, a turn without a time, `24:00`."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.conversation import parse_text
from octobrain.memory.export import export_jsonl
from octobrain.memory.query import parse_time
from octobrain.memory.transfer import import_jsonl
from tests.ingest_support import SCOPE, brain, cli, stored

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


def test_a_claude_code_turn_of_only_invisible_characters_is_not_stored(tmp_path: Path) -> None:
    # Before: the transcript reader the hooks and ingest share kept a turn (or a text block)
    # of zero-width characters: a memory shown as empty, or words led by one.
    def entry(uid: str, *texts: str) -> dict[str, Any]:
        blocks = [{"type": "text", "text": t} for t in texts]
        return {"type": "user", "uuid": uid, "message": {"role": "user", "content": blocks}}

    lines = [entry("u1", INVISIBLE), entry("u2", INVISIBLE, "Ship it on Friday."), entry("u3", " ")]
    b = brain(tmp_path)
    report = b.ingest(parse_text("\n".join(json.dumps(e) for e in lines), "claude"))
    assert list(stored(b)) == ["Ship it on Friday."]
    assert report.added == 1


@pytest.mark.parametrize(
    ("time", "said"),
    [
        (1733400000000, datetime(2024, 12, 5, 12, 0, tzinfo=UTC)),  # Slack, Discord, Date.now()
        (1733400000123.0, datetime(2024, 12, 5, 12, 0, 0, 123000, tzinfo=UTC)),
        (1733400000, datetime(2024, 12, 5, 12, 0, tzinfo=UTC)),  # seconds, as before
        (99999999999, datetime(5138, 11, 16, 9, 46, 39, tzinfo=UTC)),  # (refused: ahead)
    ],
)
def test_a_time_in_milliseconds_is_read_as_milliseconds(time: float, said: datetime) -> None:
    # Before: `turns[0].time: must be Unix seconds within years 1–9999 in UTC, got
    # 1733400000000`, the whole export refused.
    records = json.dumps([{"speaker": "Ann", "text": "hello", "time": time}])
    if said.year > 3000:
        with pytest.raises(InvalidInput, match=r"^turns\[0\]\.time: must not be more than a day"):
            parse_text(records)
        return
    (conversation,) = parse_text(records)
    assert conversation.turns[0].time == said


def test_a_time_neither_seconds_nor_milliseconds_read_names_both() -> None:
    records = json.dumps([{"speaker": "Ann", "text": "hello", "time": 1733400000000000}])  # µs
    with pytest.raises(InvalidInput) as refused:
        parse_text(records)
    assert str(refused.value) == (
        "turns[0].time: must be Unix seconds, or milliseconds (a number of 12 digits or more), "
        "within years 1–9999 in UTC, got 1733400000000000"
    )


@pytest.mark.parametrize("sent", ["1733400000000000", "9" * 400])
def test_a_time_of_digits_too_large_is_quoted_as_sent(sent: str) -> None:
    # Before: the number it was read as, `got 1733400000000000.0` (µs as a string, as Slack
    # writes `ts`), and `got Infinity` for 400 digits (an MCP `ingest` of 800,000 too).
    records = json.dumps([{"speaker": "Ann", "text": "hello", "time": sent}])
    with pytest.raises(InvalidInput) as refused:
        parse_text(records)
    said = str(refused.value)
    assert said.startswith("turns[0].time: must be Unix seconds, or milliseconds"), said
    got = said.split("within years 1–9999 in UTC, got ", 1)[1]
    whole = len(sent) < 100  # (a longer one is cut in the middle, as every quoted value is)
    assert got == f'"{sent}"' if whole else got.startswith(f'"{sent[:40]}'), said
    assert "Infinity" not in said and ".0" not in said, said


def test_24_00_is_the_end_of_the_day_for_ingest_import_and_the_time_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ISO 8601's end of a day, which Python's `fromisoformat` refuses. Before: `must be
    # ISO-8601 (e.g. …), got '2024-01-01T24:00:00Z'` from ingest, import, --after/--before.
    end = "2024-01-01T24:00:00Z"
    next_day = datetime(2024, 1, 2, tzinfo=UTC)
    (conversation,) = parse_text(json.dumps([{"speaker": "Ann", "text": "hi", "time": end}]))
    assert conversation.turns[0].time == next_day
    b = brain(tmp_path)
    b.ingest([conversation])
    lines = [{**o, "created_at": end} if o["kind"] == "memory" else o for o in _exported(b)]
    other = brain(tmp_path / "other")
    import_jsonl(other, [json.dumps(line) for line in lines])
    (imported,) = other.recent()
    assert imported.created_at == next_day
    assert parse_time("--before", "2024-01-01T24:00") == next_day
    with pytest.raises(InvalidInput, match=r"^--after: must fall within years 1–9999 in UTC$"):
        parse_time("--after", "9999-12-31T24:00:00Z")
    with pytest.raises(InvalidInput, match=r'^--after: must be ISO-8601 .*, got "2024-01-01T24:'):
        parse_time("--after", "2024-01-01T24:00:01Z")  # (only 24:00 itself ends a day)
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    listed = cli("memory", "--scope", SCOPE, "remember", "hi", "--before", "2024-01-01T24:00Z")
    assert listed.exit_code == 0, listed.output


def _exported(b: Brain) -> list[dict[str, Any]]:
    out = io.StringIO()
    export_jsonl(b, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_speaker_name_over_60_characters_is_cut_and_said(tmp_path: Path) -> None:
    # Before: `turns[1].speaker: must be at most 60 characters`, the whole export refused for
    # one display name.
    long = "Dr. Annabel Catherine Montgomery-Fitzgerald (Platform Infrastructure, EMEA)"
    records = [
        {"speaker": "Bob", "text": "Who owns the ingress?", "time": "2024-01-01T10:00:00Z"},
        {"speaker": long, "text": "My team does.", "time": "2024-01-01T10:01:00Z"},
        {"speaker": long, "text": "Since March.", "time": "2024-01-01T10:02:00Z"},
    ]
    b = brain(tmp_path)
    report = b.ingest(parse_text(json.dumps(records)))
    assert report.added == 3
    said = stored(b)["My team does."]
    assert said.title.startswith(long[:59].rstrip() + "…, ")
    assert "with the speaker's name cut to 60 characters" in report.summary("3")
    assert report.summary("3").endswith("the most a name holds (first: turns[1].speaker)")
    again = b.ingest(parse_text(json.dumps(records)))
    assert (again.added, again.skipped_existing) == (0, 3)
    locomo = {"conversation": {"session_1": [{"speaker": long, "text": "hi"}]}}
    (conversation,) = parse_text(json.dumps([locomo]), "locomo")
    assert conversation.cut_at == "file[0].conversation.session_1[0].speaker"


def test_turns_without_a_time_are_said_to_be_dated_at_the_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: an old export without times was stored as said today, unsaid (the README: each
    # turn "created at the time it was said").
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    path = tmp_path / "old.json"
    records = [
        {"speaker": "Ann", "text": "We picked Postgres.", "time": "2019-03-01T10:00:00Z"},
        {"speaker": "Bob", "text": "And Redis for the queue."},
        {"speaker": "Ann", "text": "Agreed."},
    ]
    path.write_text(json.dumps(records))
    done = cli("memory", "--scope", SCOPE, "ingest", str(path))
    assert done.exit_code == 0, done.output
    (warning,) = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warning.startswith(
        "warning: 2 turns have no time: each is dated when first ingested, not when it was said"
    )
    dated = cli("memory", "--scope", SCOPE, "ingest", str(path), "--format", "json")
    assert json.loads(dated.stdout)["undated"] == 2
