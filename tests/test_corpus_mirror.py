"""The in-process mirror of `memories` stays correct while other processes write.

A catch-up reads the store several times (ids and edit stamps, then the changed rows with their
embeddings); another process's commit in between must not make those reads disagree, and a
catch-up that fails half-way must not leave a mirror that fails every later search.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory import corpus_apply
from octobrain.memory.brain import Brain
from octobrain.memory.corpus import Corpus
from octobrain.store.pinned import Pinned
from octobrain.store.sql import Sight

SCOPE = "github.com/acme/api"


def _brain(uri: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=uri)


def _found(brain: Brain, query: str) -> set[str]:
    return {hit.memory.id for hit in brain.remember(query, min_relevance=0.0).hits}


def test_a_forget_landing_between_the_mirror_reads_breaks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, writer = _brain(tmp_path / "db"), _brain(tmp_path / "db")
    kept, _ = writer.memorize("Kept zqkept", "The zqkept fact stays.")
    doomed, _ = writer.memorize("Doomed zqdoomed", "The zqdoomed fact is forgotten.")
    original = Pinned.scan_arrow
    raced = []

    def probe_then_forget(self: Pinned, where: str, *, columns: Any) -> Any:
        table = original(self, where, columns=columns)
        if not raced:  # the first read of a catch-up: another process deletes right after it
            raced.append(writer.forget([doomed.id], confirm=True))
        return table

    monkeypatch.setattr(Pinned, "scan_arrow", probe_then_forget)
    assert _found(reader, "zqkept") >= {kept.id}
    assert raced
    monkeypatch.undo()
    assert doomed.id not in _found(reader, "zqdoomed")  # the next catch-up drops it
    assert kept.id in _found(reader, "zqkept")


def test_a_failed_catch_up_is_retried_from_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, writer = _brain(tmp_path / "db"), _brain(tmp_path / "db")
    first, _ = writer.memorize("First zqfirst", "An early zqfirst fact.")
    assert first.id in _found(reader, "zqfirst")
    second, _ = writer.memorize("Second zqsecond", "A later zqsecond fact.")
    original = corpus_apply.add
    calls = []

    def fail_once(self: Corpus, *args: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            original(self, *args)  # half the work is done, then the read fails
            raise OSError("connection reset while reading the store")
        original(self, *args)

    monkeypatch.setattr(corpus_apply, "add", fail_once)
    with pytest.raises(OSError):
        reader.remember("zqsecond")
    assert second.id in _found(reader, "zqsecond")
    assert first.id in _found(reader, "zqfirst")
    assert len(reader.retriever.corpus) == 2


def test_tag_and_file_filters_follow_edits_and_forgets(tmp_path: Path) -> None:
    import random

    rng = random.Random(3)
    brain = _brain(tmp_path / "db")
    tags, files = ["api", "db", "ops", "ui"], ["a.py", "b.py", "c.py"]
    ids = [
        brain.memorize(
            f"Note number {i}",
            f"Fact {i} about the system.",
            tags=rng.sample(tags, rng.randint(0, 2)),
            related_files=rng.sample(files, rng.randint(0, 2)),
        )[0].id
        for i in range(16)
    ]
    for mid in ids[:5]:
        brain.update(mid, add_tags=["ops"], remove_tags=["api"], add_files=["c.py"])
    brain.forget(ids[5:8], confirm=True)
    corpus = brain.retriever.corpus
    corpus.refresh()
    live = {mid: brain.get(mid) for mid in ids[:5] + ids[8:]}
    for tag in tags:
        mask = corpus.allowed(Sight(SCOPE), tags=[tag])
        got = {corpus.memory(int(p)).id for p in mask.nonzero()[0]}
        assert got == {mid for mid, m in live.items() if tag in m.tags}, tag
    for path in files:
        mask = corpus.allowed(Sight(SCOPE), related_files=[path, "missing.py"])
        got = {corpus.memory(int(p)).id for p in mask.nonzero()[0]}
        assert got == {mid for mid, m in live.items() if path in m.related_files}, path


def test_memories_stay_answerable_when_the_memory_cache_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import corpus as corpus_module

    brain = _brain(tmp_path)
    made = [brain.memorize(f"Note {i}", f"The setting zq{i} is {i}.")[0].id for i in range(6)]
    corpus = brain.retriever.corpus
    corpus.refresh()
    monkeypatch.setattr(corpus_module, "_MAX_CACHED", 4)
    positions = [corpus.pos_of[mid] for mid in made]
    assert [m.id for m in corpus.memories_at(positions[:3])] == made[:3]
    # Three cached, two new: past the cap the cache starts over, and all five still come back.
    assert [m.id for m in corpus.memories_at(positions[1:6])] == made[1:6]


def test_row_addresses_name_the_same_rows_after_writes_forgets_and_compaction(
    tmp_path: Path,
) -> None:
    # The ANN leg gets row addresses from LanceDB and the mirror turns them into positions:
    # after another process's writes, a forget and a compaction that moves every row, each
    # address the store holds names the same memory in the mirror, and a forgotten one none.
    reader, writer = _brain(tmp_path / "db"), _brain(tmp_path / "db")

    def mapped() -> dict[str, str | None]:
        reader.remember("zqany", min_relevance=0.0)  # catch up
        corpus = reader.retriever.corpus
        rows = writer.store.memories.search().select(["id", "_rowaddr"]).to_arrow()
        pos = corpus.positions_at(rows["_rowaddr"].to_numpy().astype("int64"))
        ids = corpus.fields_at(pos[pos >= 0])["id"]
        found = iter(ids)
        return {
            mid: (next(found) if p >= 0 else None)
            for mid, p in zip(rows["id"].to_pylist(), pos.tolist(), strict=True)
        }

    made = [
        writer.memorize(f"Fact {i} zqfact", f"The zqfact number {i} holds.")[0] for i in range(12)
    ]
    assert mapped() == {m.id: m.id for m in made}
    gone = made[3]
    old = writer.store.memories.search().where(f"id = '{gone.id}'").select(["_rowaddr"])
    old_addr = old.to_arrow()["_rowaddr"].to_numpy().astype("int64")
    writer.forget([gone.id], confirm=True)
    writer.store.compact()
    assert mapped() == {m.id: m.id for m in made if m.id != gone.id}
    assert reader.retriever.corpus.positions_at(old_addr).tolist() == [-1]
    more = [writer.memorize(f"Later {i} zqlater", f"The zqlater number {i}.")[0] for i in range(5)]
    writer.store.compact()
    assert mapped() == {m.id: m.id for m in [*made, *more] if m.id != gone.id}


def test_edge_lookups_stay_the_same_once_the_edges_are_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table of edges read often enough is indexed; what a search finds through it (each
    result's edges, the neighbours shown) is what a scan found, and a new edge counts at once."""
    from octobrain.memory import edges
    from octobrain.memory.conversation import parse_text

    monkeypatch.setattr(edges, "INDEX_FROM_ROWS", 1)
    b = _brain(tmp_path / "db")
    said = [  # more turns than a search's candidates, so that searches ask different ids
        {"speaker": ("Ana", "Bo")[i % 2], "text": f"The shed roof, part {i}: {word}."}
        for i in range(400)
        for word in [("nails", "tiles", "gutters", "paint", "moss")[i % 5] * (1 + i % 7)]
    ]
    b.ingest(parse_text(json.dumps(said)))
    corpus = b.retriever.corpus

    def answers(query: str = "shed roof") -> tuple[list[str], dict[str, list[str]], list[str]]:
        recall = b.remember(query, limit=8, min_relevance=0.0, record_access=False)
        ids = [h.memory.id for h in recall.hits]
        by_node = {k: sorted(r.id for r in v) for k, v in corpus.edges_by_node(ids).items()}
        return ids, by_node, [n.memory.id for n in recall.neighbours]

    # Each question its own candidates (the last lookup's rows answer a repeated one).
    questions = [f"roof {w}" for w in ("nails", "tiles", "gutters", "paint", "moss", "paintpaint")]
    scanned = [answers(q) for q in questions]
    assert all(len(found) in (1, 2) for a in scanned for found in a[1].values())  # the chain
    assert corpus._edges._index is not None  # (built at the third of those lookups)
    assert [answers(q) for q in questions] == scanned
    ids = answers()[0]
    link = b.relate(ids[0], ids[-1], "related_to")
    ids_after, by_node, _ = answers()
    assert corpus._edges._index is None  # a new table: scanned again before it is indexed
    assert ids_after == ids and link.id in by_node[ids[0]] and link.id in by_node[ids[-1]]
    for q in questions:
        answers(q)
    assert corpus._edges._index is not None and answers()[1] == by_node


