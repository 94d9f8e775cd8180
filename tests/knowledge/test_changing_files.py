"""A file that changes while (or just after) it is indexed: the index describes the one version
it read, and a later use reads the file again rather than call that version current."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import octobrain.knowledge.sources as sources

from .conftest import MakeKnowledge

MONDAY = "# Log\n\n## Monday\n\nThe deploy went out at noon.\n"
TUESDAY = "\n## Tuesday\n\nThe rollback finished at dusk.\n"


@pytest.fixture
def appended_as_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`log.md`, to which a section is appended while it is read, in the clock tick of the
    write before (a timestamp moves in ticks of a few ms): its modification time stays."""
    doc = tmp_path / "log.md"
    doc.write_text(MONDAY)
    real = sources.read_regular

    def read_then_append(path: Any, max_bytes: int, *, resolved: bool = False) -> Any:
        data, status = real(path, max_bytes, resolved=resolved)
        with open(path, "a") as log:
            log.write(TUESDAY)
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))  # (the same tick)
        monkeypatch.setattr(sources, "read_regular", real)  # (once)
        return data, status

    monkeypatch.setattr(sources, "read_regular", read_then_append)
    return doc


def test_a_file_appended_as_it_is_indexed_is_read_again_when_named(
    make_knowledge: MakeKnowledge, appended_as_read: Path
) -> None:
    # Freshness was the modification time alone: the index held Monday only, and a search
    # naming the file called it fresh without reading it, for as long as it was not edited.
    k = make_knowledge()
    first = k.index(str(appended_as_read))
    assert first.status == "indexed" and first.source.size_bytes == len(MONDAY)  # as read
    found = k.search("rollback finished at dusk", source=str(appended_as_read))
    assert found.indexed is not None and found.indexed.status == "reindexed"
    assert "rollback finished at dusk" in found.hits[0].text
    assert k.search("rollback finished at dusk").hits[0].stale == ""


def test_a_hit_of_the_version_read_says_the_file_changed_since(
    make_knowledge: MakeKnowledge, appended_as_read: Path
) -> None:
    k = make_knowledge()
    k.index(str(appended_as_read))
    [hit] = k.search("deploy went out at noon", limit=1).hits
    assert hit.stale == "changed", hit
    [line] = k.match("deploy went out").hits
    assert line.stale == "changed", line


def test_an_unchanged_text_in_other_bytes_is_fresh_after_one_look(
    make_knowledge: MakeKnowledge, tmp_path: Path, embedder: Any
) -> None:
    # The size the index records is the file's as last read, so freshness by it converges:
    # bytes that extract to the same text (a BOM added) are read once more, not every time.
    doc = tmp_path / "ops.md"
    doc.write_text(MONDAY)
    k = make_knowledge()
    k.index(str(doc))
    stamp = doc.stat().st_mtime_ns
    doc.write_bytes(b"\xef\xbb\xbf" + MONDAY.encode())
    os.utime(doc, ns=(stamp, stamp))
    assert k.index(str(doc)).status == "unchanged"
    calls = embedder.calls
    assert k.search("deploy noon", source=str(doc)).indexed.status == "fresh"  # type: ignore[union-attr]
    assert embedder.calls == calls
