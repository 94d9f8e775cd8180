"""Source arguments normalised to one URI, and local-file errors that name the source."""

from __future__ import annotations

import socket
import unicodedata
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge.extract import DocType, extract
from octobrain.knowledge.sources import SourceKind, parse_source, read_file, refuse_directory


def test_sources_normalise_to_one_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text("# Guide\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    uris = {
        parse_source("guide.md", cwd=tmp_path).uri,
        parse_source(str(doc)).uri,
        parse_source("~/guide.md").uri,
        parse_source(doc.as_uri()).uri,
        parse_source(f"file:{doc}").uri,  # (RFC 8089's one slash: read as a relative path)
        parse_source(f"FILE://localhost{doc}").uri,
    }
    assert uris == {doc.resolve().as_uri()}
    url = parse_source("https://Docs.Example.com/api/?v=2#frag")
    assert (url.kind, url.uri) == (SourceKind.URL, "https://docs.example.com/api?v=2")
    assert parse_source("stored://notes-1").kind is SourceKind.STORED
    for bad, field in [
        ("ftp://host/x", "source"),
        ("", "source"),
        ("stored://a b", "key"),
        ("notes\x00.md", "source"),
        ("file:///tmp/notes%00.md", "source"),
        ("file:notes.md", "source"),  # (not ./file:notes.md: a file: URI is absolute)
    ]:
        with pytest.raises(InvalidInput, match=f"^{field}: "):
            parse_source(bad)


def test_a_note_key_refusal_names_the_rule_and_the_character() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_source("stored://plan\u202efdp.exe")  # shown reversed: "planexe.pdf"
    assert str(info.value) == (
        "key: must not contain whitespace or invisible characters (control, format, "
        "private-use or unassigned; found U+202E RIGHT-TO-LEFT OVERRIDE)"
    )
    with pytest.raises(InvalidInput, match=r'\(control, .*; found " "\)$'):
        parse_source("stored://a b")
    # Only combining marks: a key that prints as nothing, or as an accent on what is before it.
    for marks, found in [
        ("\u0301", "U+0301 COMBINING ACUTE ACCENT"),
        ("\u20dd\u0308", "U+0308 COMBINING DIAERESIS, U+20DD COMBINING ENCLOSING CIRCLE"),
    ]:
        with pytest.raises(InvalidInput) as info:
            parse_source(f"stored://{marks}")
        assert str(info.value) == (
            "key: must hold a visible character, not only combining marks or fillers "
            f"(found {found})"
        )
    # Keys with marks on a base, in any script, are keys as before (NFC: "é", not e + U+0301).
    for key in ["e\u0301", "日本語", "مُرَاجَعَة", "नमस्ते", "\u2764\ufe0f", "1\ufe0f\u20e3", "🇺🇦"]:
        assert (
            parse_source(f"stored://{key}").uri == f"stored://{unicodedata.normalize('NFC', key)}"
        )


def test_a_trailing_slash_names_a_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# Notes\n")
    (tmp_path / "docs").mkdir()
    for given in ["notes.md/", f"{tmp_path}/notes.md/", f"{tmp_path.as_uri()}/notes.md/"]:
        with pytest.raises(InvalidInput) as info:
            parse_source(given, cwd=tmp_path)
        assert str(info.value) == (
            f"source: {given} is not a folder (notes.md is a file): give it without the final /"
        )
    with pytest.raises(InvalidInput, match=r"^source: docs/ is a directory; give one file"):
        refuse_directory("docs/", cwd=tmp_path)
    # (a missing one is told when read, as a missing file is)
    assert parse_source("gone.md/", cwd=tmp_path).path == tmp_path / "gone.md"


def test_local_file_errors_name_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInput, match=r"^source: .* is a directory; give one file"):
        read_file(parse_source(str(tmp_path)), 1000)
    with pytest.raises(InvalidInput, match=r"^source: no such file: .*missing\.md"):
        read_file(parse_source(str(tmp_path / "missing.md")), 1000)
    (tmp_path / "a.md").symlink_to(tmp_path / "b.md")
    (tmp_path / "b.md").symlink_to(tmp_path / "a.md")
    with pytest.raises(InvalidInput, match=r"^source: cannot read .*: Too many levels of symbolic"):
        read_file(parse_source(str(tmp_path / "a.md")), 1000)  # a loop, not a swap
    monkeypatch.chdir(tmp_path)  # (a socket's path is bound to about 100 bytes)
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind("sock.md")  # a project may hold one: an agent's, a dev server's
        with pytest.raises(InvalidInput, match=r"^source: .*sock\.md is not a regular file$"):
            read_file(parse_source(str(tmp_path / "sock.md")), 1000)
    big = tmp_path / "big.txt"
    big.write_text("x" * 2000)
    with pytest.raises(
        InvalidInput, match=r"^source: .* over the 1000-byte cap .*max_source_bytes"
    ):
        read_file(parse_source(str(big)), 1000)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InvalidInput, match=r'^source: .* unsupported file type "\.bin"'):
        extract(read_file(parse_source(str(binary)), 10_000), 10_000)
    other = tmp_path / "settings.conf"
    other.write_text("timeout = 30\n")
    assert extract(read_file(parse_source(str(other)), 10_000), 10_000).doc_type is DocType.TEXT
