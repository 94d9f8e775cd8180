"""What the knowledge commands do about rows that no longer match their checksums
(`schema.chunk_verified`, `schema.source_verified`) besides refusing to show them: indexing
repairs them, `doctor` counts them, `stats` never shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from octobrain.store import schema
from tests.reliability.damage_support import run_cli
from tests.reliability.row_checksums_support import _flip_chunks, _indexed
from tests.reliability.test_storage_faults import octobrain, one_clear_line


@pytest.mark.parametrize("table", ["knowledge_chunks", "knowledge_sources"])
def test_indexing_an_unchanged_source_again_repairs_its_damaged_rows(
    env: dict[str, str], tmp_path: Path, table: str
) -> None:
    # A bit flipped in a stored chunk (or the source row's text): a plain `knowledge index`
    # of the unchanged file answered "Cached … (content unchanged)" and left the damage, with
    # `doctor` failing on after it.
    doc = _indexed(env, tmp_path, "api", 8440)
    _indexed(env, tmp_path, "cache", 6370)
    assert _flip_chunks(env, b"port 8440", table) >= 1
    assert run_cli(env, "doctor")[0] == 1
    done = octobrain(env, "index", str(doc), group="knowledge")
    assert done.returncode == 0, done.stderr
    assert "Re-indexed" in done.stdout and "no longer matched their checksum" in done.stdout
    assert run_cli(env, "doctor")[0] == 0
    for args in (("search", "which port does the api service listen on"), ("match", "port 8")):
        found = octobrain(env, *args, group="knowledge")
        assert found.returncode == 0 and "8440" in found.stdout, found.stderr
    as_json = octobrain(env, "index", str(doc), "--format", "json", group="knowledge")
    assert json.loads(as_json.stdout)["status"] == "unchanged"  # sound now: left as it is
    cached = octobrain(env, "index", str(tmp_path / "cache.md"), group="knowledge")
    assert "content unchanged" in cached.stdout, cached.stdout


def test_doctor_says_how_many_more_sources_have_damaged_chunks(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Damaged chunks of seven sources: `doctor` named five and said nothing of the other two
    # (the chunk count was right), as though re-indexing those five were the whole repair.
    names = ["api", "cache", "queue", "web", "worker", "billing", "search"]
    for name in names:
        _indexed(env, tmp_path, name, 8440)
    assert _flip_chunks(env, b"port 8440") == len(names)
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    [problem] = report["problems"]
    assert rc == 1 and problem["table"] == "knowledge_chunks", problem
    assert problem["problem"].startswith("7 chunks (of "), problem
    assert "(and 2 more sources)" in problem["problem"], problem
    [chunks] = [t for t in report["tables"] if t["name"] == "knowledge_chunks"]
    assert len(chunks["garbled"]) == 5 and chunks["garbled_of"] == len(names), chunks
    rc, text, err = run_cli(env, "doctor")
    assert rc == 1 and "(and 2 more sources)" in text + err, text + err


def test_knowledge_stats_counts_a_damaged_source_as_damaged_not_as_its_type(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A bit flipped in a source row's type: `knowledge stats` counted it as "texu", the value
    # as it read back, beside the sound ones, exit 0; then counted it as damaged and still
    # exited 0, saying nothing, where `memory stats` names a damaged memory and exits 1.
    _indexed(env, tmp_path, "cache", 6370)
    doc = tmp_path / "api.txt"
    doc.write_text("Ports\n\nThe api service listens on port 8440.\n")
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    # The type column's value after its offsets ("text" alone is a column name too).
    assert _flip_chunks(env, b"\x04\x00\x00\x00text", "knowledge_sources") == 1  # "texu"
    done = octobrain(env, "stats", "--format", "json", group="knowledge")
    assert done.returncode == 1, done.stderr
    stats = json.loads(done.stdout)
    assert stats["by_type"] == {"markdown": 1, schema.DAMAGED_TITLE: 1}, stats
    assert stats["sources"] == 2 and stats["chunks"] == 2, stats
    assert stats["damaged"] == 1 and len(stats["damaged_ids"]) == 1, stats
    line = one_clear_line(done.stderr)
    assert f"source {stats['damaged_ids'][0]} no longer matches the checksum" in line, line
    assert "'knowledge_sources' is damaged" in line and "octobrain doctor" in line, line
    shown = octobrain(env, "stats", group="knowledge")
    assert shown.returncode == 1 and "texu" not in shown.stdout, shown.stdout
    assert f"{schema.DAMAGED_TITLE} 1" in shown.stdout, shown.stdout
