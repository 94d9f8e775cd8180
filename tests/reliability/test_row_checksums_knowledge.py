"""Knowledge rows carry checksums as memory rows do: a bit flipped in a chunk, a source's text or
title, or a stored note is named, not shown; an old index gains checksums with its first write."""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import pytest

from octobrain.store import schema
from tests.reliability.damage_support import run_cli, store_dir
from tests.reliability.row_checksums_support import _flip_chunks, _indexed
from tests.reliability.test_storage_faults import octobrain, one_clear_line


def test_a_bit_flipped_in_a_knowledge_chunk_is_named_not_shown(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A chunk's text flipped on disk read back as other valid text: `knowledge search` showed
    # "port 8441" where the document says 8440, and `doctor` said ok.
    doc = _indexed(env, tmp_path, "api", 8440)
    cache = _indexed(env, tmp_path, "cache", 6370)
    assert _flip_chunks(env, b"port 8440") >= 1
    done = octobrain(env, "search", "which port does the api service listen on", group="knowledge")
    assert done.returncode == 1 and "8441" not in done.stdout, done.stdout
    line = one_clear_line(done.stderr)
    assert "'knowledge_chunks' is damaged" in line and doc.name in line, line
    assert "no longer matches the checksum" in line and "octobrain doctor" in line, line
    other = ("search", "which port does the cache service listen on", "--source", str(cache))
    found = octobrain(env, *other, group="knowledge")  # another source is served
    assert found.returncode == 0 and "6370" in found.stdout, found.stderr
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and not report["ok"]
    [problem] = report["problems"]
    assert problem["table"] == "knowledge_chunks" and doc.name in problem["problem"], problem
    assert "knowledge index --force" in problem["repair"], problem
    [chunks] = [t for t in report["tables"] if t["name"] == "knowledge_chunks"]
    assert chunks["garbled_rows"] >= 1 and len(chunks["garbled"]) == 1

    # The repair doctor names: the source indexed again, its damaged chunks dropped.
    again = octobrain(env, "index", "--force", str(doc), group="knowledge")
    assert again.returncode == 0, again.stderr
    assert run_cli(env, "doctor")[0] == 0
    done = octobrain(env, "search", "which port does the api service listen on", group="knowledge")
    assert done.returncode == 0 and "8440" in done.stdout, done.stderr


def test_an_old_knowledge_index_gains_chunk_checksums_with_its_first_write(
    env: dict[str, str], tmp_path: Path
) -> None:
    # An index made before the column: searches take its chunks unchecked; the first write
    # adds the column and stamps every chunk as it then is, after which a flip is named.
    _indexed(env, tmp_path, "api", 8440)
    for name in ("knowledge_chunks", "knowledge_sources"):
        lancedb.connect(store_dir(env)).open_table(name).drop_columns([schema.CHECKSUM])
    found = octobrain(env, "search", "which port does the api service listen on", group="knowledge")
    assert found.returncode == 0 and "8440" in found.stdout, found.stderr
    assert run_cli(env, "doctor")[0] == 0
    _indexed(env, tmp_path, "cache", 6370)
    rows = lancedb.connect(store_dir(env)).open_table("knowledge_chunks").to_arrow().to_pylist()
    assert len(rows) >= 2 and all(schema.chunk_verified(r) is True for r in rows)
    sources = lancedb.connect(store_dir(env)).open_table("knowledge_sources").to_arrow()
    assert all(schema.source_verified(r) is True for r in sources.to_pylist())
    assert _flip_chunks(env, b"port 8440") >= 1
    done = octobrain(env, "search", "which port does the api service listen on", group="knowledge")
    assert done.returncode == 1 and "no longer matches the checksum" in done.stderr
    assert run_cli(env, "doctor")[0] == 1


def test_a_bit_flipped_in_a_knowledge_source_s_text_is_named_not_shown(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `knowledge match` and `read` of a note show a source's extracted text, kept in the
    # `knowledge_sources` table: flipped there, `match` showed "port 8441" on line 3 and
    # `doctor` said ok.
    doc = _indexed(env, tmp_path, "api", 8440)
    cache = _indexed(env, tmp_path, "cache", 6370)
    assert _flip_chunks(env, b"port 8440", "knowledge_sources")
    done = octobrain(env, "match", "port 844", group="knowledge")
    assert done.returncode == 1 and "8441" not in done.stdout, done.stdout
    line = one_clear_line(done.stderr)
    assert "'knowledge_sources' is damaged" in line and doc.name in line, line
    assert "no longer matches the checksum" in line and "octobrain doctor" in line, line
    found = octobrain(env, "match", "port", "--source", str(cache), group="knowledge")
    assert found.returncode == 0 and "6370" in found.stdout, found.stderr
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    [problem] = json.loads(out)["problems"]
    assert rc == 1 and problem["table"] == "knowledge_sources", problem
    assert doc.name in problem["problem"] and "knowledge index --force" in problem["repair"]
    assert octobrain(env, "index", "--force", str(doc), group="knowledge").returncode == 0
    assert run_cli(env, "doctor")[0] == 0
    done = octobrain(env, "match", "port 844", group="knowledge")
    assert done.returncode == 0 and "8440" in done.stdout, done.stderr


def test_a_bit_flipped_in_a_stored_note_is_named_not_read(env: dict[str, str]) -> None:
    note = ("store", "plan", "Ship the migration after freeze 8440.")
    assert octobrain(env, *note, group="knowledge").returncode == 0
    assert _flip_chunks(env, b"freeze 8440", "knowledge_sources")
    done = octobrain(env, "read", "stored://plan", group="knowledge")
    assert done.returncode == 1 and "8441" not in done.stdout, done.stdout
    line = one_clear_line(done.stderr)
    assert "'knowledge_sources' is damaged" in line and "stored://plan" in line, line


def test_a_bit_flipped_in_a_source_s_title_is_named_not_listed(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `knowledge list` shows each source's title from its row, which the row's checksum
    # covers: flipped there, the listing showed "Ports 8441" where the document says 8440.
    doc = tmp_path / "api.md"
    doc.write_text("# Ports 8440\n\nThe api service listens on port 8440.\n")
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    _indexed(env, tmp_path, "cache", 6370)
    assert _flip_chunks(env, b"Ports 8440", "knowledge_sources")
    for fmt in ("text", "json"):
        done = octobrain(env, "list", "--format", fmt, group="knowledge")
        assert done.returncode == 1 and "8441" not in done.stdout, done.stdout
        line = one_clear_line(done.stderr)
        assert "'knowledge_sources' is damaged" in line and doc.name in line, line
        assert "no longer matches the checksum" in line and "octobrain doctor" in line, line
    assert octobrain(env, "index", "--force", str(doc), group="knowledge").returncode == 0
    done = octobrain(env, "list", group="knowledge")
    assert done.returncode == 0 and "Ports 8440" in done.stdout and "cache" in done.stdout


@pytest.mark.parametrize("table", ["knowledge_chunks", "knowledge_sources"])
def test_indexing_again_repairs_a_row_whose_source_id_changed(
    env: dict[str, str], tmp_path: Path, table: str
) -> None:
    # A bit flipped in a chunk's source id (or a source's own id) makes the row read as
    # another source's: `doctor` named it and `knowledge index --force` as the repair, which
    # left it there (it deletes by id), and `doctor` kept failing after it, and after
    # `delete-source` and an index too.
    doc = _indexed(env, tmp_path, "api", 8440)
    _indexed(env, tmp_path, "cache", 6370)
    sources = lancedb.connect(store_dir(env)).open_table("knowledge_sources").to_arrow()
    [sid] = [r["id"] for r in sources.to_pylist() if r["uri"].endswith(doc.name)]
    assert _flip_chunks(env, sid.encode(), table) == 1
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    [problem] = json.loads(out)["problems"]
    assert rc == 1 and problem["table"] == table and doc.name in problem["problem"], problem
    assert octobrain(env, "index", "--force", str(doc), group="knowledge").returncode == 0
    assert run_cli(env, "doctor")[0] == 0
    for args in (("search", "which port does the api service listen on"), ("match", "port 8")):
        done = octobrain(env, *args, group="knowledge")
        assert done.returncode == 0 and "8440" in done.stdout and "8441" not in done.stdout
    assert "6370" in octobrain(env, "match", "port 6", group="knowledge").stdout


def test_a_checksum_migration_cut_short_is_finished_by_the_next_write(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The first knowledge write after the upgrade adds the column (one commit), then stamps
    # every row (another, reading every text). Interrupted between the two (Ctrl-C, a kill),
    # the column was there and the stamping never ran again: those rows read unchecked for
    # good, `knowledge search` and `match` showed "port 8441" and `doctor` said ok.
    doc = _indexed(env, tmp_path, "api", 8440)
    for name in ("knowledge_chunks", "knowledge_sources"):
        table = lancedb.connect(store_dir(env)).open_table(name)
        table.drop_columns([schema.CHECKSUM])
        table.add_columns([schema.CHECKSUM_FIELD])  # the first commit, the second never made
    _indexed(env, tmp_path, "cache", 6370)
    assert _flip_chunks(env, b"port 8440") and _flip_chunks(env, b"port 8440", "knowledge_sources")
    for args in (("search", "which port does the api service listen on"), ("match", "port 8")):
        done = octobrain(env, *args, group="knowledge")
        assert done.returncode == 1 and "8441" not in done.stdout, done.stdout
        assert doc.name in one_clear_line(done.stderr)
    assert run_cli(env, "doctor")[0] == 1
