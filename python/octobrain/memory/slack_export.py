"""A Slack export ingested whole (`memory ingest EXPORT`): its folder, one channel's folder,
or the .zip Slack gives.

Each channel is one conversation, named by its folder (`general`; a DM's, its id), its day
files (`<channel>/<YYYY-MM-DD>.json`) read in date order as one chat, split into sessions by
silence as any chat without session marks is. Each day file was a conversation of its own
before (named by its date): a turn stored so is the same turn (`Turn.earlier`).

The export is bounded as one file is (`MAX_FILE_BYTES`, all its lists and day files read
together); a folder is read without following a symlink; a zip is read in memory, never
extracted, the files it lists counted before its directory is read (`ZIP_FILES`), its
sizes checked from its headers and again as it is read; its names read as
their maker wrote them (`\\` a separator, UTF-8 unflagged), a symlink in it not read, a day
file or list in it twice refused.
"""

from __future__ import annotations

import lzma
import os
import re
import stat
import zipfile
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from octobrain.errors import InvalidInput, cut_middle
from octobrain.files import TooLarge, named_by, read_regular
from octobrain.json_values import UnreadableJSON, array_values, bounds
from octobrain.memory.conversation_bytes import MAX_FILE_BYTES, decoded
from octobrain.memory.conversation_parse import chat_turns
from octobrain.memory.slack_users import CONVERSATION_FILES, USERS_FILE, export_lists
from octobrain.memory.turn_fields import conversation_name, same_name
from octobrain.memory.turns import Conversation, Read, Reread, Turn, streamed

__all__ = ["DAY_FILE", "SlackExport", "by_channel", "is_export", "read_export"]

DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.json")  # a channel's day, as Slack names its file
_LISTS = (USERS_FILE, *CONVERSATION_FILES)
# The most files a zip may list. A day file takes 200 bytes of a zip or more (its name twice,
# its headers, one message), so `MAX_FILE_BYTES` holds fewer than 340,000; a zip listing more
# is refused before its directory is read: 1,000,000 entries (names of a few bytes, one file's
# data) took 18 s and 602 MB to list.
ZIP_FILES = 300_000
_LISTED = b"PK\x01\x02"  # what starts each file's entry in a zip's central directory
# A zip member's general purpose flags: its data encrypted, its name UTF-8.
_ENCRYPTED, _UTF8_FLAG = 0x1, 0x800


@dataclass
class SlackExport:
    """What `read_export` read: a conversation per channel, and how many files it skipped."""

    conversations: list[Conversation]
    skipped: int  # files (and folders) that are neither a day file nor one of its lists