def test_a_hub_gives_a_search_its_first_edges_of_each_type_not_all_of_them(
    tmp_path: Path,
) -> None:
    # 50 hubs of 6,000 edges made one `remember` build 300,000 edge objects (3 s) to show
    # three neighbours, and every other client waited; the briefing read them all too (4–7 s).
    brain = Brain("github.com/acme/api", config=Config(), embedder=get_embedder("hash:64"),
                  uri=tmp_path)  # fmt: skip
    hub, _ = brain.memorize("Hub memory", "The memory everything links to.")
    leaves = [
        brain.memorize(f"Leaf {i}", f"Leaf number {i} links to the hub.",
                       related_to=[{"target_id": hub.id}])[0]
        for i in range(6)
    ]  # fmt: skip
    newer, _ = brain.memorize("Newer", "A newer memory.", related_to=[{"target_id": hub.id,
                              "relationship_type": "supersedes"}])  # fmt: skip
    brain.remember("hub memory")  # (the mirror caught up)
    corpus = brain.retriever.corpus
    edges = corpus.edges_by_node([hub.id], per_kind=2)[hub.id]
    kinds = [e.relationship_type.value for e in edges]
    assert kinds.count("related_to") == 2 and kinds.count("supersedes") == 1, kinds
    assert {e.source_id for e in edges if e.relationship_type.value == "related_to"} == {
        leaves[0].id,
        leaves[1].id,
    }  # the oldest
    assert len(corpus.edges_by_node([hub.id])[hub.id]) == 7  # uncapped: all
    sources, targets, types = corpus.edges_of_kinds(["supersedes"])
    assert (sources, targets, types) == ([newer.id], [hub.id], ["supersedes"])
    recall = brain.remember("hub memory everything links", limit=1)
    assert recall.hits[0].memory.id == hub.id and len(recall.neighbours) == 3
