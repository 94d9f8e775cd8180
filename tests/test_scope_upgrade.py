"""A store written by an earlier version, which spelt the scope of the same remote otherwise
(before stop 60: the host's final dot and fullwidth letters kept; before stop 61: a punycode
host as written), read by the current code: the project's memories are still its own, and a
chat ingested then is not stored a second time (`store.respell`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.knowledge import Knowledge
from octobrain.memory import catchup
from octobrain.memory.brain import Brain
from octobrain.memory.conversation import parse_chat
from octobrain.store import manifest
from tests.brain_support import TOKEN_BUCKET, MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared

# (the spelling an earlier version derived for a remote, the scope derived for it now)
EARLIER = [
    ("github.com./acme/api", "github.com/acme/api"),
    ("ｇｉｔｈｕｂ.com/acme/api", "github.com/acme/api"),
    ("xn--bcher-kva.example/acme/api", "bücher.example/acme/api"),
]
CHAT = [
    {"speaker": "Ana", "text": f"turn {i}: the canary takes 5 percent", "time": f"2026-01-0{i}"}
    for i in range(1, 4)
]


def _written_before(make_brain: MakeBrain, earlier: str, now: str) -> tuple[Brain, str]:
    """A store holding a memory and a chat written in scope `earlier` as an earlier version
    wrote them (the scope it derived, ids made from it), without the mark of a store made now;
    returns it and the memory's id."""
    old = make_brain(now)
    old.scope = earlier  # (what that version derived for the checkout)
    stored, _ = old.memorize(*TOKEN_BUCKET, memory_type="decision")
    assert old.ingest([parse_chat(CHAT, key="standup")]).added == 3
    manifest.note(old.store.location, manifest.SCOPES_SPELT, None)
    return old, stored.id


@pytest.mark.parametrize(("earlier", "now"), EARLIER)
def test_memories_stored_under_a_scopes_earlier_spelling_stay_the_projects(
    make_brain: MakeBrain, earlier: str, now: str
) -> None:
    old, stored = _written_before(make_brain, earlier, now)
    chat_ids = {m.id for m in old.recent() if m.id != stored}

    brain = make_brain(now)
    assert {m.id for m in brain.recent()} == {stored, *chat_ids}
    found = brain.remember("token bucket rate limiting").hits
    assert [r.memory.id for r in found][:1] == [stored]
    assert {m.scope for m in brain.recent()} == {now}
    again = brain.ingest([parse_chat(CHAT, key="standup")])
    assert (again.added, again.skipped_existing) == (0, 3)
    assert len(brain.recent()) == 4


def test_a_store_made_now_is_not_respelt(make_brain: MakeBrain) -> None:
    brain = make_brain("github.com/acme/api")
    brain.memorize(*TOKEN_BUCKET, memory_type="decision")
    record = manifest.read(brain.store.location) or {}
    assert record.get(manifest.SCOPES_SPELT) == manifest.SCOPE_SPELLING


def test_a_restore_to_before_the_respelling_is_respelt_again(make_brain: MakeBrain) -> None:
    old, stored = _written_before(make_brain, "github.com./acme/api", "github.com/acme/api")
    before = old.history(1)[0]  # (its rows spelt as the earlier version did)
    brain = make_brain("github.com/acme/api")
    assert stored in {m.id for m in brain.recent()}
    brain.restore(before.version, confirm=True)
    assert stored in {m.id for m in make_brain("github.com/acme/api").recent()}


def test_documents_indexed_under_a_scopes_earlier_spelling_stay_the_projects(
    tmp_path: Path,
) -> None:
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nThe billing service restarts with systemctl restart billing.\n")

    def knowledge() -> Knowledge:
        return Knowledge(
            "bücher.example/acme/api", config=Config(), embedder=get_embedder("hash:64"),
            uri=tmp_path / "db",
        )  # fmt: skip

    old = knowledge()
    old.scope = "xn--bcher-kva.example/acme/api"  # (as the earlier version derived it)
    assert old.index(str(doc)).status == "indexed"
    manifest.note(old.kstore.location, manifest.KNOWLEDGE_SCOPES_SPELT, None)

    now = knowledge()
    hits = now.search("billing restarts").hits
    assert [h.scope for h in hits] == ["bücher.example/acme/api"]
    assert now.index(str(doc)).status == "unchanged"  # (the same source, not a second)
    assert len(now.kstore.scan_sources()) == 1