def is_export(path: str | Path) -> bool:
    """Whether `memory ingest` reads `path` as a whole export: a folder, or a zip archive."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            return True
        if not stat.S_ISREG(mode):  # (a FIFO, a device: never opened here)
            return False
        with open(path, "rb") as handle:
            return handle.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def read_export(path: str | Path) -> SlackExport:
    """The conversations of the Slack export at `path` (a folder, its root or one channel's,
    or its .zip; its root may be the one folder in it, as zipping the unzipped folder again
    gives): one per channel, in the order of their names."""
    path = Path(path)
    try:
        source = _Folder(path) if path.is_dir() else _Zip(path)
    except OSError as exc:  # (a folder in it that cannot be listed)
        raise InvalidInput(
            "file", f"{exc.filename or path} cannot be read: {exc.strerror}"
        ) from None
    with source:
        days: dict[str, list[tuple[str, str]]] = {}  # channel → (where, its text), by date
        for channel, name in source.days:
            where = source.wrapper + (f"{channel}/{name}" if channel else name)
            days.setdefault(channel or source.channel, []).append((where, source.text(where)))
        names, titles = export_lists(source.listed)  # (a list not read: said)
    if not days:
        raise InvalidInput(
            "file",
            f"{path} holds no Slack export's day files (<channel>/<YYYY-MM-DD>.json); name a "
            "conversation file, a Slack export's folder or its .zip",
        )
    conversations = []
    for channel in sorted(days):
        key = conversation_name("conversation", channel)
        title = titles.get(same_name(channel), "")
        read = sorted(days[channel], key=lambda day: day[0])
        made = streamed(_reads(read, names), key)
        conversations.append(replace(made, title=title))
    return SlackExport(conversations, source.skipped)


def by_channel(
    conversations: list[Conversation], file: Path, stem: str, channel: str, export: bool
) -> list[Conversation]:
    """The `conversations` read from `file` (`stem` its name without `.json`) titled with
    its `channel`; when that is a Slack export's day file (`export`: found beside its lists;
    stored under its date before), its channel's conversation, named by the folder `file` is
    in, as `read_export` reads it."""
    titled = [replace(c, title=c.title or channel) for c in conversations]
    day = export and DAY_FILE.fullmatch(file.name) is not None
    return [_of_channel(c, file, stem) if day and c.key == stem else c for c in titled]


def _of_channel(conversation: Conversation, file: Path, stem: str) -> Conversation:
    turns = conversation.turns

    def made() -> Iterator[Turn]:
        return (replace(turn, earlier=stem) for turn in turns)

    key = conversation_name("conversation", file.absolute().parent.name)
    return replace(conversation, key=key, turns=Reread(made, len(turns)))


def _reads(
    days: Sequence[tuple[str, str]], people: dict[str, str] | None
) -> Callable[[], Iterator[Read]]:
    """What a channel's day files `days` (where each is and its text) say, as one chat: each
    turn with the date it was stored under when its day file was a conversation."""

    def reads() -> Iterator[Read]:
        day = [""]

        def records() -> Iterator[tuple[str, Any]]:
            for where, text in days:
                day[0] = Path(where).stem
                yield from ((f"{where}[{i}]", v) for i, v in enumerate(_values(where, text)))

        for read in chat_turns(records(), people):  # (one read for each record, in step)
            yield replace(read, earlier=day[0]) if isinstance(read, Turn) else read

    return reads


def _values(where: str, text: str) -> Iterator[Any]:
    """The messages of a day file (a JSON array), one at a time; refusals name `where`."""
    start, stop = bounds(text)
    if not text.startswith("[", start, stop):
        raise InvalidInput(where, "must be a Slack day file: a JSON array of messages")
    try:
        yield from array_values(text, start, stop)
    except UnreadableJSON as exc:
        raise InvalidInput(where, exc.placed(text) if exc.syntax else exc.reason) from None


class _Source(ABC):
    """An export's files as `read_export` reads them, counted against its limit."""

    channel = ""  # the channel whose folder was given, or "" (the export's root)
    skipped = 0
    # The one folder the export's root is in (`Export/`: its folder zipped again, or by
    # macOS's Compress), where the given root holds no channel's folder; or "".
    wrapper = ""

    def __init__(self) -> None:
        self._left = MAX_FILE_BYTES  # (bytes the export may still read)
        self.days: list[tuple[str, str]] = []  # (channel, day file's name); "" the given
        self.lists: dict[str, str] = {}  # a list's name → where it is

    def __enter__(self) -> _Source:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        """Let go of what the source holds open."""

    def listed(self, name: str) -> tuple[str, str] | None:
        where = self.lists.get(name)
        return None if where is None else (where, self.text(where))

    def text(self, where: str) -> str:
        data = self.read(where, self._left)
        text = decoded([data], where)  # (a gzip-compressed one inflated: counted so)
        self._left -= max(len(data), len(text))
        if self._left < 0:
            raise self.too_large()
        return text

    @abstractmethod
    def read(self, where: str, most: int) -> bytes:
        """The bytes of the export's file `where`, at most `most` of them (past that: the
        export is too large, `too_large`)."""

    def too_large(self) -> InvalidInput:
        limit = f"at most {MAX_FILE_BYTES >> 20} MiB in all (its lists and day files, as one file)"
        return InvalidInput("file", f"a Slack export must hold {limit}")

    def found(self, parts: Sequence[str]) -> None:
        """Take note of the file at `parts` (its path in the export, without the root)."""
        if len(parts) == 1 and parts[0] in _LISTS:
            self.lists[parts[0]] = self.wrapper + parts[0]
        elif len(parts) == 2 and DAY_FILE.fullmatch(parts[1]) and parts[0] not in ("..", "."):
            self.days.append((parts[0], parts[1]))
        else:
            self.skipped += 1


