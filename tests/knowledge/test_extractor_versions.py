"""A source is read again when the extraction of its format changed, not only its bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from octobrain.knowledge import extract
from octobrain.knowledge.extract import DocType
from octobrain.knowledge.render import render_sources

from .conftest import CountingEmbedder, MakeKnowledge

README = """Widget service
==============

The widget service stores widgets and answers within two seconds, every time.

Install
-------

Run the installer as root, then check that the service listens on port 8080.
"""


def test_sources_whose_extractor_changed_are_indexed_again_and_only_they(
    make_knowledge: MakeKnowledge,
    embedder: CountingEmbedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Sources indexed before an extractor improved (setext headings read, a PDF's running
    # lines dropped) kept the old reading: the same bytes made the same text, or the file's
    # modification time said "fresh", so only `--force`, source by source, read them again.
    (tmp_path / "README.md").write_text(README)
    (tmp_path / "notes.txt").write_text("Rotate the widget keys every month.\n")
    monkeypatch.setitem(extract.EXTRACTOR_VERSIONS, DocType.MARKDOWN, 1)  # an older reading
    k = make_knowledge()
    assert k.index("README.md").status == "indexed"
    assert k.index("notes.txt").status == "indexed"
    monkeypatch.setitem(extract.EXTRACTOR_VERSIONS, DocType.MARKDOWN, 7)  # then it improved
    listed = {Path(s.uri).name: s.outdated for s in k.list_sources()}
    assert listed == {"README.md": True, "notes.txt": False}
    assert render_sources(k.list_sources()).count("read by an older extractor") == 1
    calls = embedder.calls
    found = k.search("installer port", source="README.md")  # file untouched: was "fresh"
    assert found.indexed is not None and found.indexed.status == "reindexed"
    assert k.search("installer port", source="README.md").indexed.status == "fresh"  # type: ignore[union-attr]
    assert k.index("README.md").status == "unchanged"
    assert k.index("notes.txt").status == "unchanged"  # its format's reading did not change
    assert embedder.calls == calls + 1
    assert not any(s.outdated for s in k.list_sources())
    assert found.hits[0].section_path == ("Widget service", "Install")

    monkeypatch.setitem(extract.EXTRACTOR_VERSIONS, DocType.MARKDOWN, 8)
    assert k.index("README.md").status == "reindexed"  # named, same bytes: read again too


def test_every_format_has_its_extractor_version_under_its_name() -> None:
    # The versions are kept by a format's name (`extractor_versions.py`): a misspelt one
    # would leave its format at version 1, never read again when its extraction changed.
    assert set(extract.EXTRACTOR_VERSIONS) == {t.value for t in DocType}
    odt = extract.EXTRACTOR_VERSIONS["odt"]
    assert extract.extracted_by(DocType.ODT) == extract.extracted_by("odt") == f"/odt{odt}"
