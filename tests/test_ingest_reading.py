"""`memory ingest` reads a file a part at a time: a group of turns held at once, a JSONL file a
line at a time, a JSON array a record at a time, a broken document placed where it broke."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.conversation import parse_text
from tests.ingest_support import SCOPE, brain
from tests.traced import traced


def test_an_ingest_holds_a_group_of_turns_at_once_and_an_unchanged_file_is_read_cheaply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every turn's memory was built before the first was written: 200,000 tiny turns took
    1 GB (a 64 MiB file, ten times as many). Ingested again unchanged, each batch of 256 read
    the store four times and took the write lock: 63 s of CPU for 200,000 turns."""
    import octobrain.memory.ingest as ingest_module

    alive = _count_alive(monkeypatch, ingest_module, "Memory")
    b = brain(tmp_path)
    group = 1024  # turns built, checked and written at once (`ingest.BATCH`)
    turns = 3 * group + 100
    records = [{"speaker": "Ann", "text": f"turn {i}"} for i in range(turns)]
    with _no_collection():  # (a group let go is freed then, not when a collection runs)
        first = b.ingest(parse_text(json.dumps(records)))
    assert (first.added, first.links) == (turns, turns - 1)
    # (the group being written, and the next one as it is built)
    assert 0 < alive["most"] <= 2 * group, alive
    locks, reads = [], []
    taken = b.store.write_lock
    monkeypatch.setattr(b.store, "write_lock", lambda: locks.append(1) or taken())
    monkeypatch.setattr(b.store, "values_of", _counting_all(b.store.values_of, reads))
    monkeypatch.setattr(b.store, "held", _counting_all(b.store.held, reads))
    again = b.ingest(parse_text(json.dumps(records)))
    assert (again.added, again.skipped_existing, again.links) == (0, turns, 0)
    assert locks == [] and len(reads) == 4  # one read of the turns per batch of 1,024


def test_a_files_turns_are_read_again_batch_by_batch_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every turn of a file was parsed into one list held through the whole ingest: about 270
    bytes a turn, 0.5 GB for a 64 MiB file of tiny turns. Now a chat export's or transcript's
    turns are checked once, then read from the text again as the batches are written: the
    same memories, and a killed ingest's acknowledged batches kept, the rest added by a re-run."""
    import octobrain.memory.conversation_parse as conversation_module
    from octobrain.memory.conversation import Conversation
    from octobrain.memory.ingest import turn_memories

    alive = _count_alive(monkeypatch, conversation_module, "Turn")
    turns = 3 * 1024 + 100  # four batches (`ingest.BATCH`)
    records = [{"speaker": ["Ann", "Bo"][i % 2], "text": f"turn {i}"} for i in range(turns)]
    text = "\n".join(json.dumps(r) for r in records)
    (conv,) = parse_text(text)
    b = brain(tmp_path)
    written: list[int] = []

    def killed_after_two(n: int) -> None:
        written.append(n)
        if len(written) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        b.ingest([conv], progress=killed_after_two)
    assert 0 < alive["most"] <= 8, alive  # a turn, its neighbours: not the file's 3,172
    assert b.store.count() == 2048 and len(b.store.all_relationships()) == 2047
    rest = b.ingest(parse_text(text))
    assert (rest.added, rest.skipped_existing, rest.links) == (turns - 2048, 2048, turns - 2048)
    assert b.store.count() == turns and len(b.store.all_relationships()) == turns - 1

    def shown(c: Conversation) -> list[tuple[Any, ...]]:
        made = turn_memories(b, c, scope=SCOPE)
        return [(m.id, m.title, m.content, m.context, m.tags) for m in made]

    held = Conversation(conv.key, list(conv.turns), conv.blank)
    assert shown(conv) == shown(held) and len(held.turns) == turns


