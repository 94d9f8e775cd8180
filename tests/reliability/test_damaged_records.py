"""The store's small JSON records beside the tables (`_octobrain/*.json`), damaged so that
they are nested too deeply to read: named as damage, or dropped where a record may be, never an
internal error (`RecursionError`) for every call that opens the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from octobrain.memory.brain import Brain
from octobrain.store import import_marks
from octobrain.store.manifest import ManifestDamaged
from tests.snapshot_support import _brain
from tests.snapshot_support import data_dir as data_dir  # the autouse data directory, shared

DEEP = "[" * 100_000 + "]" * 100_000


def _one_fact(uri: Path) -> Brain:
    brain = _brain(uri)
    brain.memorize("Deploy procedure", "Always run the cleanup script before a deploy.")
    return brain


def test_a_manifest_nested_too_deeply_is_named_with_the_way_out(tmp_path: Path) -> None:
    _one_fact(tmp_path / "db")
    (tmp_path / "db" / "_octobrain" / "manifest.json").write_text(DEEP)
    with pytest.raises(ManifestDamaged, match="manifest.json cannot be read") as raised:
        _brain(tmp_path / "db").stats()
    assert "nested too deeply" in str(raised.value)
    assert "`octobrain doctor --rewrite-manifest`" in str(raised.value)


def test_an_access_record_nested_too_deeply_is_dropped(tmp_path: Path) -> None:
    _one_fact(tmp_path / "db")
    waiting = tmp_path / "db" / "_octobrain" / "accessed"
    waiting.mkdir(parents=True, exist_ok=True)
    (waiting / "1-1-abcd.json").write_text(DEEP)
    hits = _brain(tmp_path / "db").remember("cleanup script deploy", min_relevance=0.0).hits
    assert [h.memory.title for h in hits] == ["Deploy procedure"]
    assert not (waiting / "1-1-abcd.json").exists()


def test_a_record_of_imports_nested_too_deeply_is_named_as_such(tmp_path: Path) -> None:
    # (It read "is not a JSON object" once `StoreLocation.read_json` caught the recursion.)
    brain = _one_fact(tmp_path / "db")
    (tmp_path / "db" / "_octobrain" / import_marks.RECORD).write_text(DEEP)
    with pytest.raises(import_marks.RecordDamaged, match="imports.json is nested too deeply"):
        import_marks.cut_short(brain.store.location)
