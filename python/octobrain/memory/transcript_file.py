"""A session's JSONL transcript, read a bounded part at a time, and how far it was read.

A digest hook must finish inside Claude Code's timeout (60 s as `hook install` writes it), but
a transcript only grows: 200 MB of conversation took 20 s to digest, the 512 MiB the reader
takes about 50, more on a loaded machine, and a hook killed at its timeout had stored nothing,
so the next one started over. So one hook reads at most `READ_BYTES` from where the session's
last hook stopped (`Progress`, a small file per session under `<data dir>/hooks/`) and says
what it left (`transcript_parts`); the CLI reads the rest in a process of its own
(`cli.brief._read_on`).

Where a hook stopped is known by the bytes before that point (a hash of the last 4 KiB read),
not by the file's path: a transcript moved or copied (a resumed session) reads on, one
rewritten or cut (pruned after a compaction) is read again from its start, and the digest
merges what it finds with the points it holds (`session_digest.store_digest`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from octobrain.errors import InvalidInput
from octobrain.files import named_by, open_regular, read_regular
from octobrain.json_values import UnreadableJSON, read_json
from octobrain.lines import placed_lines

__all__ = ["Progress", "read_transcript", "start_of"]

TRANSCRIPT_BYTES = 512 << 20  # the most of one transcript a session's digest reads: its start
LINE_BYTES = 16 << 20  # a longer line (one entry) is skipped unread
READ_BYTES = 32 << 20  # the most one hook reads (3.3 s of the wordiest transcript, 0.3 s usual)
_CHECK_BYTES = 4096  # the bytes before a stopping point that tell the file read on


def read_transcript(path: str | Path) -> Iterator[dict[str, Any]]:
    """The entries of a JSONL transcript, one at a time: the file is opened now and read as
    the entries are taken, holding at most one line. Lines over `LINE_BYTES` and lines JSON
    cannot read are skipped; reading stops after `TRANSCRIPT_BYTES`. A path that is missing,
    unreadable or not a regular file (a FIFO would hold the hook until a writer came,
    `/dev/zero` never ends), or a file without one JSON line, is
    `InvalidInput("transcript_path")`."""
    handle = open_transcript(path)
    return (entry for _, entry in entries_from(handle, Path(path), 0, TRANSCRIPT_BYTES))


def open_transcript(path: str | Path) -> BinaryIO:
    where = Path(path)
    with named_by("transcript_path", where, "is a directory, not a transcript"):
        handle, _ = open_regular(where)
    return handle


def entries_from(
    handle: BinaryIO, where: Path, start: int, most: int, ends: list[int] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The entries from byte `start` on, each with where its line ends; `ends[0]` is kept at
    the end of the last whole line read (one a writer is still appending to is not whole)."""
    lines = entries = 0
    with handle:
        try:
            handle.seek(start)
            for at, line in placed_lines(handle, LINE_BYTES, most):
                if line is not None and line.endswith((b"\n", b"\r")) and ends is not None:
                    ends[0] = start + at
                if line is None or not line.strip():
                    continue
                lines += 1
                try:
                    entry = read_json(line.decode("utf-8", errors="replace"))
                except UnreadableJSON:  # one unreadable line: skipped
                    continue
                if isinstance(entry, dict):
                    entries += 1
                    yield start + at, entry
            if ends is not None and handle.read(1):
                ends.append(-1)  # more is there than this part read
        except OSError as exc:
            raise InvalidInput("transcript_path", f"cannot read {where}: {exc.strerror}") from None
    if lines and not entries and not start:
        raise InvalidInput("transcript_path", f"{where} has no JSON lines; not a transcript")


def check_before(path: str | Path, end: int) -> str:
    """The hash of the bytes just before `end` ("" when the file holds fewer, or is not a
    regular file: a FIFO opened plainly held the hook until a writer came)."""
    if end <= 0:
        return ""
    try:
        handle, _ = open_regular(path)
        with handle:
            handle.seek(max(0, end - _CHECK_BYTES))
            data = handle.read(min(end, _CHECK_BYTES))
    except OSError:
        return ""
    return hashlib.sha256(data).hexdigest() if len(data) == min(end, _CHECK_BYTES) else ""


@dataclass(frozen=True)
class Progress:
    """Where the last hook of a session stopped reading its transcript, for one store and
    scope: `offset` bytes were digested, the last 4 KiB of them hashing to `check`."""

    uri: str
    scope: str
    offset: int
    check: str

    @staticmethod
    def path(session_tag: str) -> Path:
        from octobrain.config.loader import data_dir

        name = hashlib.sha256(session_tag.encode("utf-8")).hexdigest()[:24]
        return data_dir() / "hooks" / f"{name}.json"

    @classmethod
    def load(cls, session_tag: str) -> Progress | None:
        """The session's record; None when there is none or it cannot be read."""
        try:
            raw, _ = read_regular(cls.path(session_tag), 1 << 12)
            data = json.loads(raw)
            progress = cls(data["uri"], data["scope"], int(data["offset"]), data["check"])
        except (OSError, ValueError, KeyError, TypeError, OverflowError):  # (1e999: inf)
            return None
        fields = (progress.uri, progress.scope, progress.check)
        return progress if all(isinstance(f, str) for f in fields) else None

    def holds(self, path: str | Path) -> bool:
        """Whether `path` starts with the bytes this record read (so reading on is right)."""
        return (
            self.offset > 0 and bool(self.check) and check_before(path, self.offset) == self.check
        )

    def save(self, session_tag: str) -> None:
        """Written whole or not at all (a new file moved over the old)."""
        target = self.path(session_tag)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            tmp.write_text(json.dumps(self.__dict__))
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()


def start_of(session_tag: str, path: str | Path, uri: str | None, scope: str | None) -> int:
    """Where the session's next hook reads `path` from: where the last stopped, when that
    record is of this store and scope (any, when both are None) and `path` holds what it
    read; else 0."""
    if not session_tag:
        return 0
    progress = Progress.load(session_tag)
    if progress is None or (uri is not None and (progress.uri, progress.scope) != (uri, scope)):
        return 0
    return progress.offset if progress.holds(path) else 0