@contextmanager
def _no_collection() -> Iterator[None]:
    """No garbage collection meanwhile: what is counted alive is what is still referred to. A
    new store's first group was held a group longer by a cycle (a LanceDB error's frames) that
    only a collection frees, so the count depended on when one ran: 3,072 > 2,048 under load."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _count_alive(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> dict[str, int]:
    """How many instances of `module.<name>` are alive (`now`) and were at most at once
    (`most`), counted by a subclass put in its place."""
    alive = {"now": 0, "most": 0}

    class Counted(getattr(module, name)):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            alive["now"] += 1
            alive["most"] = max(alive["most"], alive["now"])

        def __del__(self) -> None:
            alive["now"] -= 1

    monkeypatch.setattr(module, name, Counted)
    return alive


def _counting_all(method: Any, calls: list[int]) -> Any:
    def counted(*args: Any) -> Any:
        calls.append(1)
        return method(*args)

    return counted


def test_a_broken_json_document_is_placed_where_it_broke() -> None:
    # A pretty-printed export broken on line 3 was read again as JSONL and blamed "line 1".
    broken = '[\n  {"speaker": "a", "text": "b"},\n  {"speaker": "a" "text": "b"}\n]'
    with pytest.raises(InvalidInput, match=r"^file: is not JSON \(Expecting ',' delimiter: "
                       r"line 3, column 19\)$"):  # fmt: skip
        parse_text(broken)
    with pytest.raises(InvalidInput, match=r"^file: line 2 is not JSON .*expected JSON or JSONL$"):
        parse_text('{"speaker": "a", "text": "b"}\n{"speaker" 2}\n')  # JSONL keeps its lines


def test_a_jsonl_file_is_read_a_line_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line's object was read before the first turn was made: with the list of lines and
    the turns beside them, 200,000 tiny turns took the parse to 225 MB (a 64 MiB file, ten
    times as many). Now an object lives from its line to its turn (20 are read ahead to tell
    the format)."""
    import octobrain.memory.conversation_parse as conversation_module

    alive = {"now": 0, "most": 0}

    class Record(dict):  # type: ignore[type-arg]
        def __del__(self) -> None:
            alive["now"] -= 1

    read_json = conversation_module.read_json

    def counted(text: str | bytes) -> Any:
        value = read_json(text)
        if isinstance(value, dict):
            alive["now"] += 1
            alive["most"] = max(alive["most"], alive["now"])
            return Record(value)
        return value

    monkeypatch.setattr(conversation_module, "read_json", counted)
    lines = [json.dumps({"speaker": "Ann", "text": f"turn {i}"}) for i in range(3000)]
    (conv,) = parse_text("\n".join(lines))
    assert len(conv.turns) == 3000 and conv.turns[-1].text == "turn 2999"
    assert alive["most"] <= 22, alive  # the 20 read ahead, the line being read, the last one


def test_a_json_array_file_is_read_a_record_at_a_time() -> None:
    """A JSON document (a chat export's array, LoCoMo's list of samples) was read whole with
    `json.loads` before its first turn was made: every record's objects beside the turns (a
    64 MiB array is about ten times that as objects). Now each value of the array is read as
    its turns are made, so reading an array peaks no higher than reading the same records as
    JSONL, and the turns are the same."""
    common = """
        import json
        from octobrain.memory.conversation import parse_text

        def work(text):
            return [[t.text for t in c.turns] for c in parse_text(text)]
    """
    records = "[{'speaker': 'Ann', 'text': f'turn {i}'} for i in range(20_000)]"
    as_lines = traced(
        common, f"def prepare():\n    return ['\\n'.join(json.dumps(r) for r in {records})]"
    )
    as_array = traced(common, f"def prepare():\n    return [json.dumps({records})]")
    assert as_array["result"] == as_lines["result"] and len(as_array["result"][0]) == 20_000
    assert as_array["peak"] < 1.15 * as_lines["peak"], (as_array, as_lines)  # whole: 1.6 times
    samples = traced(
        common,
        """
        def prepare():
            session = lambda k: [
                {"speaker": "A", "text": f"turn {k}.{i}", "dia_id": f"D1:{i}"} for i in range(1000)
            ]
            samples = [
                {"sample_id": f"s{k}", "conversation": {"session_1": session(k)}}
                for k in range(20)
            ]
            return [json.dumps(samples)]

        def work(text):  # the turns made are what is held after
            global found
            found = parse_text(text)
            return [len(c.turns) for c in found]
        """,
    )
    assert samples["result"] == [1000] * 20
    assert samples["peak"] < 1.5 * samples["held"], samples  # whole: 1.8 times the turns made


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"])
def test_a_jsonl_file_with_any_line_end_is_read_and_named_by_line(end: str) -> None:
    # Saved with old Mac line ends (a lone CR), a transcript read as one line: "line 1 is not
    # JSON". U+2028 inside a string stays part of its line.
    said = "first point\u2028second point"
    records = [
        {"type": "user", "uuid": "u1", "message": {"content": said}},
        {"type": "assistant", "uuid": "u2", "message": {"content": "noted"}},
    ]
    text = end + end.join(json.dumps(r, ensure_ascii=False) for r in records) + end
    [conversation] = parse_text(text)
    assert [t.text for t in conversation.turns] == [said, "noted"]
    with pytest.raises(InvalidInput, match=r"^file: line 5 is not JSON"):
        parse_text(text + end + "{oops" + end)


def test_a_jsonl_turn_holding_a_unicode_line_separator_is_read_whole() -> None:
    # JSON.stringify (a Claude Code transcript) and `ensure_ascii=False` leave U+2028, U+2029
    # and U+0085 raw inside a string: the file was cut there, refused as "line 1 is not JSON".
    said = "pasted from a PDF:\u2028first point\u2029second point\x85third"
    records = [
        {"type": "user", "uuid": "u1", "message": {"content": said}},
        {"type": "assistant", "uuid": "u2", "message": {"content": "noted"}},
    ]
    text = "\r\n".join(json.dumps(r, ensure_ascii=False) for r in records)
    [conversation] = parse_text(text, "claude")
    assert [t.text for t in conversation.turns] == [said, "noted"]
    bad = text + '\n{"type": "user", "uuid": "u1", "message": {"content": "other"}}'
    with pytest.raises(InvalidInput, match=r"^line 3\.uuid: duplicate of line 1\.uuid"):
        parse_text(bad, "claude")
