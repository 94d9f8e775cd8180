"""`memory ingest EXPORT` of a Slack export whole: its folder (or one channel's) or its .zip,
each channel one conversation of its day files in date order; bounded, symlinks not followed,
a zip read in memory."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory import slack_export
from octobrain.memory.conversation import read_conversations
from octobrain.memory.slack_export import read_export
from tests.cli_memory_support import memory_env, run
from tests.ingest_support import brain, stored

__all__ = ["memory_env"]

USERS = [{"id": "U0ANA", "name": "ana", "profile": {"display_name": "Ana"}}]
CHANNELS = [{"id": "C0GEN", "name": "general"}, {"id": "C0RND", "name": "random"}]
DAYS = {"2024-03-05": 1709632800, "2024-03-06": 1709719200}  # (10:00 UTC each)


def _export(root: Path) -> Path:
    """A Slack export under `root`: #general and #random, two days each, two messages a day;
    the later day written first (the order read is the dates')."""
    for channel in ("random", "general"):
        for day, ts in reversed(DAYS.items()):
            messages = [
                {"type": "message", "user": "U0ANA", "ts": f"{ts + 60 * i}.000100",
                 "text": f"{channel} {day} message {i}"}
                for i in range(2)
            ]  # fmt: skip
            (root / channel).mkdir(parents=True, exist_ok=True)
            (root / channel / f"{day}.json").write_text(json.dumps(messages))
    (root / "users.json").write_text(json.dumps(USERS))
    (root / "channels.json").write_text(json.dumps(CHANNELS))
    return root


def _texts(export: slack_export.SlackExport) -> dict[str, list[tuple[str, str]]]:
    return {
        c.key: [(t.session, t.text) for t in c.turns] for c in export.conversations
    }  # fmt: skip


def test_an_export_folder_is_a_conversation_per_channel_in_date_order(tmp_path: Path) -> None:
    # Before: `memory ingest EXPORT_DIR` was refused ("is a directory"); each day file ingested
    # alone was a conversation named by its date, general's and random's 2024-03-05 one.
    export = read_export(_export(tmp_path / "export"))
    assert _texts(export) == {
        channel: [
            ("1", f"{channel} 2024-03-05 message 0"),
            ("1", f"{channel} 2024-03-05 message 1"),
            ("2", f"{channel} 2024-03-06 message 0"),  # (a day's silence: a new session)
            ("2", f"{channel} 2024-03-06 message 1"),
        ]
        for channel in ("general", "random")
    }
    assert [c.title for c in export.conversations] == ["#general", "#random"]
    assert export.skipped == 0
    b = brain(tmp_path)
    report = b.ingest(export.conversations)
    assert (report.conversations, report.added) == (2, 8)
    memory = stored(b)["random 2024-03-06 message 1"]
    assert memory.title == "Ana, 06 March 2024 — #random"
    assert "conversation:random" in memory.tags
    # One channel's folder: that channel alone, named so.
    (general,) = read_export(tmp_path / "export" / "general").conversations
    assert (general.key, general.title, len(general.turns)) == ("general", "#general", 4)


def test_the_cli_ingests_an_export_and_again_adds_nothing(
    tmp_path: Path, memory_env: dict[str, str]
) -> None:
    root = _export(tmp_path / "export")
    (root / "README.txt").write_text("not a day file")
    (root / "general" / "notes.json").write_text("[]")
    (root / "general" / "2024-3-7.json").write_text("[]")
    (root / "general" / "files").mkdir()
    first = run("ingest", str(root))
    assert first.exit_code == 0, first.output
    assert "ingested 8 turns of 2 conversations" in first.output
    assert "8 added, 0 already present" in first.output
    assert (
        "4 other files (not a channel's day file, <channel>/<YYYY-MM-DD>.json) skipped"
        in first.output
    )
    again = run("ingest", str(root), "--format", "json")
    assert again.exit_code == 0, again.output
    reply = json.loads(again.stdout)
    assert (reply["added"], reply["skipped_existing"], reply["files_skipped"]) == (0, 8, 4)
    named = run("ingest", str(root), "--conversation", "x")
    assert named.exit_code == 2 and "conversation: names one conversation" in named.output


def test_turns_stored_under_their_day_file_s_name_are_already_present(tmp_path: Path) -> None:
    # Each day file was its own conversation, named by its date: its turns are the same
    # turns now they are its channel's (none stored twice).
    root = _export(tmp_path / "export")
    b = brain(tmp_path)
    day = root / "general" / "2024-03-05.json"
    (read,) = read_conversations(day)
    assert read.key == "general"  # (a day file alone: its channel's conversation too)
    old = replace(read, key="2024-03-05", turns=[replace(t, earlier="") for t in read.turns])
    assert b.ingest([old]).added == 2  # (as the version before stored it)
    report = b.ingest(read_export(root).conversations)
    assert (report.added, report.skipped_existing) == (6, 2)
    again = b.ingest(read_conversations(root / "random" / "2024-03-06.json"))
    assert (again.added, again.skipped_existing) == (0, 2)
    assert len(stored(b)) == 8


def test_a_symlink_out_of_the_export_is_not_followed(tmp_path: Path) -> None:
    root = _export(tmp_path / "export")
    outside = _export(tmp_path / "elsewhere")
    (root / "leak").symlink_to(outside / "general")
    os.symlink(outside / "random" / "2024-03-05.json", root / "general" / "2024-03-07.json")
    export = read_export(root)
    assert [len(c.turns) for c in export.conversations] == [4, 4]
    assert export.skipped == 2


def test_an_export_past_the_limit_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _export(tmp_path / "export")
    each = max(p.stat().st_size for p in root.rglob("*.json"))
    monkeypatch.setattr(slack_export, "MAX_FILE_BYTES", each * 3)  # (each file fits alone)
    with pytest.raises(InvalidInput, match=r"must hold at most 0 MiB in all \(its lists and"):
        read_export(root)


def _zipped(root: Path, into: Path, *extra: tuple[str, bytes]) -> Path:
    with zipfile.ZipFile(into, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*.json")):
            archive.write(path, path.relative_to(root).as_posix())
        for name, data in extra:
            archive.writestr(name, data)
    return into


def test_an_export_s_zip_is_read_as_its_folder(tmp_path: Path) -> None:
    # Before: refused, "is a zip archive, not a conversation file; unzip it and ingest its
    # conversation files one at a time".
    root = _export(tmp_path / "export")
    export = read_export(_zipped(root, tmp_path / "export.zip"))
    assert _texts(export) == _texts(read_export(root))
    assert [c.title for c in export.conversations] == ["#general", "#random"]


def test_a_zip_listing_more_files_than_an_export_holds_is_refused_before_it_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A zip of 1,000,000 entries (a few bytes each) was listed whole: 18 s and 602 MB, then
    # "holds no Slack export's day files"; now refused in 0.1 s, naming the bound.
    root = _export(tmp_path / "export")
    junk = [(f"junk/{i}", b"") for i in range(40)]
    archive = _zipped(root, tmp_path / "export.zip", *junk)
    assert len(read_export(archive).conversations) == 2  # (under the bound: read)
    monkeypatch.setattr(slack_export, "ZIP_FILES", 40)

    def never(*_: object) -> None:
        raise AssertionError("the zip's directory was read")

    monkeypatch.setattr(slack_export.zipfile, "ZipFile", never)
    with pytest.raises(InvalidInput, match="zip must list at most 40 files; this one lists more"):
        read_export(archive)


def test_a_zip_s_member_outside_it_is_never_read_or_written(tmp_path: Path) -> None:
    root = _export(tmp_path / "export")
    bad = json.dumps([{"type": "message", "user": "U0ANA", "ts": "1709632800.1", "text": "evil"}])
    members = [("../evil/2024-03-05.json", bad.encode()), ("/abs/2024-03-05.json", bad.encode())]
    (tmp_path / "work").mkdir()
    archive = _zipped(root, tmp_path / "work" / "export.zip", *members)
    export = read_export(archive)
    assert export.skipped == 2
    assert sorted(c.key for c in export.conversations) == ["general", "random"]
    assert not any("evil" in t.text for c in export.conversations for t in c.turns)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "work" / "evil").exists()


def test_a_zip_bomb_stops_at_the_limit(tmp_path: Path) -> None:
    root = _export(tmp_path / "export")
    bomb = ("general/2024-03-07.json", b"[" + b" " * (65 << 20) + b"]")  # (65 KiB zipped)
    archive = _zipped(root, tmp_path / "bomb.zip", bomb)
    assert archive.stat().st_size < 1 << 20
    with pytest.raises(InvalidInput, match="must hold at most 64 MiB in all"):
        read_export(archive)
    # Its header saying less than it holds: read up to what it says, and refused.
    lying = bytearray(_zipped(root, tmp_path / "lying.zip", (bomb[0], b"[" + b" " * 5000 + b"]"))
                      .read_bytes())  # fmt: skip
    for signature, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = lying.rfind(signature)  # (the last member's local and central headers)
        lying[start + at : start + at + 4] = (10).to_bytes(4, "little")
    (tmp_path / "lying.zip").write_bytes(lying)
    with pytest.raises(InvalidInput, match="general/2024-03-07.json: "):
        read_export(tmp_path / "lying.zip")


def test_an_export_inside_one_more_folder_is_read_as_its_root(tmp_path: Path) -> None:
    # Before: the export's folder zipped again (or by macOS's Compress: `Export/general/…json`
    # and `__MACOSX/…`), or the folder holding the unzipped one, was refused: "holds no Slack
    # export's day files (<channel>/<YYYY-MM-DD>.json)".
    root = _export(tmp_path / "outer" / "Export")
    (tmp_path / "outer" / "notes.txt").write_text("not the export")
    expected = _texts(read_export(root))
    wrapped = read_export(tmp_path / "outer")
    assert (_texts(wrapped), wrapped.skipped) == (expected, 1)
    assert [c.title for c in wrapped.conversations] == ["#general", "#random"]  # (its lists)
    macos = ("__MACOSX/Export/general/._2024-03-05.json", b"\x00\x05\x16\x07")
    archive = _zipped(tmp_path / "outer", tmp_path / "Export.zip", macos)
    zipped = read_export(archive)
    assert (_texts(zipped), zipped.skipped) == (expected, 1)
    assert [c.title for c in zipped.conversations] == ["#general", "#random"]
    # One level, not any depth; and not where two folders each hold an export.
    _export(tmp_path / "deeper" / "a" / "Export")
    for each in ("a", "b"):
        _export(tmp_path / "two" / each)
    for refused in (tmp_path / "deeper", _zipped(tmp_path / "deeper", tmp_path / "deeper.zip")):
        with pytest.raises(InvalidInput, match="holds no Slack export's day files"):
            read_export(refused)
    with pytest.raises(InvalidInput, match="holds no Slack export's day files"):
        read_export(tmp_path / "two")


def _patched(archive: Path, old: bytes, new: bytes, count: int = -1) -> Path:
    archive.write_bytes(archive.read_bytes().replace(old, new, count))
    return archive


def test_a_broken_zip_is_refused_naming_the_member(tmp_path: Path) -> None:
    # Before: a traceback (OSError, LZMAError, UnicodeDecodeError, IndexError) for each.
    root = _export(tmp_path / "export")
    day, name = b'[{"text": "broken"}]' * 50, "general/2024-03-07.json"
    for method, what in ((zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "lzma")):
        with zipfile.ZipFile(archive := tmp_path / f"{what}.zip", "w", method) as writer:
            writer.writestr(name, day)
        raw = bytearray(archive.read_bytes())
        for at in range(30 + len(name) + 4, 30 + len(name) + 40):  # (its data, past the header)
            raw[at] ^= 0x5A
        archive.write_bytes(raw)
        with pytest.raises(InvalidInput, match=f"^{name}: cannot be read from the zip archive"):
            read_export(archive)
    named = _zipped(root, tmp_path / "named.zip", ("r\u00e9sum\u00e9/2024-03-05.json", b"[]"))
    utf8 = ("r\u00e9sum\u00e9".encode(), b"r\xff\xfesum\xff\xfe")  # (not UTF-8, flagged so)
    flagged = _patched(named, *utf8)
    with pytest.raises(InvalidInput, match="^file: is not a zip archive that can be read: 'utf"):
        read_export(flagged)
    local = _zipped(root, tmp_path / "local.zip", ("r\u00e9sum\u00e9/2024-03-05.json", b"[]"))
    _patched(local, *utf8, 1)  # (its local header only)
    with pytest.raises(InvalidInput, match="^r\u00e9sum\u00e9/2024-03-05.json: cannot be read"):
        read_export(local)
    nameless = _zipped(root, tmp_path / "nameless.zip", ("NUL.", b"[]"))
    _patched(nameless, b"NUL.", b"\x00UL.")
    assert read_export(nameless).skipped == 1  # (a member named "" by its NUL: not read)
    with zipfile.ZipFile(tmp_path / "locked.zip", "w") as writer:
        writer.writestr("general/2024-03-05.json", day)
    locked = bytearray((tmp_path / "locked.zip").read_bytes())
    for signature, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # (its flag: encrypted)
        locked[locked.find(signature) + at] |= 1
    (tmp_path / "locked.zip").write_bytes(locked)
    with pytest.raises(InvalidInput, match="2024-03-05.json: is encrypted: unzip the archive"):
        read_export(tmp_path / "locked.zip")


def test_a_zip_s_day_file_twice_is_refused(tmp_path: Path) -> None:
    # Before: the later read twice, the first never (a NUL cut from a name: the same).
    root = _export(tmp_path / "export")
    later = b'[{"type": "message", "user": "U0ANA", "ts": "1709632800.1", "text": "later"}]'
    for name in ("general/2024-03-05.json", "general/2024-03-05.json\x00.txt"):
        with pytest.warns(UserWarning, match="Duplicate name"):
            archive = _zipped(root, tmp_path / "twice.zip", (name, later))
        with pytest.raises(InvalidInput, match="^general/2024-03-05.json: is in the zip archive"):
            read_export(archive)
    assert read_export(_zipped(root, tmp_path / "once.zip", ("notes/a.txt", b""))).skipped == 1


def test_a_zip_s_names_are_read_as_its_maker_wrote_them(tmp_path: Path) -> None:
    # Before: `general\2024-03-05.json` (Windows's tools) skipped, an export of them refused
    # ("holds no Slack export's day files"); `café/…` unflagged UTF-8 (macOS) stored under
    # `caf├⌐`; a symlink member read as a day file of its target's name (refused: "must be a
    # Slack day file").
    root = _export(tmp_path / "export")
    (root / "caf\u00e9").mkdir()
    (root / "general" / "2024-03-05.json").rename(root / "caf\u00e9" / "2024-03-05.json")
    expected = _texts(read_export(root))
    windows = _zipped(root, tmp_path / "windows.zip")
    _patched(windows, b"general/", b"general\\")
    assert _texts(read_export(windows)) == expected
    macos = _zipped(root, tmp_path / "macos.zip")
    raw = bytearray(macos.read_bytes())
    for signature, at in ((b"PK\x03\x04", 7), (b"PK\x01\x02", 9)):  # (its UTF-8 flag: off)
        start = raw.find(signature)
        while start >= 0:
            raw[start + at] &= ~0x08
            start = raw.find(signature, start + 1)
    macos.write_bytes(raw)
    assert _texts(read_export(macos)) == expected
    link = zipfile.ZipInfo("random/2024-03-07.json")
    link.create_system, link.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(_zipped(root, tmp_path / "link.zip"), "a") as archive:
        archive.writestr(link, "../../etc/passwd")
    linked = read_export(tmp_path / "link.zip")
    assert (_texts(linked), linked.skipped) == (expected, 1)
