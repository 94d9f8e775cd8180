"""The memory engine through its facade, on real LanceDB in temp dirs with the hash embedder."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.config import Config, SearchConfig
from octobrain.embed.factory import get_embedder
from octobrain.errors import EmbeddingError, InvalidInput, StorageError
from octobrain.memory import export, import_check
from octobrain.memory.brain import ACCESS_WINDOW, Brain
from octobrain.memory.export import BATCH, export_jsonl
from octobrain.memory.render import ARCHIVED_MCP, format_recall, memory_to_dict, recall_to_dict
from octobrain.memory.search import Empty
from octobrain.memory.transfer import import_jsonl, reembed
from octobrain.models import Memory, MemoryType, Relationship, RelationshipType, Source, State
from octobrain.store import ModelMismatch
from octobrain.times import utcnow
from tests.export_lines import ended

MakeBrain = Callable[..., Brain]


@pytest.fixture
def make_brain(tmp_path: Path) -> MakeBrain:
    def make(scope: str = "github.com/acme/api", model: str = "hash:64") -> Brain:
        return Brain(scope, config=Config(), embedder=get_embedder(model), uri=tmp_path / "db")

    return make


TOKEN_BUCKET = (
    "Rate limiting decision",
    "API rate limiting uses a token bucket per key: 100 requests per minute, burst 20.",
)
POSTGRES = ("Primary database", "Postgres 16 is the primary database; Redis only caches sessions.")


def test_memorize_validates_and_returns_what_was_stored(make_brain: MakeBrain) -> None:
    brain = make_brain()
    mem, edges = brain.memorize(*TOKEN_BUCKET, memory_type="decision", tags=["api", " api "])
    assert edges == []
    stored = brain.get(mem.id)
    assert (stored.title, stored.memory_type, stored.tags) == (
        TOKEN_BUCKET[0],
        MemoryType.DECISION,
        ["api"],
    )
    assert (stored.scope, stored.source, stored.state) == (
        "github.com/acme/api",
        Source.AGENT_INFERRED,
        State.WORKING,
    )
    with pytest.raises(InvalidInput, match="^content: must be 10–10000 bytes"):
        brain.memorize("A title", "short")
    with pytest.raises(InvalidInput, match=r"^related_to\[0\]\.target_id: no memory"):
        brain.memorize(
            *POSTGRES, related_to=[{"target_id": "6f9619ff-8b86-d011-b42d-00c04fc964ff"}]
        )
    # Zero-width and format characters pass a byte minimum yet print as nothing.
    invisible = "^{}: must hold visible text, not only spaces, zero-width or format characters"
    for blank in ("\u200b\u200b", "\u2060\ufeff\u200d", "\u3164\u3164 \u200e"):
        with pytest.raises(InvalidInput, match=invisible.format("title")):
            brain.memorize(blank, POSTGRES[1])
        with pytest.raises(InvalidInput, match=invisible.format("content")):
            brain.memorize(POSTGRES[0], blank * 4)
    with pytest.raises(InvalidInput, match=invisible.format("title")):
        brain.update(mem.id, title="\u200b" * 3)
    # A right-to-left override prints "Deploy to prod" reversed around it: another title.
    bidi = "^{}: must not hold bidirectional embedding, override or isolate characters"
    with pytest.raises(InvalidInput, match=bidi.format("title")):
        brain.memorize("Deploy \u202edorp ot", POSTGRES[1])
    with pytest.raises(InvalidInput, match=bidi.format(r"tags\[1\]")):
        brain.memorize(*POSTGRES, tags=["ok", "\u2067x\u2069"])
    with pytest.raises(InvalidInput, match=bidi.format(r"add_files\[0\]")):
        brain.update(mem.id, add_files=["a\u202dz.py"])
    hebrew, _ = brain.memorize(
        "\u05e9\u05dc\u05d5\u05dd \u200fnote", "Right-to-left text keeps its marks."
    )
    assert hebrew.title == "\u05e9\u05dc\u05d5\u05dd \u200fnote"
    kept, _ = brain.memorize("Caf\u00e9 \u200bnote", "The caf\u00e9 opens at seven every day.")
    assert kept.title == "Caf\u00e9 \u200bnote"  # visible text around one is kept as given
    assert brain.store.count() == 3  # the rejected calls wrote nothing


def test_projects_are_isolated_and_both_see_global(make_brain: MakeBrain) -> None:
    a, b = make_brain("github.com/acme/api"), make_brain("github.com/acme/web")
    mem_a, _ = a.memorize(*TOKEN_BUCKET)
    mem_b, _ = b.memorize(
        "Rate limiting on the web", "The web app rate limiting shows a retry banner."
    )
    mem_g, _ = a.memorize(
        "Global rate limiting rule", "Rate limiting must always return HTTP 429.", global_=True
    )
    assert mem_g.scope == ""
    seen_a = {h.memory.id for h in a.remember("rate limiting", limit=10, min_relevance=0.0).hits}
    seen_b = {h.memory.id for h in b.remember("rate limiting", limit=10, min_relevance=0.0).hits}
    assert seen_a == {mem_a.id, mem_g.id}
    assert seen_b == {mem_b.id, mem_g.id}
    with pytest.raises(InvalidInput, match="^memory_id: no memory"):
        a.get(mem_b.id)
    with pytest.raises(InvalidInput, match=r"^memory_id\[0\]: no memory"):
        a.forget([mem_b.id], confirm=True)
    assert b.get(mem_b.id).id == mem_b.id  # the refused delete deleted nothing


def test_another_projects_words_do_not_move_a_projects_ranking_or_relevance(
    tmp_path: Path,
) -> None:
    # BM25 weighed a word by its rarity in the whole store: a client could learn whether
    # another project held a word from how its own results' scores and "words NN%" moved.
    def brain(where: str, scope: str) -> Brain:
        return Brain(scope, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / where)

    mine = [
        ("Zebrafish imaging", "The zebrafish imaging rig runs at 20 frames per second."),
        ("Rig calibration", "Calibrate the imaging rig every Monday before the first run."),
        ("Lab rota", "Alice runs the Monday session, Bob the Thursday one."),
        ("Fish feeding", "Feed the fish twice a day, brine shrimp in the evening."),
    ]
    answers = []
    for where, theirs in (("alone", 0), ("shared", 40)):
        a = brain(where, "github.com/acme/lab")
        for title, content in mine:
            a.memorize(title, content)
        b = brain(where, "github.com/other/secret")
        for i in range(theirs):  # another project writing the words the first one asks about
            b.memorize(f"Zebrafish note {i}", f"Zebrafish imaging session {i} on the rig.")
        hits = a.remember("zebrafish imaging rig", limit=10, min_relevance=0.0).hits
        answers.append([(h.memory.title, round(h.relevance, 6), h.why) for h in hits])
    assert answers[0] == answers[1]
    assert answers[0][0][0] == "Zebrafish imaging"


def test_words_about_code_find_the_identifier_that_holds_them(make_brain: MakeBrain) -> None:
    brain = make_brain()
    brain.memorize(
        "Pool settings", "Raise max_connections in pgbouncer.ini; pool.get_connection() timed out."
    )
    brain.memorize(*TOKEN_BUCKET)
    brain.memorize(*POSTGRES)
    for query in ("pgbouncer", "max connections", "get connection", "pgbouncer.ini"):
        hits = brain.remember(query, limit=3, min_relevance=0.0).hits
        (pool,) = [h for h in hits if h.memory.title == "Pool settings"]
        # (The hash embedder's vectors are noise: the words decide.)
        assert "bm25 #1" in pool.why and "words 100%" in pool.why, (query, pool.why)
        assert pool.relevance == max(h.relevance for h in hits), query


def test_updating_a_global_row_from_a_project_keeps_it_global(make_brain: MakeBrain) -> None:
    brain = make_brain()
    mem, _ = brain.memorize(*POSTGRES, global_=True)
    updated = brain.update(
        mem.id, content="Postgres 17 is the primary database since May.", add_tags=["db"]
    )
    assert updated.scope == "" and brain.get(mem.id).scope == ""
    assert brain.get(mem.id).tags == ["db"]
    assert brain.remember("Postgres 17", min_relevance=0.0).hits[0].memory.id == mem.id


def test_nothing_relevant_is_a_possible_answer(make_brain: MakeBrain) -> None:
    brain = make_brain()
    brain.memorize(*TOKEN_BUCKET)
    brain.memorize(*POSTGRES)
    assert brain.remember("chocolate cake recipe with frosting").hits == []
    assert brain.remember("token bucket").hits[0].memory.title == TOKEN_BUCKET[0]


def test_an_empty_answer_names_what_left_the_candidates_out(make_brain: MakeBrain) -> None:
    # Every empty `remember` said "nothing passed the relevance threshold … a lower
    # min_relevance", even when a date filter had removed every memory or the only match
    # was archived: lowering min_relevance could never help there.
    brain = make_brain()
    assert brain.remember("token bucket").empty is Empty.NO_MEMORIES
    # Before: on a store that never held a memory, a list filter was an ArrowNotImplementedError.
    for lists in ({"tags": ["x"]}, {"related_files": ["a.py"]}):
        assert brain.remember("token bucket", **lists).empty is Empty.NO_MEMORIES
    assert brain.forget_preview(query="token bucket", tags=["x"]) == []
    brain.memorize(*TOKEN_BUCKET)
    hidden = Memory(
        title="Zebra migrations hub",
        content="The zebra migrations hub moves every night.",
        scope=brain.scope,
        state=State.ARCHIVED,
    )
    brain.store.add([hidden], brain.embedder.embed_documents([hidden.searchable_text()]))

    found = brain.remember("token bucket")
    assert found.hits and found.empty is Empty.NONE
    late = brain.remember("token bucket", created_after="2099-01-01", min_relevance=0.0)
    assert (late.hits, late.empty) == ([], Empty.FILTERS)
    assert "meets the filters" in format_recall(late) and "min_relevance" not in format_recall(late)
    assert brain.remember("token bucket", tags=["nope"]).empty is Empty.FILTERS
    archived = brain.remember("zebra migrations hub")
    assert (archived.hits, archived.empty) == ([], Empty.ARCHIVED)
    assert "only archived ones match. `--include-archived`" in format_recall(archived)
    # The MCP tool has no such argument: it names the command that has.
    over_mcp = format_recall(archived, ARCHIVED_MCP)
    assert "`octobrain memory remember --include-archived` finds them" in over_mcp
    wide = brain.remember("zebra migrations hub", include_archived=True)
    assert [h.memory.id for h in wide.hits] == [hidden.id]
    missed = brain.remember("chocolate cake recipe with frosting", include_archived=True)
    assert (missed.hits, missed.empty) == ([], Empty.THRESHOLD)
    assert "a lower min_relevance" in format_recall(missed)
    assert recall_to_dict(missed)["empty"] == "min_relevance"
    # A scope holding archived memories only, none relevant: not "none are stored".
    alone = make_brain(scope="github.com/acme/archive")
    alone.store.add([dataclasses.replace(hidden, id=str(uuid.uuid4()), scope=alone.scope)],
                    alone.embedder.embed_documents([hidden.searchable_text()]))  # fmt: skip
    assert alone.remember("chocolate cake recipe with frosting").empty is Empty.THRESHOLD


def test_superseded_memory_sinks_but_stays_retrievable(make_brain: MakeBrain) -> None:
    brain = make_brain()
    old, _ = brain.memorize(
        "Deploy with Jenkins", "Deployments run through the Jenkins pipeline job."
    )
    new, _ = brain.memorize(
        "Deploy with GitHub Actions",
        "Deployments run through the GitHub Actions pipeline, replacing Jenkins.",
        related_to=[{"target_id": old.id, "relationship_type": "supersedes"}],
    )
    hits = brain.remember(
        "how do deployments run through the Jenkins pipeline", min_relevance=0.0
    ).hits
    order = [h.memory.id for h in hits]
    assert order.index(new.id) < order.index(old.id)
    assert hits[order.index(old.id)].superseded_by == [new.id]
    assert "superseded" in hits[order.index(old.id)].why


def test_neighbours_carry_type_and_direction(make_brain: MakeBrain) -> None:
    brain = make_brain()
    goal, _ = brain.memorize(
        "Goal: cut API latency", "Bring p95 API latency under 200 ms.", memory_type="goal"
    )
    step, _ = brain.memorize(
        *TOKEN_BUCKET, related_to=[{"target_id": goal.id, "relationship_type": "achieves"}]
    )
    recall = brain.remember("token bucket burst", limit=1)
    assert [h.memory.id for h in recall.hits] == [step.id]
    (n,) = recall.neighbours
    assert (n.memory.id, n.relationship_type.value, n.outgoing, n.via) == (
        goal.id,
        "achieves",
        True,
        step.id,
    )


def test_links_made_after_a_search_count_in_the_next_one(make_brain: MakeBrain) -> None:
    # Edge lookups keep the last one's rows: a newer table must be read again.
    brain = make_brain()
    goal, _ = brain.memorize(
        "Goal: cut API latency", "Bring p95 API latency under 200 ms.", memory_type="goal"
    )
    step, _ = brain.memorize(*TOKEN_BUCKET)
    old, _ = brain.memorize("Rate limiting by token bucket", "An older token bucket note.")
    db, _ = brain.memorize(*POSTGRES)
    brain.relate(db.id, goal.id)  # (an edge already there: lookups have rows to keep)
    assert brain.remember("token bucket burst", limit=1).neighbours == []
    first = brain.remember("token bucket", min_relevance=0.0).hits
    assert {h.memory.id for h in first} >= {step.id, old.id}
    assert all(h.superseded_by == [] for h in first)
    writer = make_brain()  # as another process: this brain catches up with its edges
    writer.relate(step.id, goal.id, "achieves")
    writer.relate(step.id, old.id, "supersedes")
    again = brain.remember("token bucket burst", limit=1)
    assert [h.memory.id for h in again.hits] == [step.id]
    shown = {(n.memory.id, n.relationship_type.value, n.via) for n in again.neighbours}
    assert shown == {(goal.id, "achieves", step.id), (old.id, "supersedes", step.id)}
    by_id = {h.memory.id: h for h in brain.remember("token bucket", min_relevance=0.0).hits}
    assert by_id[old.id].superseded_by == [step.id]


def test_access_counts_only_returned_results_and_persist(make_brain: MakeBrain) -> None:
    brain = make_brain()
    hit, _ = brain.memorize(*TOKEN_BUCKET)
    miss, _ = brain.memorize(*POSTGRES)
    brain.remember("token bucket", limit=1)
    brain.remember("token bucket", limit=1)  # within the window: still one access
    brain.recent()
    brain.stats()
    # remember only queues the bump; a background commit counts it within about a second.
    deadline = time.monotonic() + 30
    while make_brain().get(hit.id).access_count == 0:
        assert time.monotonic() < deadline, "the queued access was never committed"
        time.sleep(0.1)
    brain.remember("token bucket", limit=1)  # the mirror heard of the commit: not due again
    brain.flush()
    fresh = make_brain()
    assert fresh.get(hit.id).access_count == 1
    assert fresh.get(miss.id).access_count == 0
    assert brain.retriever.corpus.due_for_access([hit.id], utcnow(), ACCESS_WINDOW) == []


def test_access_is_counted_when_a_cli_remember_returns(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
    }
    env.pop("OCTOBRAIN_CONFIG_PATH", None)

    def cli(*args: str) -> str:
        argv = [sys.executable, "-m", "octobrain", "memory", "--scope", "github.com/acme/x"]
        done = subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    mid = json.loads(cli("memorize", "-t", "Backups", "-c", TOKEN_BUCKET[1], "--format", "json"))
    cli("remember", "token bucket")
    assert json.loads(cli("get", mid["id"], "--format", "json"))["access_count"] == 1


def test_the_exit_flush_waits_for_a_commit_the_background_thread_is_making(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process's exit flush found nothing queued while the background thread was committing
    # the bumps it had taken, and returned: the process then ended (`exit_now`) with that
    # commit half made, and the accesses were never counted.
    import threading

    from octobrain.memory.access import AccessQueue
    from octobrain.store import MemoryStore

    brain = make_brain()
    hit, _ = brain.memorize(*TOKEN_BUCKET)
    committing, release = threading.Event(), threading.Event()
    real = MemoryStore.record_access

    def slow(self: MemoryStore, *args: Any, **kwargs: Any) -> int:
        committing.set()
        assert release.wait(30)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MemoryStore, "record_access", slow)
    queue = AccessQueue(brain.store, ACCESS_WINDOW)
    queue.add([hit.id], utcnow())
    assert committing.wait(30)  # the background thread took the bump and is committing it
    flushed = threading.Thread(target=queue.flush)
    flushed.start()
    flushed.join(0.5)
    assert flushed.is_alive()  # the exit flush waits for it
    release.set()
    flushed.join(30)
    assert make_brain().get(hit.id).access_count == 1


def test_filters(make_brain: MakeBrain) -> None:
    brain = make_brain()
    decision, _ = brain.memorize(*TOKEN_BUCKET, memory_type="decision", tags=["api"])
    brain.memorize(
        "Rate limiting bug",
        "Rate limiting counted retries twice; fixed in the gateway.",
        memory_type="bug",
    )
    only = brain.remember("rate limiting", memory_types=["decision"], min_relevance=0.0)
    assert [h.memory.id for h in only.hits] == [decision.id]
    assert [
        h.memory.id for h in brain.remember("rate limiting", tags=["api"], min_relevance=0.0).hits
    ] == [decision.id]
    today = decision.created_at.date().isoformat()
    assert len(brain.remember("rate limiting", created_before=today, min_relevance=0.0).hits) == 2
    tomorrow = (decision.created_at + timedelta(days=1)).date().isoformat()
    assert brain.remember("rate limiting", created_after=tomorrow, min_relevance=0.0).hits == []
    with pytest.raises(InvalidInput, match="^created_after: must be ISO-8601"):
        brain.remember("rate limiting", created_after="last tuesday")
    # RFC 3339's lowercase `t` and `z` (what some tools write) are the same time: they were
    # refused as not ISO-8601.
    lower = f"{tomorrow}t00:00:00z"
    assert brain.remember("rate limiting", created_after=lower, min_relevance=0.0).hits == []
    # Python reads any number of fraction digits: a time is refused past 64 characters, and
    # the error names its length rather than echoing it back.
    padded = "2026-05-01T12:00:00." + "0" * 1_000_000
    with pytest.raises(InvalidInput, match=r"ISO-8601 .*, got 1,000,020 characters$"):
        brain.remember("rate limiting", created_before=padded)
    # The calendar's last day is a bound like any other; a time UTC has no day for is refused.
    last = brain.remember("rate limiting", created_before="9999-12-31", min_relevance=0.0)
    assert len(last.hits) == 2
    with pytest.raises(InvalidInput, match="^created_after: must fall within years 1–9999"):
        brain.remember("rate limiting", created_after="0001-01-01T00:00:00+14:00")
    with pytest.raises(InvalidInput, match=r"^memory_types\[0\]: unknown memory type"):
        brain.remember("rate limiting", memory_types=["decisions!"])
    # A filter of blanks would match everything; it is refused rather than ignored.
    with pytest.raises(InvalidInput, match="^tags: must hold at least one non-blank"):
        brain.remember("rate limiting", tags=["  ", ""])
    with pytest.raises(InvalidInput, match="^related_files: must hold at least one non-blank"):
        brain.remember("rate limiting", related_files=[" "])


def test_multi_query_fuses(make_brain: MakeBrain) -> None:
    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    b, _ = brain.memorize(*POSTGRES)
    hits = brain.remember(["token bucket", "postgres database"], min_relevance=0.0).hits
    assert {h.memory.id for h in hits[:2]} == {a.id, b.id}
    assert "2 queries" in hits[0].why
    with pytest.raises(InvalidInput, match="^query: give 1–5 query strings"):
        brain.remember(["one query", "two"] * 3)


def test_two_questions_at_once_each_get_their_best_first(make_brain: MakeBrain) -> None:
    # Before: rankings were merged by rank (RRF), so notes each question found a little of
    # (two words of each here) came before both questions' own answers.
    brain = make_brain()
    for i in range(40):
        brain.memorize(f"Unrelated note {i}", f"Lunch menu item {i}: soup, bread and salad {i}.")
    for i in range(3):
        brain.memorize(f"Team upload postgres {i}", f"Upload team postgres read notes, part {i}.")
    quota, _ = brain.memorize("Upload quota policy", "The upload quota is 5 GB per team.")
    replicas, _ = brain.memorize("Replica count", "Postgres runs three read replicas.")
    questions = ["upload quota per team", "postgres read replicas"]
    hits = brain.remember(questions, min_relevance=0.0, limit=5).hits
    assert {h.memory.id for h in hits[:2]} == {quota.id, replicas.id}
    assert hits[0].why.startswith("2 queries (scores summed); ")


def test_forget_needs_confirm_and_takes_edges(make_brain: MakeBrain) -> None:
    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    # One link named three times, twice by an id prefix: one edge.
    twice = [{"target_id": a.id}, {"target_id": a.id[:8]}, {"target_id": a.id[:13]}]
    b, edges = brain.memorize(*POSTGRES, related_to=twice)
    assert [(e.target_id, e.relationship_type.value) for e in edges] == [(a.id, "related_to")]
    with pytest.raises(InvalidInput, match="^confirm: must be true"):
        brain.forget([a.id], confirm=False)
    assert brain.forget_preview("token bucket") == [brain.get(a.id)]
    assert brain.forget([a.id], confirm=True).deleted == 1
    assert brain.store.relationships_of([b.id]) == []
    assert brain.remember("token bucket", min_relevance=0.0).hits[0].memory.id == b.id


def test_export_import_round_trip_is_lossless(make_brain: MakeBrain, tmp_path: Path) -> None:
    brain = make_brain()
    a, _ = brain.memorize(
        *TOKEN_BUCKET, tags=["api"], related_files=["gw/limit.py"], importance=0.7
    )
    brain.memorize(
        *POSTGRES, global_=True, source="user_confirmed", related_to=[{"target_id": a.id}]
    )
    brain.remember("token bucket")  # an access, so the counts differ from defaults
    out = io.StringIO()
    assert export_jsonl(brain, out, embeddings=True).count == 2
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    report = import_jsonl(other, out.getvalue().splitlines())
    assert (report.imported, report.relationships, report.reembedded) == (2, 1, 0)
    for mem in (
        brain.get(a.id),
        *[h.memory for h in brain.remember("postgres", min_relevance=0.0).hits],
    ):
        assert other.get(mem.id) == mem
    again = import_jsonl(other, out.getvalue().splitlines())
    assert (again.imported, again.skipped_existing, again.relationships) == (0, 2, 0)
    with pytest.raises(InvalidInput, match=r"^line 2\.title: must be 5–200 bytes"):
        bad = json.dumps({"kind": "memory", "id": a.id, "scope": "", "title": "x"})
        import_jsonl(other, [out.getvalue().splitlines()[0], bad])
    # A time UTC has no day for would be stored, then break every read that shows it.
    header, row = (json.loads(line) for line in out.getvalue().splitlines()[:2])
    row.update(created_at="9999-12-31T23:30:00-05:00")
    with pytest.raises(InvalidInput, match=r"^line 2\.created_at: must fall within years 1–9999"):
        import_jsonl(other, [json.dumps(header), json.dumps(row)])


def test_export_writes_a_damaged_vector_as_none_and_says_so(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # Bytes garbled on disk read back as `inf` / `nan`: the export wrote them bare, which is no
    # JSON, said it succeeded, and the backup could not be imported ("line 60: is not JSON").
    import pyarrow as pa

    brain = make_brain()
    hurt, _ = brain.memorize(*TOKEN_BUCKET)
    brain.memorize(*POSTGRES)
    row = brain.store.scan(f"id = '{hurt.id}'")[0]
    row["embedding"] = [float("inf")] * brain.embedder.dim
    table = pa.Table.from_pylist([row], schema=brain.store.memories.schema)
    brain.store.memories.merge_insert("id").when_matched_update_all().execute(table)
    out = io.StringIO()
    done = export_jsonl(make_brain(), out, embeddings=True)
    assert (done.count, done.vectors_left_out) == (2, [hurt.id])
    assert done.warning().startswith("warning: 1 memory's stored vector is damaged")
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert ["embedding" in r for r in rows[1:3]] == [r["id"] != hurt.id for r in rows[1:3]]
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    assert import_jsonl(other, out.getvalue().splitlines()).imported == 2
    assert other.remember("token bucket").hits[0].memory.id == hurt.id


def test_an_import_of_a_backup_cut_short_is_refused_whole(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # A backup cut after 999 of its 3,005 memories imported "999 memories", exit 0; one cut
    # in its edges or journal lost them without a word.
    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    brain.memorize(*POSTGRES, related_to=[{"target_id": a.id}])
    out = io.StringIO()
    export_jsonl(brain, out)
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == [
        "header", "memory", "memory", "relationship", "end"
    ]  # fmt: skip
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    cut = "it was cut short or edited; nothing was imported"
    for part in (lines[:2], lines[:3], lines[:4]):
        with pytest.raises(InvalidInput, match=rf"^file: ends without its end line: {cut}"):
            import_jsonl(other, part)
    no_edge = [*lines[:3], lines[4]]
    with pytest.raises(InvalidInput, match="^file: holds 0 relationship lines where it counts 1"):
        import_jsonl(other, no_edge)
    with pytest.raises(InvalidInput, match="^line 6: follows the file's end line"):
        import_jsonl(other, [*lines, lines[1]])
    odd_end = json.dumps({**json.loads(lines[4]), "memory": "2"})
    with pytest.raises(InvalidInput, match=r"^line 5\.memory: must be a whole number >= 0"):
        import_jsonl(other, [*lines[:4], odd_end])
    # A version 1 file (before the end line) is read, its memories checked by the header's count.
    old = json.dumps({**json.loads(lines[0]), "version": 1})
    with pytest.raises(InvalidInput, match="^file: holds 1 memory line where it counts 2"):
        import_jsonl(other, [old, lines[1]])
    assert other.store.count() == 0
    assert import_jsonl(other, [old, *lines[1:4]]).imported == 2


def _one_row_export(brain: Brain) -> tuple[dict[str, Any], dict[str, Any]]:
    brain.memorize(*TOKEN_BUCKET, tags=["api"])
    out = io.StringIO()
    export_jsonl(brain, out, embeddings=True)
    header, row = (json.loads(line) for line in out.getvalue().splitlines()[:2])
    return header, row


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"embedding": [1e300] * 64}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": [0.0] * 64}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": ["a"] * 64}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": [True] * 64}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": 7}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": [0.5] * 5}, r"^line 2\.embedding: must hold the header's dim, 64 numbers"),
        ({"access_count": 2**63}, r"^line 2\.access_count: must be an integer in \[0, "),
        ({"tags": 5}, r"^line 2\.tags: must be a list of strings, got integer"),
        ({"related_files": {"a": 1}}, r"^line 2\.related_files: must be a list of strings"),
        ({"role": {"x": 1}}, r"^line 2\.role: must be a string"),
        ({"role": "r" * 300}, r"^line 2\.role: must be 0–256 bytes"),
        ({"git_commit": "ab\x00c"}, r"^line 2\.git_commit: must not contain NUL"),
        ({"context": "ok\x00"}, r"^line 2\.context: must not contain NUL"),
        ({"context": "token ghp_" + "a1B2" * 9}, r"^line 2\.context: .*secret"),
        # Stored, a row dated 9999 headed `memory recent` until then; ingest refuses such times.
        (
            {"created_at": "9999-01-01T00:00:00+00:00"},
            r"^line 2\.created_at: must not be more than a day ahead of now, got 9999-01-01",
        ),
        (
            {"last_accessed": "9999-01-01T00:00:00Z"},
            r"^line 2\.last_accessed: must not be more than a day ahead of now",
        ),
        (
            {"updated_at": "2999-06-01T00:00:00Z"},
            r"^line 2\.updated_at: must not be more than a day ahead of now",
        ),
    ],
)
def test_an_import_row_is_refused_for_what_it_holds_and_nothing_is_written(
    make_brain: MakeBrain, tmp_path: Path, change: dict[str, Any], rule: str
) -> None:
    # Each of these was stored, or failed half-way with a traceback: an overflowing vector then
    # broke every search of its scope, an access count past int64 failed after 256 rows.
    header, row = _one_row_export(make_brain())
    other = Brain("import/target", config=Config(), embedder=make_brain().embedder,
                  uri=tmp_path / "other")  # fmt: skip
    with pytest.raises(InvalidInput, match=rule):
        import_jsonl(other, [json.dumps(header), json.dumps({**row, **change})])
    assert other.store.count() == 0


def test_an_import_of_many_batches_is_checked_whole_before_any_is_written(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # The memories wait in a spool file between the check and the write, batch by batch.
    header, row = _one_row_export(make_brain())
    rows = [
        {**row, "id": str(uuid.UUID(int=i + 1)), "title": f"Imported note {i}"}
        for i in range(2 * BATCH + 5)
    ]
    body = [json.dumps(header), *map(json.dumps, rows)]
    lines = ended(body)
    other = Brain(header["scope"], config=Config(), embedder=make_brain().embedder,
                  uri=tmp_path / "other")  # fmt: skip
    bad = json.dumps({**rows[0], "id": str(uuid.UUID(int=10**6)), "importance": 2})
    with pytest.raises(InvalidInput, match=rf"^line {len(body) + 1}\.importance"):
        import_jsonl(other, ended([*body, bad]))
    assert other.store.count() == 0
    report = import_jsonl(other, ended(body[: BATCH + 1]))  # a first part of the file
    assert (report.imported, report.skipped_existing, report.reembedded) == (BATCH, 0, 0)
    report = import_jsonl(other, lines)  # the whole: the first part is skipped
    assert (report.imported, report.skipped_existing) == (BATCH + 5, BATCH)
    assert other.store.count() == 2 * BATCH + 5
    assert other.get(rows[-1]["id"]).title == f"Imported note {2 * BATCH + 4}"
    # Re-embedding streams the rows through the new version, batch by batch.
    moved = Brain(other.scope, config=Config(), embedder=get_embedder("hash:32"),
                  uri=tmp_path / "other")  # fmt: skip
    assert reembed(moved) == 2 * BATCH + 5
    assert moved.store.count() == 2 * BATCH + 5
    assert moved.get(rows[7]["id"]).title == "Imported note 7"


def test_an_exported_vector_reads_back_to_the_stored_one_bit_for_bit(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    brain = make_brain()
    for title, content in (TOKEN_BUCKET, POSTGRES):
        brain.memorize(title, content)
    out = io.StringIO()
    export_jsonl(brain, out, embeddings=True)
    exported = [json.loads(line) for line in out.getvalue().splitlines()[1:3]]
    stored = {
        r["id"]: r["embedding"] for r in brain.store.scan("true", columns=["id", "embedding"])
    }
    for row in exported:
        assert np.array_equal(np.asarray(row["embedding"], dtype=np.float32), stored[row["id"]])
    assert [r["title"] for r in exported] == [TOKEN_BUCKET[0], POSTGRES[0]]  # oldest first
    # Imported, each is stored as it was: not scaled to unit length a second time.
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    import_jsonl(other, out.getvalue().splitlines())
    for row in other.store.scan("true", columns=["id", "embedding"]):
        assert np.array_equal(row["embedding"], stored[row["id"]])


def test_an_import_line_too_long_to_hold_is_refused_by_its_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(import_check, "LINE_BYTES", 64)
    lines = import_check.file_lines(io.BytesIO(b"{}\n" + b"x" * 63 + b"\n" + b"y" * 65 + b"\n"))
    assert next(lines) == b"{}\n" and next(lines) == b"x" * 63 + b"\n"
    with pytest.raises(InvalidInput, match=r"^line 3: must be at most 64 bytes long"):
        next(lines)


@pytest.mark.parametrize("end", [b"\r", b"\r\n"])
def test_an_import_file_with_other_line_ends_imports_and_names_lines(
    make_brain: MakeBrain, tmp_path: Path, end: bytes
) -> None:
    # An export saved with lone CRs (old Mac) was one line: "line 1: is not JSON".
    brain = make_brain()
    header, row = _one_row_export(brain)
    data = end.join(line.encode() for line in ended([json.dumps(header), json.dumps(row)])) + end
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    with pytest.raises(InvalidInput, match=r"^line 4: is not JSON"):
        oops = data + b"{oops" + end  # after the end line, which it is not
        import_jsonl(other, import_check.file_lines(io.BytesIO(oops)))
    assert import_jsonl(other, import_check.file_lines(io.BytesIO(data))).imported == 1


def test_an_import_file_that_is_not_plain_json_lines_is_named_by_line(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    brain = make_brain()
    header, row = _one_row_export(brain)
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    first = json.dumps(header).encode()
    cases = {
        b'{"kind": "memory", "title": "caf\xe9"}': r"^line 2: is not UTF-8 text",
        b"[" * 100_000 + b"]" * 100_000: r"^line 2: is nested too deeply",
        b'{"kind": "memory", "access_count": ' + b"9" * 5000 + b"}": r"^line 2: holds a number",
    }
    for bad, rule in cases.items():
        with pytest.raises(InvalidInput, match=rule):
            import_jsonl(other, [first, bad])
    # One id twice in a file was stored as two rows of one id (and edited as one).
    twice = ended([json.dumps(header), json.dumps(row), json.dumps({**row, "title": "Other"})])
    with pytest.raises(InvalidInput, match=r"^line 3\.id: repeats the memory id of line 2"):
        import_jsonl(other, twice)
    assert other.store.count() == 0
    # A stored vector of another length than one is kept at unit length.
    longer = {**row, "embedding": [3.0 * x for x in row["embedding"]]}
    assert import_jsonl(other, ended([json.dumps(header), json.dumps(longer)])).reembedded == 0
    assert other.remember(TOKEN_BUCKET[0], min_relevance=0.0).hits[0].cosine == pytest.approx(
        brain.remember(TOKEN_BUCKET[0], min_relevance=0.0).hits[0].cosine, abs=1e-5
    )


def test_model_change_is_refused_until_reembed(make_brain: MakeBrain) -> None:
    old = make_brain(model="hash:32")
    mem, _ = old.memorize(*TOKEN_BUCKET)
    new = make_brain(model="hash:64")
    with pytest.raises(ModelMismatch, match="octobrain memory reembed"):
        new.remember("token bucket")
    assert reembed(new) == 1
    hits = new.remember("token bucket", record_access=False).hits
    assert hits[0].memory == old.get(mem.id)
    with pytest.raises(ModelMismatch):
        make_brain(model="hash:32").get(mem.id)


WRITER = textwrap.dedent(
    """
    import sys
    from octobrain.memory.brain import Brain
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder

    uri, worker = sys.argv[1], sys.argv[2]
    brain = Brain("github.com/acme/api", config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    for i in range(200):
        title, content = f"worker {worker} note {i}", f"content from worker {worker}, item {i}"
        mem, _ = brain.memorize(title, content)
        print(mem.id, flush=True)  # acknowledged: memorize returned
    seen = brain.remember(f"worker {worker} note 7", min_relevance=0.0, limit=50)
    print("SEEN", len(seen.hits), flush=True)
    """
)


def test_three_processes_lose_nothing_and_duplicate_nothing(tmp_path: Path) -> None:
    uri = tmp_path / "db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(uri), str(w)], stdout=subprocess.PIPE, text=True
        )
        for w in range(3)
    ]
    acknowledged = []
    for proc in procs:
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0
        lines = out.split("\n")
        acknowledged += [line for line in lines if line and not line.startswith("SEEN")]
    brain = Brain("github.com/acme/api", config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    rows = [r["id"] for r in brain.store.scan("true", columns=["id"])]
    assert len(acknowledged) == 600
    assert sorted(rows) == sorted(acknowledged) and len(set(rows)) == 600
    # Every process sees the others' writes: a fresh search covers all 600.
    assert brain.stats()["total"] == 600
    hits = brain.remember(
        ["worker 0 note 5", "worker 1 note 5", "worker 2 note 5"], min_relevance=0.0, limit=50
    )
    assert {h.memory.title.split()[1] for h in hits.hits} == {"0", "1", "2"}


def test_lancedb_vector_leg_agrees_with_the_exact_mirror(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain = make_brain()
    for i in range(30):
        brain.memorize(
            f"Note number {i} about caching", f"Cache layer {i} keeps entries for {i} seconds."
        )
    query = {"query": "cache entries seconds", "limit": 10, "record_access": False}
    exact = brain.remember(**query).hits  # type: ignore[arg-type]
    monkeypatch.setattr("octobrain.memory.ann.ANN_EXACT_BELOW", 0)  # force the LanceDB path
    lance = Config(search=SearchConfig(ann_min_rows=1))
    via_lance = Brain(brain.scope, config=lance, embedder=brain.embedder, uri=brain.uri)
    hits = via_lance.remember(**query).hits  # type: ignore[arg-type]
    assert {h.memory.id for h in hits} == {h.memory.id for h in exact}
    # LanceDB proposes the candidates; their cosines are re-scored exactly from the mirror.
    assert [h.score for h in hits] == pytest.approx([h.score for h in exact], abs=1e-5)


def test_a_second_writer_is_seen_between_own_accesses(make_brain: MakeBrain) -> None:
    reader, writer = make_brain(), make_brain()  # two handles on one store, as two processes
    first, _ = reader.memorize(*TOKEN_BUCKET)
    assert [h.memory.id for h in reader.remember("token bucket").hits] == [first.id]
    later, _ = writer.memorize(*POSTGRES)
    reader.remember("token bucket")  # its own access commit must not hide the writer's commit
    assert [h.memory.id for h in reader.remember("postgres database").hits] == [later.id]
    writer.forget([first.id], confirm=True)
    assert reader.remember("token bucket").hits == []


def test_history_undoes_a_bulk_forget_and_a_restore_can_be_undone(make_brain: MakeBrain) -> None:
    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    b, _ = brain.memorize(*POSTGRES, related_to=[{"target_id": a.id}])
    before = brain.history(1)[0]
    assert before.rows == 2
    gone = [
        m.id for m in brain.forget_preview("token bucket rate limiting postgres", min_relevance=0.0)
    ]
    assert brain.forget(gone, confirm=True).deleted == 2
    assert brain.remember("token bucket", min_relevance=0.0).hits == []
    with pytest.raises(InvalidInput, match="^confirm: must be true"):
        brain.restore(before.version, confirm=False)
    with pytest.raises(InvalidInput, match="^version: no version 999999 is kept"):
        brain.restore(999999, confirm=True)
    after_forget = brain.history(1)[0]
    restored = brain.restore(before.version, confirm=True)
    assert restored.rows == 2 and restored.version > after_forget.version
    fresh = make_brain()  # another process's view
    assert fresh.get(a.id) == brain.get(a.id) and fresh.get(b.id).title == POSTGRES[0]
    assert [h.memory.id for h in fresh.remember("token bucket").hits] == [a.id]
    assert {(r.source_id, r.target_id) for r in fresh.store.relationships_of([a.id])} == {
        (b.id, a.id)
    }
    brain.restore(after_forget.version, confirm=True)  # undo the undo
    assert make_brain().remember("token bucket", min_relevance=0.0).hits == []


def test_a_link_made_or_removed_alone_is_a_version_restore_goes_back_to(
    make_brain: MakeBrain,
) -> None:
    # `relate` and `unrelate` wrote edges only: no memories version, so `history` did not list
    # them and a restore took the edges back to the next version, "now": a link removed with
    # `unrelate` could not be got back.
    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    b, _ = brain.memorize(*POSTGRES)
    before = brain.history(1)[0]
    brain.relate(a.id, b.id, "depends_on", description="the limits live in Postgres")
    linked = brain.history(1)[0]
    brain.unrelate(a.id, b.id, "depends_on")
    unlinked = brain.history(1)[0]
    assert before.version < linked.version < unlinked.version
    assert linked.note == f"links {a.id[:8]} → {b.id[:8]} (depends_on)"
    assert unlinked.note == f"unlinks {a.id[:8]} → {b.id[:8]} (depends_on)"
    brain.restore(linked.version, confirm=True)
    [edge] = make_brain().store.relationships_of([a.id])
    assert (edge.target_id, edge.description) == (b.id, "the limits live in Postgres")
    brain.restore(before.version, confirm=True)
    assert make_brain().store.relationships_of([a.id]) == []
    assert make_brain().get(a.id) == brain.get(a.id)


def test_a_restore_cut_short_is_refused_until_run_again(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its tables go back one commit each: cut short after memories, the edges still name a row
    # that is gone. Every open refuses the store until the restore is run again.
    from lancedb.table import LanceTable

    from octobrain.store.doctor import diagnose

    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    before = brain.history(1)[0]
    brain.memorize(*POSTGRES, related_to=[{"target_id": a.id}])
    real, calls = LanceTable.restore, []

    def cut_short(self: LanceTable, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:  # Ctrl-C once memories is back, before relationships is
            raise KeyboardInterrupt
        real(self, *args, **kwargs)

    monkeypatch.setattr(LanceTable, "restore", cut_short)
    with pytest.raises(KeyboardInterrupt):
        brain.restore(before.version, confirm=True)
    monkeypatch.setattr(LanceTable, "restore", real)
    fresh = make_brain()  # the next process
    with pytest.raises(StorageError, match=rf"`memory restore {before.version}` was cut short"):
        fresh.recent()
    [problem] = diagnose(fresh.store.location).problems
    assert f"memory restore {before.version} --yes" in problem.repair
    make_brain().restore(before.version, confirm=True)
    done = make_brain()
    assert [m.id for m in done.recent()] == [a.id] and done.store.relationships_of([a.id]) == []
    assert diagnose(done.store.location).ok


def test_a_restore_to_before_the_journal_existed_empties_it(make_brain: MakeBrain) -> None:
    brain = make_brain()
    goal, _ = brain.memorize(
        "Goal: faster API", "Bring p95 latency under 200 ms.", memory_type="goal"
    )
    before = brain.history(1)[0]
    brain.memorize(
        *TOKEN_BUCKET, related_to=[{"target_id": goal.id, "relationship_type": "achieves"}]
    )
    brain.memorize(
        "Latency goal reached",
        "p95 is 170 ms now that rate limiting sheds abusive clients.",
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    out = io.StringIO()
    export_jsonl(brain, out)
    assert '"kind": "consolidation"' in out.getvalue()  # the journal, made after `before`
    brain.restore(before.version, confirm=True)
    out = io.StringIO()
    export_jsonl(make_brain(), out)
    assert '"kind": "consolidation"' not in out.getvalue()
    assert [m.id for m in make_brain().recent()] == [goal.id]


def test_an_imported_store_can_still_undo_its_consolidations(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    brain = make_brain()
    goal, _ = brain.memorize(
        "Goal: faster API", "Bring p95 latency under 200 ms.", memory_type="goal"
    )
    finding, _ = brain.memorize(
        *TOKEN_BUCKET,
        importance=0.7,
        related_to=[{"target_id": goal.id, "relationship_type": "achieves"}],
    )
    before = brain.get(finding.id)
    closing, _ = brain.memorize(
        "Latency goal reached",
        "p95 is 170 ms now that rate limiting sheds abusive clients.",
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    assert brain.get(finding.id).state is State.CONSOLIDATED
    out = io.StringIO()
    export_jsonl(brain, out)
    assert '"kind": "consolidation"' in out.getvalue()
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "copy")
    import_jsonl(other, out.getvalue().splitlines())
    assert other.get(finding.id) == brain.get(finding.id)
    other.unconsolidate(closing.id)
    restored = other.get(finding.id)
    assert (restored.state, restored.importance) == (before.state, before.importance)


def _closed_goal_export(brain: Brain) -> list[dict[str, Any]]:
    """The lines of an export holding a goal closed by a note (a consolidation record)."""
    goal, _ = brain.memorize("Goal: faster API", "Bring p95 latency under 200 ms.",
                             memory_type="goal")  # fmt: skip
    brain.memorize(
        *TOKEN_BUCKET, related_to=[{"target_id": goal.id, "relationship_type": "achieves"}]
    )
    brain.memorize("Latency goal reached", "p95 is 170 ms now.",
                   related_to=[{"target_id": goal.id, "relationship_type": "closes"}])  # fmt: skip
    out = io.StringIO()
    export_jsonl(brain, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"member_prev_importance": ["x"]}, r"record\.member_prev_importance\[0\]: must be a numb"),
        ({"member_prev_state": ["bogus"]}, r"record\.member_prev_state\[0\]: must be working,"),
        (
            {"member_prev_pre": [None, None]},
            r"record\.member_prev_pre: must be a list of 1, one per",
        ),
        ({"kind": None}, r"record\.kind: must be one of sleep, goal, got null"),
        ({"status": "bogus"}, r"record\.status: must be one of pending, done, reverting, reverted"),
        ({"parent_id": {}}, r"record\.parent_id: must be a non-empty string"),
        ({"scope": 10**30}, r"record\.scope: must be a string"),
        ({"parent_synthesised": 1}, r"record\.parent_synthesised: must be true or false"),
        ({"edge_ids": ["e"]}, r"record\.edge_ids\[0\]: must be a memory id"),
        ({"description": "d" * 20_000}, r"record\.description: must be 0–10000 bytes"),
        ({"surprise": 1}, r"record\.surprise: unknown field of a consolidation record"),
    ],
)
def test_an_imported_consolidation_record_is_checked_field_by_field_before_any_write(
    make_brain: MakeBrain, tmp_path: Path, change: dict[str, Any], rule: str
) -> None:
    # Each was either stored as it came (and acted on by the next sleep pass) or failed with a
    # traceback after the file's memories had been written.
    lines = _closed_goal_export(make_brain())
    line, record = next((i + 1, o) for i, o in enumerate(lines) if o["kind"] == "consolidation")
    lines[line - 1] = {"kind": "consolidation", "record": {**record["record"], **change}}
    other = Brain("import/target", config=Config(), embedder=make_brain().embedder,
                  uri=tmp_path / "other")  # fmt: skip
    with pytest.raises(InvalidInput, match=rf"^line {line}\.{rule}"):
        import_jsonl(other, [json.dumps(o) for o in lines])
    assert other.store.count() == 0


def test_an_imported_record_cannot_reach_memories_or_edges_the_file_did_not_bring(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # A `reverting` record names a memory the store already held as its synthesised parent:
    # the next sleep pass, finishing the "undo", deleted that memory. An edge of the file
    # that took an existing edge's id was stored beside it, and the store no longer exported
    # to a file that imports.
    brain = make_brain()
    kept, _ = brain.memorize(*POSTGRES)
    other_end, _ = brain.memorize("Queue", "Billing events go through SQS FIFO.")
    existing = brain.relate(kept.id, other_end.id)
    source = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "src")
    lines = _closed_goal_export(source)
    record = next(o["record"] for o in lines if o["kind"] == "consolidation")
    forged = {**record, "id": str(uuid.uuid4()), "status": "reverting", "parent_id": kept.id,
              "parent_synthesised": True}  # fmt: skip
    edge = next(o for o in lines if o["kind"] == "relationship")
    lines += [{"kind": "consolidation", "record": forged}, {**edge, "id": existing.id}]
    report = import_jsonl(brain, ended([json.dumps(o) for o in lines]))
    assert (report.imported, report.consolidations, report.consolidations_not_brought) == (3, 1, 1)
    brain.sleep_consolidate()  # finishes or undoes what is left half-way
    assert brain.get(kept.id).content == POSTGRES[1]
    out = io.StringIO()
    export_jsonl(brain, out)
    assert out.getvalue().count(existing.id) == 1
    again = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "again")
    assert import_jsonl(again, out.getvalue().splitlines()).imported == brain.store.count()


def test_export_writes_every_edge_between_its_memories_however_many_batches_they_fill(
    make_brain: MakeBrain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "BATCH", 1)  # edges are read 16 at a time
    monkeypatch.setattr(import_check, "BATCH", 1)  # and spooled one at a time as imported
    brain = make_brain()
    mine = [brain.memorize(f"Decision number {i}", f"We chose option {i}.")[0] for i in range(8)]
    theirs, _ = make_brain("other/project").memorize(*POSTGRES)
    chain = [
        Relationship(a.id, b.id, RelationshipType.RELATED_TO, scope=brain.scope)
        for a in mine
        for b in mine
        if a is not b
    ]
    brain.store.add_relationships(
        [*chain, Relationship(mine[0].id, theirs.id, RelationshipType.RELATED_TO)]
    )
    out = io.StringIO()
    export_jsonl(brain, out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(r["id"] for r in rows if r["kind"] == "relationship") == sorted(
        r.id for r in chain
    )
    again = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "again")
    assert import_jsonl(again, out.getvalue().splitlines()).relationships == len(chain)


def test_an_imported_edge_never_joins_two_projects_and_one_not_stored_is_counted(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # A file listing another project's memory by its id (skipped: the store has it) joined it to
    # its own memory with an edge, which `relate` refuses; an edge whose end nobody holds was
    # dropped without a word.
    target = make_brain()
    theirs, _ = make_brain("other/project").memorize(*POSTGRES)
    source = Brain("import/source", config=Config(), embedder=target.embedder,
                   uri=tmp_path / "src")  # fmt: skip
    ours, _ = source.memorize(*TOKEN_BUCKET)
    shared, _ = source.memorize("Team convention", "Every service logs JSON.", global_=True,
                                related_to=[{"target_id": ours.id}])  # fmt: skip
    out = io.StringIO()
    export_jsonl(source, out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    edge = next(o for o in lines if o["kind"] == "relationship")
    lines += [
        {"kind": "memory", **memory_to_dict(theirs)},
        {**edge, "id": str(uuid.uuid4()), "source_id": ours.id, "target_id": theirs.id,
         "scope": "import/source"},
        {**edge, "id": str(uuid.uuid4()), "source_id": ours.id, "target_id": str(uuid.uuid4()),
         "scope": "import/source"},
    ]  # fmt: skip
    at = len(lines) - 3  # (the other project's row; the export's end line left out)
    with pytest.raises(InvalidInput, match=rf"^line {at}\.scope: is \"other/project\", where the"):
        import_jsonl(target, ended([json.dumps(o) for o in lines]))
    lines[0] = {k: v for k, v in lines[0].items() if k != "scope"}  # (a header naming none)
    report = import_jsonl(target, ended([json.dumps(o) for o in lines]))
    assert (report.imported, report.skipped_existing) == (2, 1)
    assert (report.relationships, report.relationships_not_stored) == (1, 2)
    assert [(r.source_id, r.target_id) for r in target.store.relationships_of([ours.id])] == [
        (shared.id, ours.id)
    ]
    assert target.store.relationships_of([theirs.id]) == []
    # A memory linked to itself, which `relate` refuses, was imported and shown by `graph`.
    loop = {**edge, "id": str(uuid.uuid4()), "source_id": ours.id, "target_id": ours.id}
    with pytest.raises(InvalidInput, match=r"^line \d+\.target_id: must differ from source_id$"):
        import_jsonl(target, ended([json.dumps(o) for o in [*lines, loop]]))


def test_an_import_whose_temporary_file_cannot_be_written_says_so_in_one_line(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    header, row = _one_row_export(brain)
    with open("/dev/full", "wb", buffering=0) as full, pytest.raises(StorageError) as caught:
        import_check.check_import(brain, ended([json.dumps(header), json.dumps(row)]), full)
    assert "cannot write its temporary file" in str(caught.value)
    assert "No space left on device" in str(caught.value) and "\n" not in str(caught.value)


def test_trust_tier_reorders_near_ties_but_never_outranks_a_clearly_better_match(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    topics = ["roadmap", "hiring", "offsite", "budget", "design review", "retro", "onboarding"]
    for i in range(42):  # enough unrelated memories that the fused scores spread out
        topic = topics[i % len(topics)]
        brain.memorize(f"Team note {i} on {topic}", f"Notes {i}: we talked about {topic} plans.")
    exact, _ = brain.memorize(
        "Connection pool sizing",
        "The postgres connection pool size is 20 per service instance, set in pgbouncer.",
    )  # agent_inferred: trust multiplier 0.9
    vague, _ = brain.memorize(
        "Database choice",
        "Postgres is our system of record for orders and billing data.",
        source="user_confirmed",
    )
    hits = brain.remember("postgres connection pool size", limit=3, record_access=False).hits
    assert [h.memory.id for h in hits[:2]] == [exact.id, vague.id]


def test_a_memory_forgotten_while_a_link_to_it_is_embedded_gets_no_edge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # memorize (and ingest) check their link ends, then embed, then write: a `forget` of
    # another process in between left an acknowledged edge to a deleted memory, for good.
    from octobrain.memory import ingest as ingest_module
    from octobrain.memory.conversation import parse_chat

    config = Config()
    scope = "github.com/acme/api"
    brain = Brain(scope, config=config, embedder=get_embedder("hash:64"), uri=tmp_path)
    other = Brain(scope, config=config, embedder=get_embedder("hash:64"), uri=tmp_path)
    target, _ = brain.memorize("Target", "The memory another process forgets.")
    real = brain.embedder.embed_documents
    pending: list[str] = []

    def embed_then_forget(texts: list[str]) -> Any:
        while pending:
            other.forget([pending.pop()], confirm=True)
        return real(texts)

    monkeypatch.setattr(brain.embedder, "embed_documents", embed_then_forget)
    pending.append(target.id)
    with pytest.raises(InvalidInput, match="^related_to: memory .* was deleted while this write"):
        brain.memorize("Linker", "Links to the target.", related_to=[{"target_id": target.id}])
    assert [m.title for m in brain.recent()] == []

    # The last turn of a first batch forgotten while the second batch is embedded.
    monkeypatch.setattr(ingest_module, "BATCH", 2)
    turns = [{"speaker": "user", "text": f"Turn number {i} of the talk."} for i in range(4)]
    calls: list[int] = []
    first_batch_last: list[str] = []

    def embed_second_batch(texts: list[str]) -> Any:
        calls.append(1)
        if len(calls) == 2:
            (last,) = [m.id for m in brain.recent(limit=10) if "number 1" in m.content]
            first_batch_last.append(last)
            other.forget([last], confirm=True)
        return real(texts)

    monkeypatch.setattr(brain.embedder, "embed_documents", embed_second_batch)
    brain.ingest([parse_chat(turns, key="talk")])
    assert first_batch_last
    edges = brain.store.all_relationships()
    ends = {e for edge in edges for e in (edge.source_id, edge.target_id)}
    assert first_batch_last[0] not in ends and brain.store.held(sorted(ends)) == ends


def test_a_restore_to_a_version_lost_in_the_middle_names_the_versions_kept(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # With a middle version's manifest gone, "no version 3 is kept (kept: 1–8)" said 3 was kept.
    brain = make_brain()
    for i in range(3):
        brain.memorize(f"Fact {i}", f"The fact number {i} of this store.")
    numbers = sorted(v.version for v in brain.history())
    lost = numbers[len(numbers) // 2]
    manifests = (tmp_path / "db" / "memories.lance" / "_versions").glob("*.manifest")
    gone = [m for m in manifests if int(m.stem) == 2**64 - 1 - lost]
    assert len(gone) == 1, "(Lance names a manifest 2^64 - 1 - version)"
    gone[0].unlink()
    again = make_brain()
    said = rf"^version: no version {lost} is kept \(kept: .*{lost - 1}, {lost + 1}"
    with pytest.raises(InvalidInput, match=said):
        again.restore(lost, confirm=True)


def _side_by_side(
    monkeypatch: pytest.MonkeyPatch, first: tuple[object, str], second: tuple[object, str]
) -> None:
    """Make two methods (an object and a name each) wait for each other before they run: they
    run only when called at the same time (one after the other, the first waits in vain)."""
    ready = threading.Event(), threading.Event()
    for (owner, name), mine, other in ((first, *ready), (second, *reversed(ready))):
        monkeypatch.setattr(owner, name, _meeting(getattr(owner, name), mine, other))


def _meeting(run: Any, mine: threading.Event, other: threading.Event) -> Any:
    def meeting(*args: Any, **kwargs: Any) -> Any:
        mine.set()
        assert other.wait(10), "ran one after the other, not side by side"
        return run(*args, **kwargs)

    return meeting


def test_memorize_embeds_its_text_while_the_store_opens(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A new process pays for the model's first run and for opening the store (LanceDB's
    # import): side by side on two cores they cost the longer of the two, not their sum.
    brain = make_brain()
    _side_by_side(monkeypatch, (brain.embedder, "embed_documents"), (brain.store, "open"))
    mem, _ = brain.memorize(*TOKEN_BUCKET)
    assert [h.memory.id for h in brain.remember("token bucket rate limiting").hits] == [mem.id]


def test_remember_embeds_its_query_while_the_mirror_catches_up(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain = make_brain()
    mem, _ = brain.memorize(*TOKEN_BUCKET)
    corpus = brain.retriever.corpus
    _side_by_side(monkeypatch, (brain.embedder, "embed_query"), (corpus, "refresh"))
    assert [h.memory.id for h in brain.remember("token bucket rate limiting").hits] == [mem.id]


def test_an_embedding_that_fails_fails_the_call_and_stores_nothing(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Embedded on a thread of its own, the model's error is still the call's.
    brain = make_brain()
    brain.memorize(*POSTGRES)

    def broken(_texts: Any) -> Any:
        raise EmbeddingError("model unavailable: reinstall octobrain")

    monkeypatch.setattr(brain.embedder, "embed_documents", broken)
    monkeypatch.setattr(brain.embedder, "embed_query", broken)
    with pytest.raises(EmbeddingError, match="model unavailable"):
        brain.memorize(*TOKEN_BUCKET)
    with pytest.raises(EmbeddingError, match="model unavailable"):
        brain.remember("primary database")
    assert brain.store.count() == 1


def test_an_update_embeds_the_mirrored_memory_edited_while_the_store_opens(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hook refreshing its session digest has just read it from the mirror: its edit is
    # embedded while the store opens and the row is read under the write lock.
    brain = make_brain()
    mem, _ = brain.memorize(*TOKEN_BUCKET)
    brain.retriever.corpus.refresh()  # (as the hook's look for its digest does)
    assert brain.retriever.corpus.held(mem.id) is not None
    _side_by_side(monkeypatch, (brain.embedder, "embed_documents"), (brain.store, "write_lock"))
    brain.update(mem.id, content="API keys are throttled by a leaky bucket: 50 requests a minute.")
    monkeypatch.undo()
    assert [h.memory.id for h in brain.remember("leaky bucket").hits] == [mem.id]


def test_an_update_that_changes_nothing_writes_nothing_and_one_saying_nothing_is_refused(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    mem, _ = brain.memorize(*TOKEN_BUCKET, tags=["api"])
    version = brain.store.version()
    # The same title, a tag it has: no new version of the store, the memory as it was.
    same = brain.update(mem.id, title=TOKEN_BUCKET[0], add_tags=["api"])
    assert same == brain.get(mem.id) and brain.store.version() == version
    with pytest.raises(InvalidInput, match=r"^update: nothing to change: give a title"):
        brain.update(mem.id)
    with pytest.raises(InvalidInput, match=r'^remove_tags: names "api", which add_tags adds'):
        brain.update(mem.id, add_tags=["api"], remove_tags=["api"])
    with pytest.raises(InvalidInput, match=r'^remove_files: names "a\.py", which add_files add'):
        brain.update(mem.id, add_files=["a.py"], remove_files=["a.py"])
    assert brain.store.version() == version
    assert brain.update(mem.id, importance=0.9).importance == 0.9
    assert brain.store.version() > version


def test_an_update_embeds_the_row_it_read_not_an_out_of_date_mirror(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    mem, _ = brain.memorize(*TOKEN_BUCKET)
    brain.retriever.corpus.refresh()
    stale = brain.retriever.corpus.held(mem.id)
    assert stale is not None and stale.content == TOKEN_BUCKET[1]
    other = make_brain()  # another process edits it; this one's mirror has not caught up
    other.update(mem.id, content="API keys are throttled by a leaky bucket: 50 requests a minute.")
    assert brain.retriever.corpus.held(mem.id) == stale
    updated = brain.update(mem.id, title="Throttling decision")
    assert updated.content.startswith("API keys are throttled by a leaky bucket")
    stored = {
        r["id"]: r["embedding"] for r in brain.store.scan("true", columns=["id", "embedding"])
    }[mem.id]
    assert np.allclose(stored, brain.embedder.embed_documents([updated.embedded_text()])[0])
