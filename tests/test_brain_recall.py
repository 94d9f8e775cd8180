"""Memorize and recall through the facade: validation, projects kept apart, ranking, filters,
links, forgetting, a model change."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config, SearchConfig
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.render import ARCHIVED_MCP, format_recall, recall_to_dict
from octobrain.memory.search import Empty
from octobrain.memory.transfer import reembed
from octobrain.models import Memory, MemoryType, Source, State
from octobrain.store import ModelMismatch
from tests.brain_support import POSTGRES, TOKEN_BUCKET, MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared


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
