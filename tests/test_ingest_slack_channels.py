"""`memory ingest` of a Slack export's day files in any of its conversations: a public
channel's, a private channel's (`groups.json`), a group DM's (`mpims.json`) or a DM's
(`dms.json`): mentions of them named, and each turn titled with the channel it was said in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.conversation import read_conversations
from tests.ingest_support import brain, stored

LISTS = {
    "users.json": [
        {"id": "U0ANA", "name": "ana", "profile": {"display_name": "Ana"}},
        {"id": "U0BEN", "name": "ben", "profile": {"display_name": "Ben"}},
    ],
    "channels.json": [{"id": "C0GEN", "name": "general"}],
    "groups.json": [{"id": "G0SEC", "name": "secret-team", "members": ["U0ANA", "U0BEN"]}],
    "mpims.json": [{"id": "G0MP", "name": "mpdm-ana--ben--cy-1", "members": ["U0ANA", "U0CY"]}],
    "dms.json": [{"id": "D0AB", "members": ["U0ANA", "U0BEN"]}],
}


def _export(root: Path, *, lists: tuple[str, ...] = tuple(LISTS)) -> dict[str, Path]:
    """A Slack export under `root`: a day file in each kind of conversation's folder."""
    days = {}
    for folder in ("general", "secret-team", "mpdm-ana--ben--cy-1", "D0AB"):
        day = days[folder] = root / folder / "2024-03-05.json"
        day.parent.mkdir(parents=True, exist_ok=True)
        said = {"type": "message", "user": "U0ANA", "ts": "1709632800.000200"}
        day.write_text(json.dumps([{**said, "text": f"In {folder}: see <#G0SEC> and <#G0MP>"}]))
    for name in lists:
        (root / name).write_text(json.dumps(LISTS[name]))
    return days


def test_a_private_channel_or_group_dm_given_by_id_alone_is_named_from_the_export(
    tmp_path: Path,
) -> None:
    # Before: `<#G0SEC>` (a private channel, listed in groups.json) and `<#G0MP>` (a group DM,
    # in mpims.json) were shown by id: "#G0SEC", "#G0MP".
    day = _export(tmp_path / "export")["general"]
    (chat,) = read_conversations(day)
    assert chat.turns[0].text == "In general: see #secret-team and #mpdm-ana--ben--cy-1"


def test_each_turn_of_a_slack_day_file_is_titled_with_its_channel(tmp_path: Path) -> None:
    # Before: a day file's turns said nothing of where they were said ("Ana, 05 March 2024"),
    # and every channel's day file is stored under its date: "what was said in secret-team"
    # matched no word of it.
    days = _export(tmp_path / "export")
    titles = {folder: read_conversations(day)[0].title for folder, day in days.items()}
    assert titles == {
        "general": "#general",
        "secret-team": "#secret-team",
        "mpdm-ana--ben--cy-1": "Ana, U0CY",  # (a member users.json lacks: by id)
        "D0AB": "Ana, Ben",
    }
    b = brain(tmp_path)
    b.ingest(read_conversations(days["D0AB"]))
    memory = stored(b)["In D0AB: see #secret-team and #mpdm-ana--ben--cy-1"]
    assert memory.title == "Ana, 05 March 2024 — Ana, Ben"


def test_a_slack_day_file_stored_before_its_channel_was_named_is_not_stored_again(
    tmp_path: Path,
) -> None:
    days = _export(tmp_path / "export", lists=("users.json", "channels.json"))
    b = brain(tmp_path)
    assert b.ingest(read_conversations(days["secret-team"])).added == 1
    _export(tmp_path / "export")  # (its groups.json, mpims.json and dms.json now beside)
    again = b.ingest(read_conversations(days["secret-team"]))
    assert (again.added, again.skipped_existing) == (0, 1)


def test_lists_of_another_program_or_broken_are_not_read_as_slack_s(tmp_path: Path) -> None:
    # Another program's groups.json (not Slack's list), or a broken mpims.json, names nothing:
    # the day file is ingested as without them.
    days = _export(tmp_path / "export", lists=("users.json", "channels.json"))
    (tmp_path / "export" / "groups.json").write_text('{"groups": [{"id": "G0SEC"}]}')
    (tmp_path / "export" / "mpims.json").write_text('[{"id": "G0MP", "name": ')
    (tmp_path / "export" / "dms.json").write_bytes(b"\xff not UTF-8")
    (chat,) = read_conversations(days["secret-team"])
    assert (chat.turns[0].text, chat.title) == ("In secret-team: see #G0SEC and #G0MP", "")
    (general,) = read_conversations(days["general"])
    assert general.title == "#general"


def test_a_slack_export_zip_is_refused_saying_what_to_ingest(tmp_path: Path) -> None:
    # Before: the .zip as Slack gives it was refused as "file: is not UTF-8 text (line 1,
    # column 11); save it as UTF-8", which a user cannot act on.
    import zipfile

    days = _export(tmp_path / "export")
    with zipfile.ZipFile(export := tmp_path / "export.zip", "w") as archive:
        archive.write(days["general"], "general/2024-03-05.json")
    with pytest.raises(InvalidInput) as refused:
        read_conversations(export)
    assert str(refused.value).startswith("file: is a zip archive, not a conversation file; unzip")
    assert "<channel>/<YYYY-MM-DD>.json" in str(refused.value)
