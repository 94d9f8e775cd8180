"""A byte of a table's newest version manifest changed on disk inside a column's name
("importance" reads "impnrtance") or the embedding dimension it records ("64" reads "24"):
every command is one line naming the damage or sending the user to `doctor`, which names
the table and the way back; never a traceback, never another model blamed."""

from __future__ import annotations

import json
import logging
import subprocess
import warnings
from datetime import timedelta
from pathlib import Path

import lancedb
import pytest

from tests.reliability.test_storage_faults import EXE, memorize, octobrain, one_clear_line
from tests.server_support import hash_pool


def _flip_in_newest_manifest(
    env: dict[str, str], after: bytes, shift: int, bit: int, table: str = "memories"
) -> None:
    """Flip `bit` of the byte `shift` bytes into the first `after` of `table`'s newest manifest."""
    versions = Path(env["OCTOBRAIN_DATA_DIR"]) / "db" / f"{table}.lance" / "_versions"
    newest = max(versions.glob("*.manifest"), key=lambda f: (f.stat().st_mtime_ns, f.name))
    data = bytearray(newest.read_bytes())
    data[data.index(after) + shift] ^= bit
    newest.write_bytes(bytes(data))


def _index_a_document(env: dict[str, str], tmp_path: Path) -> None:
    """One short Markdown document indexed: the knowledge tables made, with a version."""
    doc = tmp_path / "deploy.md"
    doc.write_text("# Deploy\n\nThe deploy runs on Fridays with a canary.\n")
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0


