"""Embedding overlapped with opening the store: memorize, remember and update embed while it
opens, a failed embedding stores nothing, an update embeds the row it read."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from octobrain.errors import EmbeddingError, InvalidInput
from tests.brain_support import POSTGRES, TOKEN_BUCKET, MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared


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
