"""A conversation file's bytes read and decoded to its text: at most `MAX_FILE_BYTES`, gzip
inflated (and bounded so), UTF-8 with a byte order mark dropped; a zip archive refused saying
what is read instead. Parsing the text is `conversation_parse`'s."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from octobrain.errors import InvalidInput
from octobrain.files import TooLarge, gunzipped, named_by, read_regular
from octobrain.lines import place
from octobrain.memory.slack_users import UNZIP

__all__ = ["MAX_FILE_BYTES", "decoded", "piped_text", "read_text"]

MAX_FILE_BYTES = 64 * 1024 * 1024


def read_text(file: Path, field: str = "file") -> str:
    """The text of a conversation file (gzip inflated) of at most `MAX_FILE_BYTES`; what
    cannot be read, or is not UTF-8, refused naming `field`."""
    with named_by(field, file, "is a directory, not a conversation file"):
        try:
            data, _ = read_regular(file, MAX_FILE_BYTES)
        except TooLarge as exc:
            got = f", got {exc.size}" if exc.size is not None else ""
            raise InvalidInput(field, f"must be at most {MAX_FILE_BYTES >> 20} MiB{got}") from None
    held = [data]
    del data  # (up to 64 MiB: `decoded` lets it go once decoded)
    return decoded(held, field)


def piped_text(stream: BinaryIO) -> str:
    """The text of what `stream` (standard input) holds, as `read_text` reads a file's."""
    data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInput("file", f"must be at most {MAX_FILE_BYTES >> 20} MiB")
    held = [data]
    del data
    return decoded(held, "file")


def decoded(held: list[bytes], field: str) -> str:
    """The text of a file's bytes (`held` holds them alone, taken out here): gzip inflated,
    UTF-8 decoded, a byte order mark dropped; refusals name `field`."""
    data = held.pop()
    if data.startswith(b"PK\x03\x04"):  # (a zip archive: a Slack export as Slack gives it)
        raise InvalidInput(field, UNZIP)
    if data.startswith(b"\x1f\x8b"):  # gzip, as LoCoMo's own file is kept
        data = gunzipped(field, data, MAX_FILE_BYTES)
    try:  # (each turn was stored with U+FFFD for what was not UTF-8, and no word said)
        return data.decode("utf-8").removeprefix("\ufeff")  # (a byte order mark)
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8")  # (all UTF-8 up to there)
        line, column = place(before, len(before))
        raise InvalidInput(
            field, f"is not UTF-8 text (line {line}, column {column}); save it as UTF-8"
        ) from None
