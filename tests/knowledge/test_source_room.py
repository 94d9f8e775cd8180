"""`knowledge.max_sources` holds when several agents' processes index new sources at once: the
count is taken again under the write lock of each source's commit (the MCP and command-line
refusals themselves: `test_server_source_cap.py`)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from octobrain.config import KnowledgeConfig
from octobrain.knowledge import Knowledge

from .conftest import SCOPE, config
from .test_note_room import _at_once, _MeetingEmbedder


def test_the_cap_defaults_to_five_thousand_sources() -> None:
    assert KnowledgeConfig().max_sources == 5_000


def test_sources_indexed_at_once_keep_within_max_sources(tmp_path: Path) -> None:
    # Counted only before the fetch, four new sources indexed at once each passed a cap of 2.
    embedder = _MeetingEmbedder(4)
    facades = [
        Knowledge(
            SCOPE,
            config=config(max_sources=2),
            embedder=embedder,  # type: ignore[arg-type]
            uri=tmp_path / "db",
            cwd=tmp_path,
        )
        for _ in range(4)
    ]
    for i in range(4):
        (tmp_path / f"doc{i}.md").write_text(f"# Doc {i}\n\nRotate the staging keys, part {i}.")
    kept, refused = _at_once([partial(k.index, f"doc{i}.md") for i, k in enumerate(facades)])
    assert (kept, len(refused)) == (2, 2), refused
    assert all("knowledge.max_sources (2)" in message for message in refused), refused
    assert len(facades[0].kstore.scan_sources()) == 2
    assert facades[0].kstore.count_chunks() == 2  # nothing of a refused source written