def test_a_process_open_across_another_processs_restore_still_sees_the_projects_memories(
    make_brain: MakeBrain,
) -> None:
    # `octobrain mcp` (or the resident service) keeps serving while another process restores
    # a version written before the respelling: it never opens the store again to respell it.
    old, stored = _written_before(make_brain, "github.com./acme/api", "github.com/acme/api")
    before = old.history(1)[0]
    serving = make_brain("github.com/acme/api")
    assert stored in {m.id for m in serving.recent()}
    make_brain("github.com/acme/api").restore(before.version, confirm=True)
    assert stored in {m.id for m in serving.recent()}
    found = serving.remember("token bucket rate limiting").hits
    assert [r.memory.id for r in found][:1] == [stored]
    record = manifest.read(serving.store.location) or {}
    assert record.get(manifest.SCOPES_SPELT) == manifest.SCOPE_SPELLING


def _serving_the_former_spelling(make_brain: MakeBrain) -> tuple[Brain, str]:
    """A process whose mirror holds a memory in the former spelling, and the memory's id; the
    store respelt since by another process."""
    old, stored = _written_before(make_brain, "github.com./acme/api", "github.com/acme/api")
    manifest.note(old.store.location, manifest.SCOPES_SPELT, manifest.SCOPE_SPELLING)
    serving = make_brain("github.com/acme/api")
    assert not serving.remember("token bucket rate limiting").hits  # (the mirror is loaded)
    manifest.note(old.store.location, manifest.SCOPES_SPELT, None)
    assert stored in {m.id for m in make_brain("github.com/acme/api").recent()}  # (respelt)
    return serving, stored


def test_a_mirror_holding_the_former_spelling_reads_the_respelt_rows_again(
    make_brain: MakeBrain,
) -> None:
    # A process whose mirror caught up with a store still spelt as before (a version a restore
    # put back, read before its respelling committed; a snapshot an earlier version wrote).
    serving, stored = _serving_the_former_spelling(make_brain)
    found = serving.remember("token bucket rate limiting").hits
    assert [r.memory.id for r in found][:1] == [stored]
    assert {m.scope for m in serving.recent()} == {"github.com/acme/api"}


def test_a_memory_restore_keeps_the_knowledge_tables_respelt(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    brain = make_brain("github.com/acme/api")
    brain.memorize(*TOKEN_BUCKET, memory_type="decision")
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nThe billing service restarts with systemctl restart billing.\n")
    knowledge = Knowledge(
        "github.com/acme/api", config=Config(), embedder=get_embedder("hash:64"),
        uri=tmp_path / "db",
    )  # fmt: skip
    assert knowledge.index(str(doc)).status == "indexed"
    brain.restore(brain.history(1)[0].version, confirm=True)
    record = manifest.read(brain.store.location) or {}
    assert record.get(manifest.KNOWLEDGE_SCOPES_SPELT) == manifest.SCOPE_SPELLING


def test_a_mirror_reading_every_row_reads_the_respelt_rows_again(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the previous test, caught up by reading every row (after a restore, or a count the
    # changed fragments do not explain): a row that only moved is read again if respelt.
    serving, stored = _serving_the_former_spelling(make_brain)
    monkeypatch.setattr(catchup, "cheap", lambda *_: None)
    found = serving.remember("token bucket rate limiting").hits
    assert serving.retriever.corpus.last_catch_up == "every row"
    assert [r.memory.id for r in found][:1] == [stored]
    assert {m.scope for m in serving.recent()} == {"github.com/acme/api"}
