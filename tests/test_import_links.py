"""`memory import` of links: a `same_session` link only with both its memories (and one a
removed session tag left behind), an ingested conversation's chain of turns, and why each
relationship an import did not store was not stored."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.transfer import import_jsonl
from tests.export_lines import ended
from tests.test_import_checks import SCOPE, MakeBrain, _dumped, _lines
from tests.test_import_checks import make_brain as checks_brain  # noqa: F401  (the fixture)


@pytest.fixture
def make_brain(checks_brain: MakeBrain) -> MakeBrain:  # noqa: F811
    return checks_brain


def _two_sessions(make_brain: MakeBrain) -> tuple[list[dict[str, Any]], list[str]]:
    """An export of three memories of session 1 (a chain of two same_session links) and one
    of session 2, which the first links to with related_to; the ids, in that order."""
    one, two = make_brain("src", session="sess-1"), make_brain("src", session="sess-2")
    other, _ = two.memorize("Unrelated note", "Quarterly planning happens in the first week.")
    ids = [
        one.memorize(title, text)[0].id
        for title, text in [
            ("Cache warmup", "The cache warms on deploy from the top 100 keys."),
            ("Queue backlog", "The worker queue backlog alarm fires at 5000 jobs."),
            ("Deploy freeze", "No deploys on Fridays after 3 pm."),
        ]
    ]
    one.relate(ids[0], other.id)
    return _lines(one), [*ids, other.id]


def test_a_same_session_link_is_imported_with_both_its_memories_only(
    make_brain: MakeBrain,
) -> None:
    lines, ids = _two_sessions(make_brain)
    assert import_jsonl(make_brain("copy"), _dumped(lines)).relationships == 3
    other = make_brain("other")
    # One whose memory the file does not hold would have linked the store's own memory.
    chain = next(i for i, o in enumerate(lines) if o.get("relationship_type") == "same_session")
    gone = lines[chain]["target_id"]
    cut = [o for o in lines if o.get("id") != gone or o["kind"] != "memory"]
    with pytest.raises(InvalidInput, match=rf"^line {chain}\.target_id: names {gone}, no memory"):
        import_jsonl(other, ended(_dumped(cut)))
    assert other.store.count() == 0
    assert other.store.relationships_of(ids) == []


def test_a_memory_whose_session_tag_was_removed_exports_and_imports_back(
    make_brain: MakeBrain,
) -> None:
    # A same_session link was refused unless both memories still held one session: tag, so
    # the export of a memory edited with --remove-tags could not be imported back.
    brain = make_brain("src", session="sess-1")
    first, _ = brain.memorize("Cache warmup", "The cache warms on deploy from the top 100 keys.")
    brain.memorize("Queue backlog", "The worker queue backlog alarm fires at 5000 jobs.")
    tag = next(t for t in first.tags if t.startswith("session:"))
    brain.update(first.id, remove_tags=[tag])
    lines = _lines(brain)
    assert any(o.get("relationship_type") == "same_session" for o in lines)
    copy = make_brain("copy")
    assert import_jsonl(copy, _dumped(lines)).relationships == 1
    assert _lines(copy)[1:] == lines[1:]


def test_an_ingested_conversation_imported_back_keeps_its_turns_chained_in_order(
    make_brain: MakeBrain,
) -> None:
    # Ingested turns are found with their neighbours by the `same_session` chain: an export
    # imported elsewhere keeps it, and the grown conversation ingested there continues it.
    from octobrain.memory.conversation import parse_text

    said = ["I moved to Lisbon in March.", "What made you choose it?", "The surfing at Ericeira."]
    records = [
        {"speaker": ("Ana", "Bo")[i % 2], "text": t, "time": f"2023-05-01T10:0{i}:00Z"}
        for i, t in enumerate([*said, "Do you surf every weekend?"])
    ]
    source = make_brain("src")
    source.ingest(parse_text(json.dumps(records[:3])))
    copy = make_brain("copy")
    assert import_jsonl(copy, _dumped(_lines(source))).relationships == 2

    def chain(brain: Brain) -> list[str]:
        """The turns' words, each linked to the one said before it."""
        turns = {m.id: m for m in brain.recent(10)}
        links = {r.source_id: r.target_id for r in brain.store.relationships_of(list(turns))}
        last = max(turns.values(), key=lambda m: m.created_at).id
        words = [turns[last].content]
        while last in links:
            last = links[last]
            words.insert(0, turns[last].content)
        return words

    assert chain(copy) == said
    shown = [
        [(n.memory.id, n.relationship_type.value, n.via) for n in b.remember("Ericeira").neighbours]
        for b in (source, copy)
    ]
    assert shown[0] == shown[1] and any(kind == "same_session" for _, kind, _ in shown[1])
    assert copy.ingest(parse_text(json.dumps(records))).links == 1
    assert chain(copy) == [*said, "Do you surf every weekend?"]


def test_an_import_says_why_each_relationship_was_not_stored(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # Before: "2 relationships not stored: an end the store does not hold, or ends in two
    # projects", one count for two reasons, and an edge the store held counted nowhere.
    from click.testing import CliRunner

    from octobrain.cli.main import main

    target = make_brain("data/db")
    theirs, _ = make_brain("data/db", "other/project").memorize("Their service", "Runs Go 1.22.")
    ours, _ = target.memorize("Token bucket", "Rate limits use a token bucket per key.")
    target.memorize("Team convention", "Every service logs JSON lines.",
                    related_to=[{"target_id": ours.id}])  # fmt: skip
    lines = _lines(target)
    edge = next(o for o in lines if o["kind"] == "relationship")
    lines += [
        {**edge, "id": str(uuid.uuid4()), "target_id": theirs.id},
        {**edge, "id": str(uuid.uuid4()), "target_id": str(uuid.uuid4())},
    ]
    path = tmp_path / "file.jsonl"
    path.write_text("\n".join(ended(_dumped(lines))) + "\n")
    env = {"OCTOBRAIN_DATA_DIR": str(tmp_path / "data"), "OCTOBRAIN_EMBEDDING_MODEL": "hash:64"}
    text = CliRunner().invoke(main, ["memory", "--scope", SCOPE, "import", str(path)], env=env)
    assert text.exit_code == 0, text.output
    assert text.stdout.strip() == (
        "imported 0 memories, skipped 2 already present, 0 relationships (1 already present), "
        "0 re-embedded; 2 relationships not stored: 1 with an end the store does not hold, "
        "1 joining two projects"
    )
    args = ["memory", "--scope", SCOPE, "import", str(path), "--format", "json"]
    report = json.loads(CliRunner().invoke(main, args, env=env).stdout)
    assert report["relationships_not_stored"] == 2  # (as before: the sum of the three)
    assert (report["relationships_existing"], report["relationships_missing_end"]) == (1, 1)
    assert (report["relationships_across_projects"], report["relationships_unrecorded"]) == (1, 0)
