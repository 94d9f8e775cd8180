"""The approximate nearest-neighbour path over the snapshot: the exact top results, and filters
applied on the mirror, falling back to the prefilter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.snapshot_support import SCOPE, TOPICS, _brain, _fill, _found
from tests.snapshot_support import data_dir as data_dir  # the fixture, shared


def test_the_ann_path_returns_the_exact_top_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.store import upkeep

    exact = _brain(tmp_path / "db", snapshot_min_rows=0)
    _fill(exact, 600)
    monkeypatch.setattr(upkeep, "VECTOR_INDEX_MIN_ROWS", 300)
    exact.store.compact()  # builds the IVF-PQ index the ANN path searches
    assert "embedding" in {ix.columns[0] for ix in exact.store.memories.list_indices()}
    monkeypatch.setattr("octobrain.memory.ann.ANN_EXACT_BELOW", 0)
    ann = _brain(tmp_path / "db", ann_min_rows=100, snapshot_min_rows=0)
    for query in ["zq17 setting", "billing service setting", "deploy zq301", "metrics backup"]:
        want = _found(exact, query, limit=10)
        got = _found(ann, query, limit=10)
        assert got[:5] == want[:5], query
        assert len(set(got) & set(want)) >= 9, query


def test_the_ann_path_filters_on_the_mirror_and_falls_back_to_the_prefilter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Most rows allowed: the index is searched unfiltered and the mirror's mask keeps the
    # allowed ones; a narrow filter, or one the unfiltered nearest rows hardly meet, is
    # handed to LanceDB as a prefilter. Either way only allowed rows come back, the exact best.
    from octobrain.kernels.hybrid import exact_top
    from octobrain.memory import ann as ann_module
    from octobrain.memory.query import Filters
    from octobrain.models import Memory, MemoryType
    from octobrain.store import memories as store_module
    from octobrain.store import upkeep
    from octobrain.store.sql import Sight

    exact = _brain(tmp_path / "db", snapshot_min_rows=0)
    _fill(exact, 600)
    more = [
        Memory(
            title=f"Note {i} on {TOPICS[i % len(TOPICS)]}",
            content=f"The {TOPICS[i % len(TOPICS)]} service uses setting zq{i} = {i * 7}.",
            scope="github.com/acme/web",  # another project: never visible from SCOPE
        )
        for i in range(400)
    ] + [
        Memory(
            title=f"Garden bed {i}",
            content=f"Tomato variety kq{i} grows best beside basil, watered at dawn.",
            scope=SCOPE,
            memory_type=MemoryType.DECISION,
            tags=["shade"] if i % 10 == 0 else [],  # 20 of them
        )
        for i in range(200)
    ]
    exact.store.add(more, exact.embedder.embed_documents([m.searchable_text() for m in more]))
    monkeypatch.setattr(upkeep, "VECTOR_INDEX_MIN_ROWS", 300)
    exact.store.compact()
    monkeypatch.setattr(ann_module, "ANN_EXACT_BELOW", 0)
    wheres: list[str | None] = []
    search_index = store_module.MemoryStore.vector_search

    def spy(self: Any, vector: Any, where: str | None, k: int, **kw: Any) -> Any:
        wheres.append(where)
        return search_index(self, vector, where, k, **kw)

    monkeypatch.setattr(store_module.MemoryStore, "vector_search", spy)
    ann = _brain(tmp_path / "db", ann_min_rows=100, snapshot_min_rows=0)
    for query, types, searched in [
        ("billing service setting", [], [None]),  # 800 of 1,200 rows allowed
        ("tomato basil garden", [], [None]),
        ("tomato basil garden", ["decision"], ["prefilter"]),  # 200 of 1,200
    ]:
        wheres.clear()
        want = _found(exact, query, limit=10, memory_types=types)
        got = _found(ann, query, limit=10, memory_types=types)
        assert ["prefilter" if w else w for w in wheres] == searched, query
        assert got[:5] == want[:5], query
        assert len(set(got) & set(want)) >= 9, query
    # Unfiltered first, as if most rows were allowed, where the query's nearest rows are not:
    monkeypatch.setattr(ann_module, "ANN_POSTFILTER_SHARE", 0.0)
    corpus = ann.retriever.corpus
    allowed = corpus.allowed(Sight(SCOPE), memory_types=["decision"])
    vector = ann.embedder.embed_query(["the billing service uses setting"])[0]
    everything = np.ones(corpus.position_count, dtype=bool)
    # (5 × ANN_REFINE / (200 / 1,200) nearest rows: notes, not one garden bed)
    nearest = 5 * ann_module.ANN_REFINE * 6
    assert not allowed[exact_top(corpus.vectors.cosines(vector), everything, nearest)].any()

    def index_as_exact(self: Any, vector: Any, where: str | None, k: int, **kw: Any) -> Any:
        # The index is approximate: now and then (its partitions are trained at random) its
        # unfiltered answer held a garden bed or five the exact nearest rows do not. Here it
        # answers as the exact ones do, none allowed, so the fallback is what is tested.
        addrs, cosines = spy(self, vector, where, k, **kw)
        if where is not None:
            return addrs, cosines
        pos = corpus.positions_at(addrs)
        keep = ~((pos >= 0) & allowed[np.maximum(pos, 0)])
        return addrs[keep], cosines[keep]

    monkeypatch.setattr(store_module.MemoryStore, "vector_search", index_as_exact)
    wheres.clear()
    filters = Filters(memory_types=(MemoryType.DECISION,))
    got = ann.retriever._ann(vector, filters.where(Sight(SCOPE)), 5, allowed)
    assert ["prefilter" if w else w for w in wheres] == [None, "prefilter"]
    assert allowed[got].all() and len(got) == 5
    monkeypatch.setattr(ann_module, "ANN_POSTFILTER_SHARE", 1.0)  # the prefilter alone
    assert ann.retriever._ann(vector, filters.where(Sight(SCOPE)), 5, allowed) == got
    # A tag only 20 garden beds carry, asked with a query about billing: the prefilter holds
    # the tag too, so the index's nearest rows meeting it are found (not 50 billing notes the
    # mask then drops), and the vector leg is the exact one.
    shade = Filters(tags=("shade",))
    allowed = corpus.allowed(Sight(SCOPE), tags=["shade"])
    got = ann.retriever._ann(vector, shade.where(Sight(SCOPE)), 5, allowed)
    assert got == exact_top(corpus.vectors.cosines(vector), allowed, 5)
