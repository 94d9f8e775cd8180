"""Read-modify-write edits from several processes at once lose nothing.

`update` reads a row, edits it and writes the whole row back. Without the store's write lock
around all three steps, a concurrent edit (another process's update, a consolidation marking
the row consolidated) landing in between is silently overwritten.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import StorageError
from octobrain.memory.brain import Brain
from octobrain.models import Memory, Relationship, RelationshipType, State
from octobrain.store.failures import NotFound
from octobrain.times import utcnow

SCOPE = "github.com/acme/api"
WORKERS = 4
EDITS = 5  # 4 x 5 = 20 files, the per-memory cap

SCRIPT = textwrap.dedent(
    """
    import sys
    from octobrain.memory.brain import Brain
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder

    uri, scope, memory_id, worker, edits = sys.argv[1:6]
    brain = Brain(scope, config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    for i in range(int(edits)):
        brain.update(memory_id, add_files=[f"src/w{worker}/f{i}.py"])
    """
)


def brain_at(path: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=path)


def test_concurrent_updates_from_processes_keep_every_edit(tmp_path: Path) -> None:
    memory, _ = brain_at(tmp_path).memorize("Shared notes", "Edited by every worker at once.")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(tmp_path), SCOPE, memory.id, str(w), str(EDITS)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    files = brain_at(tmp_path).get(memory.id).related_files
    expected = {f"src/w{w}/f{i}.py" for w in range(WORKERS) for i in range(EDITS)}
    assert set(files) == expected, f"lost edits: {sorted(expected - set(files))}"
    assert len(files) == len(expected)


IMPORT = textwrap.dedent(
    """
    import sys
    from octobrain.memory.brain import Brain
    from octobrain.memory.transfer import import_jsonl
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder

    uri, scope, path = sys.argv[1:4]
    brain = Brain(scope, config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    brain.store.count()
    print("ready", flush=True)
    sys.stdin.readline()  # both start writing together
    with open(path, "rb") as handle:
        report = import_jsonl(brain, handle)
    print(report.imported, flush=True)
    """
)


def test_one_file_imported_by_two_processes_at_once_stores_each_memory_once(
    tmp_path: Path,
) -> None:
    # Each process found no id present before writing, and both wrote: every memory twice.
    import io

    from octobrain.memory.export import BATCH, export_jsonl

    source = brain_at(tmp_path / "source")
    source.store.add(
        [
            Memory(title=f"Backup note {i}", content=f"Restored fact number {i}.", scope=SCOPE)
            for i in range(2 * BATCH)
        ],
        source.embedder.embed_documents([f"Restored fact number {i}." for i in range(2 * BATCH)]),
    )
    ids = [r["id"] for r in source.store.scan("true", columns=["id"])]
    source.store.add_relationships(
        [Relationship(a, b, RelationshipType.RELATED_TO, 0.5, "", SCOPE) for a, b in pairwise(ids)]
    )
    out = io.StringIO()
    export_jsonl(source, out, embeddings=True)
    dump = tmp_path / "backup.jsonl"
    dump.write_text(out.getvalue())
    target = tmp_path / "target"
    brain_at(target).store.count()  # the store exists before both open it
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", IMPORT, str(target), SCOPE, str(dump)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    imported = []
    for proc in procs:
        out_text, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        imported.append(int(out_text.strip()))
    assert sum(imported) == 2 * BATCH
    stored = [r["id"] for r in brain_at(target).store.scan("true", columns=["id"])]
    assert len(stored) == len(set(stored)) == 2 * BATCH
    edges = [r.id for r in brain_at(target).store.all_relationships()]
    assert len(edges) == len(set(edges)) == 2 * BATCH - 1


def test_a_rewrite_of_a_row_changed_since_it_was_read_writes_nothing(tmp_path: Path) -> None:
    # The commit itself checks the row is still the one read (its `updated_at`, access count
    # and state): the last guard when the write lease lapsed under a paused writer.
    brain = brain_at(tmp_path)
    memory, _ = brain.memorize("Deploys", "Deploys go out on Tuesdays.")
    read = brain.get(memory.id)
    stale = dataclasses.replace(read, content="Deploys go out on Thursdays.", updated_at=utcnow())
    vector = brain.embedder.embed_documents([stale.embedded_text()])[0]

    brain.update(memory.id, add_tags=["owner-team-b"])  # another writer's acknowledged edit
    with pytest.raises(StorageError, match=f"memory {memory.id} was changed by another writer"):
        brain.store.replace(stale, vector, read=read)
    kept = brain.get(memory.id)
    assert kept.tags == ["owner-team-b"] and kept.content == "Deploys go out on Tuesdays."

    # An access counted since is a change too (the stale row would set the count back).
    brain.store.record_access([memory.id], utcnow(), min_interval=timedelta(0))
    with pytest.raises(StorageError, match="nothing was changed"):
        brain.store.replace(stale, vector, read=kept)
    assert brain.get(memory.id).content == "Deploys go out on Tuesdays."

    # The row as read: written.
    fresh = brain.get(memory.id)
    brain.store.replace(dataclasses.replace(fresh, content="Now on Thursdays."), vector, read=fresh)
    assert brain.get(memory.id).content == "Now on Thursdays."

    brain.forget([memory.id], confirm=True)
    with pytest.raises(NotFound, match="was deleted by another writer"):
        brain.store.replace(stale, vector, read=fresh)
    assert brain.store.count() == 0


def test_a_consolidation_whose_member_changed_since_it_was_read_writes_nothing(
    tmp_path: Path,
) -> None:
    brain = brain_at(tmp_path)
    memory, _ = brain.memorize("Deploys", "Deploys go out on Tuesdays.")
    read = brain.store.scan(f"id = '{memory.id}'")
    flipped = [dict(read[0], state=State.CONSOLIDATED.value, updated_at=utcnow())]
    brain.update(memory.id, importance=0.2)  # edited after the pass read it
    with pytest.raises(StorageError, match=f"memory {memory.id} was changed by another writer"):
        brain.store.merge_rows(flipped, read=read)
    kept = brain.get(memory.id)
    assert kept.state is State.WORKING and kept.importance == pytest.approx(0.2)


def test_a_reembed_whose_lease_lapses_while_it_streams_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reembed` embeds the rows while its one commit streams them, long enough on a bucket
    for the write lease to pass to another writer. Before, the lease was checked once, before
    the stream: a paused reembed then overwrote the table, a teammate's new memory with it."""
    from octobrain.memory.transfer import reembed
    from octobrain.store.lease import LeaseLost
    from octobrain.store.location import StoreLocation

    brain = brain_at(tmp_path)
    kept = [brain.memorize(f"Note number {i}", f"Content of note {i}.")[0].id for i in range(3)]
    checks: list[int] = []

    def lapses_after_the_first_batch(self: StoreLocation) -> None:
        checks.append(1)
        if len(checks) > 1:
            raise LeaseLost("store: this write's lease was taken over")

    monkeypatch.setattr(StoreLocation, "check_held", lapses_after_the_first_batch)
    version = brain.store.version()
    with pytest.raises(LeaseLost):
        reembed(brain)
    monkeypatch.undo()
    assert brain_at(tmp_path).store.version() == version, "the overwrite was committed"
    assert {m.id for m in brain_at(tmp_path).recent(limit=10)} == set(kept)