def _doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([EXE, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_column_renamed_by_a_changed_byte_is_named_and_restored(env: dict[str, str]) -> None:
    # `remember`, `recent` and `memorize` printed LanceDB's ValueError ("No field named
    # importance") as a traceback, and `doctor` its own KeyError.
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    _flip_in_newest_manifest(env, b"importance", 3, 0x01)  # "importance" -> "impnrtance"
    for args in (
        ("recent",),
        ("remember", "durable fact"),
        ("memorize", "-t", "Fact 4", "-c", "x" * 20),
    ):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert "memories: its newest version names column(s) 'impnrtance'" in line, line
        assert "in place of 'importance'" in line and "memory restore" in line, line
    doctor = _doctor(env)
    assert doctor.returncode == 1 and "in place of 'importance'" in doctor.stdout, doctor.stdout
    history = octobrain(env, "history", "--format", "json", scoped=False)
    assert history.returncode == 0, history.stderr
    before = sorted(v["version"] for v in json.loads(history.stdout))[-2]
    assert f"'importance', which version {before} had" in doctor.stdout, doctor.stdout
    assert octobrain(env, "restore", str(before), "--yes", scoped=False).returncode == 0
    assert _doctor(env).returncode == 0
    assert octobrain(env, "recent").returncode == 0


def test_a_renamed_column_kept_in_a_later_version_names_the_version_that_had_it(
    env: dict[str, str],
) -> None:
    # The damaged version restored over itself (a new version, the same names): `doctor`
    # compared the newest with the version just before it only, found them alike, and said
    # no version kept had the column ("restore the store directory from a backup").
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    table = lancedb.connect(Path(env["OCTOBRAIN_DATA_DIR"]) / "db").open_table("memories")
    whole = table.version
    _flip_in_newest_manifest(env, b"importance", 3, 0x01)  # "importance" -> "impnrtance"
    table.checkout(whole)  # (read again: the damaged one)
    table.restore()
    doctor = _doctor(env)
    assert doctor.returncode == 1, doctor.stdout
    assert f"in place of 'importance', which version {whole - 1} had" in doctor.stdout
    assert "no version before this one is kept" not in doctor.stdout, doctor.stdout
    assert octobrain(env, "restore", str(whole - 1), "--yes", scoped=False).returncode == 0
    assert _doctor(env).returncode == 0


def test_the_servers_warm_up_on_a_damaged_store_logs_one_line(
    env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    # The MCP server's background warm-up logged the damage as a Python traceback on stderr,
    # while every tool call answers with the one line.
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    _flip_in_newest_manifest(env, b"importance", 3, 0x01)
    pool = hash_pool(Path(env["OCTOBRAIN_DATA_DIR"]) / "db")
    with caplog.at_level(logging.WARNING, logger="octobrain.server.pool"):
        pool.warm_up("github.com/acme/api", None)
    (record,) = [r for r in caplog.records if "warm-up" in r.getMessage()]
    assert record.exc_info is None and "octobrain doctor" in record.getMessage(), record


def test_a_column_renamed_in_the_only_kept_version_is_named_not_a_traceback(
    env: dict[str, str],
) -> None:
    # With no version before the newest kept (the cleanup removed them) to compare with,
    # `doctor` read the column and printed pyarrow's KeyError ('Field "importance" does not
    # exist in schema') as a traceback; its repair cannot be `memory restore`.
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    _only_the_newest_version(env, "memories")
    _flip_in_newest_manifest(env, b"importance", 3, 0x01)  # "importance" -> "impnrtance"
    doctor = _doctor(env)
    assert doctor.returncode == 1, doctor.stdout
    assert "memories: its newest version has no column 'importance'" in doctor.stdout
    assert "(it names 'impnrtance' instead)" in doctor.stdout
    assert "from a backup" in doctor.stdout and "memory restore" not in doctor.stdout


def _only_the_newest_version(env: dict[str, str], name: str) -> None:
    table = lancedb.connect(Path(env["OCTOBRAIN_DATA_DIR"]) / "db").open_table(name)
    with warnings.catch_warnings():  # (that it drops every version but the newest)
        warnings.simplefilter("ignore", UserWarning)
        table.optimize(cleanup_older_than=timedelta(0))
    assert len(table.list_versions()) == 1


@pytest.mark.parametrize(
    ("table", "column", "changed"),
    [("memories", "last_accessed", "lapt_accessed"), ("memories", "embedding", "emaedding"),
     ("knowledge_chunks", "byte_start", "bywe_start"), ("memories", "checksum", "chfcksum")],
)  # fmt: skip
def test_a_column_no_row_check_reads_renamed_in_the_only_version_is_named(
    env: dict[str, str], tmp_path: Path, table: str, column: str, changed: str
) -> None:
    # `doctor` held the table only to the columns its row checks read: 'ok: nothing is wrong'
    # while every command reading it failed 'a table cannot be read (No field named …)'; and a
    # checksum column renamed was read as a store made before the column: 'ok' too.
    memorize(env, "Fact 0", "Durable fact number 0 about the API.")
    _index_a_document(env, tmp_path)
    _only_the_newest_version(env, table)
    _flip_in_newest_manifest(env, column.encode(), 2, 0x03, table)
    doctor = _doctor(env)
    assert doctor.returncode == 1, doctor.stdout
    assert f"{table}: its newest version has no column {column!r}" in doctor.stdout
    assert f"(it names {changed!r} instead)" in doctor.stdout


def test_a_knowledge_column_renamed_in_the_only_version_is_not_migrated(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `memory migrate` checked the source without the knowledge tables' schemas (`doctor`
    # has them): it copied the damaged table and said "verified".
    _index_a_document(env, tmp_path)
    _only_the_newest_version(env, "knowledge_chunks")
    _flip_in_newest_manifest(env, b"byte_start", 2, 0x03, "knowledge_chunks")
    copy = tmp_path / "copy"
    done = octobrain(env, "migrate", "--to", str(copy), scoped=False)
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = one_clear_line(done.stderr)
    assert "is damaged: knowledge_chunks: its newest version has no column 'byte_start'" in line
    assert "nothing was copied" in line and not list(copy.glob("*.lance")), line


def test_a_recorded_dimension_changed_by_a_byte_is_damage_not_another_model(
    env: dict[str, str],
) -> None:
    # Every command said "embedded with 'hash:64' (dim 24), but the configured model is
    # 'hash:64' (dim 64)", the same model on both sides, and `history` too; `doctor` said ok.
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    _flip_in_newest_manifest(env, b"embedding_dim\x12\x0264", 15, 0x04)  # "64" -> "24"
    done = octobrain(env, "recent")
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert "table 'memories'" in line and "is damaged" in line and "dimension '24'" in line
    assert "memory reembed" in line and "configured model" not in line, line
    doctor = _doctor(env)
    assert doctor.returncode == 1 and "dimension '24' while its vectors hold 64" in doctor.stdout
    assert octobrain(env, "reembed", scoped=False).returncode == 0
    assert _doctor(env).returncode == 0
    assert octobrain(env, "recent").returncode == 0


def test_a_chunks_recorded_dimension_changed_by_a_byte_is_damage_not_another_model(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `knowledge search` said "embedded with 'hash:64' (dim 24) … delete its sources … and
    # index them again": deleting and indexing fail on the same check, only `doctor` named it.
    _index_a_document(env, tmp_path)
    _flip_in_newest_manifest(env, b"embedding_dim\x12\x0264", 15, 0x04, "knowledge_chunks")
    done = octobrain(env, "search", "deploy", group="knowledge")
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert "table 'knowledge_chunks'" in line and "is damaged" in line, line
    assert "dimension '24'" in line and "--recreate knowledge" in line, line
    assert "configured model" not in line and "delete-source" not in line, line
    recreated = subprocess.run(
        [EXE, "doctor", "--recreate", "knowledge"], env=env, capture_output=True, text=True
    )
    assert recreated.returncode == 0, recreated.stdout
    assert octobrain(env, "index", str(tmp_path / "deploy.md"), group="knowledge").returncode == 0
    assert "Deploy" in octobrain(env, "search", "deploy", group="knowledge").stdout


@pytest.mark.parametrize(
    ("table", "column"), [("memories", "checksum"), ("knowledge_chunks", "checksum")]
)
def test_a_write_after_the_checksum_column_was_renamed_is_refused(
    env: dict[str, str], tmp_path: Path, table: str, column: str
) -> None:
    # The next write took the table for one made before the column: it added a fresh
    # `checksum` column and stamped every row as it read then, damaged ones included, and
    # `doctor` said ok from then on, the stray 'chfcksum' column left in the table.
    memorize(env, "Fact 0", "Durable fact number 0 about the API.")
    _index_a_document(env, tmp_path)
    _only_the_newest_version(env, table)
    _flip_in_newest_manifest(env, column.encode(), 2, 0x03, table)
    before = lancedb.connect(Path(env["OCTOBRAIN_DATA_DIR"]) / "db").open_table(table).version
    if table == "memories":
        done = octobrain(env, "memorize", "-t", "Fact 1", "-c", "Another durable fact here.")
    else:
        (tmp_path / "more.md").write_text("# More\n\nAnother document about releases.\n")
        done = octobrain(env, "index", str(tmp_path / "more.md"), group="knowledge")
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = one_clear_line(done.stderr)
    assert f"{table}" in line and "no column 'checksum'" in line, line
    assert "'chfcksum'" in line and "octobrain doctor" in line, line
    after = lancedb.connect(Path(env["OCTOBRAIN_DATA_DIR"]) / "db").open_table(table)
    assert after.version == before and "checksum" not in after.schema.names
    assert _doctor(env).returncode == 1