class _Folder(_Source):
    """A folder: an export's root, or one channel's (its lists then in the folder above)."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = Path(os.path.realpath(root))
        entries = sorted(os.scandir(self.root), key=lambda entry: entry.name)
        if any(DAY_FILE.fullmatch(e.name) for e in entries):  # (a channel's folder)
            self.channel = self.root.name
            for entry in entries:
                self.found(("", entry.name) if _is_file(entry) else ("", "", entry.name))
            for name in _LISTS:
                if (self.root.parent / name).is_file():
                    self.lists[name] = f"../{name}"
            return
        wrapped = _wrapped(entries)
        if wrapped is not None:  # (the root's other files and folders: skipped)
            self.wrapper, self.skipped = wrapped.name + "/", len(entries) - 1
            entries = sorted(os.scandir(wrapped.path), key=lambda entry: entry.name)
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                for inner in sorted(os.scandir(entry.path), key=lambda e: e.name):
                    file = _is_file(inner)
                    self.found((entry.name, inner.name) if file else (entry.name, "", ""))
            else:
                self.found((entry.name,) if _is_file(entry) else ("", ""))

    def close(self) -> None:
        """Nothing: each file is opened and closed as it is read."""

    def read(self, where: str, most: int) -> bytes:
        path = self.root / where
        with named_by(where, path, "is a directory"):
            try:
                # (its real path, and no symlink in its place: read where it was found)
                data, _ = read_regular(os.path.normpath(path), most, resolved=True)
            except TooLarge:
                raise self.too_large() from None
        return data


def _is_file(entry: os.DirEntry[str]) -> bool:
    return stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode)  # (a symlink: not read)


def _wrapped(entries: Sequence[os.DirEntry[str]]) -> os.DirEntry[str] | None:
    """The one folder of `entries` (a folder's) that holds channels' folders, where no folder
    of `entries` is one: the export's root, one level down; else None. No deeper search."""
    if any(_is_channel(entry) for entry in entries):
        return None
    found = [e for e in entries if e.is_dir(follow_symlinks=False) and _holds_channels(e)]
    return found[0] if len(found) == 1 else None


def _is_channel(entry: os.DirEntry[str]) -> bool:
    """Whether `entry` is a folder (no symlink) with a day file in it."""
    try:
        inner = os.scandir(entry.path) if entry.is_dir(follow_symlinks=False) else None
    except OSError:  # (one that cannot be listed: not read here, refused where it is)
        return False
    if inner is None:
        return False
    with inner:
        return any(DAY_FILE.fullmatch(e.name) and _is_file(e) for e in inner)


def _holds_channels(entry: os.DirEntry[str]) -> bool:
    try:
        with os.scandir(entry.path) as inner:
            return any(_is_channel(e) for e in inner)
    except OSError:
        return False


class _Zip(_Source):
    """The .zip Slack gives: read in memory (nothing extracted), bounded by its headers and
    as it is read (a zip bomb stops at the limit)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        with named_by("file", path, "is a directory"):
            try:
                data, _ = read_regular(path, MAX_FILE_BYTES)
            except TooLarge:
                raise self.too_large() from None
        import io

        if data.count(_LISTED) > ZIP_FILES:  # (never fewer than the entries it lists)
            raise InvalidInput(
                "file",
                f"a Slack export's zip must list at most {ZIP_FILES:,} files; this one lists "
                "more (a Slack export within the size limit holds far fewer)",
            )
        try:
            self.archive = zipfile.ZipFile(io.BytesIO(data))
        except _UNREADABLE as exc:
            raise InvalidInput(
                "file", f"is not a zip archive that can be read: {_why(exc)}"
            ) from None
        members = self.archive.infolist()
        if sum(member.file_size for member in members) > MAX_FILE_BYTES:
            self.archive.close()
            raise self.too_large()
        files = [(name, m) for m in members if not (name := _member_name(m)).endswith("/")]
        self.wrapper = _zip_wrapper([name for name, _ in files])
        self.members: dict[str, zipfile.ZipInfo] = {}
        twice: set[str] = set()
        for name, member in files:
            parts = name.split("/")
            unsafe = name.startswith("/") or ":" in name or ".." in parts or _is_link(member)
            if unsafe or not name.startswith(self.wrapper):  # (`..`, absolute: never read)
                self.found(("", "", ""))
                continue
            if name in self.members:
                twice.add(name)
            self.members[name] = member
            self.found(name.removeprefix(self.wrapper).split("/"))
        read = {self.wrapper + "/".join(day) for day in self.days} | set(self.lists.values())
        if twice & read:  # (which of the two is the day's, or the list: not to be guessed)
            self.archive.close()
            raise InvalidInput(min(twice & read), "is in the zip archive twice; not read")

    def close(self) -> None:
        self.archive.close()

    def read(self, where: str, most: int) -> bytes:
        if self.members[where].flag_bits & _ENCRYPTED:
            rule = "is encrypted: unzip the archive with its password, ingest its folder"
            raise InvalidInput(where, rule)
        try:
            with self.archive.open(self.members[where]) as member:
                data = member.read(most + 1)  # (its header may lie: stopped here)
        except (*_UNREADABLE, RuntimeError, zlib.error, EOFError, lzma.LZMAError) as e:
            raise InvalidInput(where, f"cannot be read from the zip archive: {_why(e)}") from None
        if len(data) > most:
            raise self.too_large()
        return data


# How a zip's directory or a member's bytes fail to be read: broken (a bzip2 member's data, an
# offset before the start), a name not UTF-8 though flagged so, a version or method unknown.
# (zipfile raises NotImplementedError for a compression method it does not read)
_UNREADABLE = (zipfile.BadZipFile, OSError, ValueError, NotImplementedError)


def _why(exc: Exception) -> str:
    """Why a zip could not be read, in one short line (a header's name is quoted whole)."""
    return cut_middle(str(exc), 200)


def _member_name(member: zipfile.ZipInfo) -> str:
    """A zip member's name as its maker wrote it: UTF-8 where it reads so though the zip does
    not flag it (macOS's Archive Utility; read as CP437, the format's default, it is garbled),
    and `\\` a folder's separator, as Windows's tools wrote it."""
    name = member.filename
    if not (member.flag_bits & _UTF8_FLAG or name.isascii()):
        with suppress(UnicodeError):
            name = name.encode("cp437").decode("utf-8")
    return name.replace("\\", "/")


def _is_link(member: zipfile.ZipInfo) -> bool:
    """Whether `member` is a symlink (its Unix mode in its external attributes): not read, as
    a folder's is not."""
    return member.create_system == 3 and stat.S_ISLNK(member.external_attr >> 16)


def _zip_wrapper(names: Sequence[str]) -> str:
    """The one folder (`Export/`) a zip's channels' folders are in, where none is at its root
    (`_wrapped`); else ""."""
    days = [parts for parts in (n.split("/") for n in names) if DAY_FILE.fullmatch(parts[-1])]
    if any(len(parts) == 2 for parts in days):
        return ""
    tops = {parts[0] for parts in days if len(parts) == 3 and parts[0] not in ("", ".", "..")}
    return f"{tops.pop()}/" if len(tops) == 1 else ""
