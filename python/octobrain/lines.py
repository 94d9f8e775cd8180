"""The lines of a JSONL file, as every reader of one cuts them: at "\\n", "\\r\\n" or a lone "\\r".

A file saved with old Mac line ends (a lone CR) read as one line, refused as "line 1 is not
JSON". A raw CR can stand in a JSON text only as whitespace between tokens (inside a string it
must be escaped), so cutting at it never cuts a record. U+2028, U+2029 and U+0085 are not line
ends: JSON writers (`JSON.stringify`, `ensure_ascii=False`) leave them raw inside strings, and
`str.splitlines` would cut there. Lines are numbered from 1, one for each line end.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import IO

__all__ = ["iter_lines", "place", "placed_lines", "split_lines", "stream_lines"]

_END = re.compile(r"\r\n?|\n")
_BLOCK = 1 << 16


def split_lines(text: str) -> list[str]:
    """The lines of `text`, without their ends."""
    return _END.split(text)


def place(text: str, at: int) -> tuple[int, int]:
    """(line, column) of `text[at]`, both from 1, its lines cut as every reader cuts them."""
    line, start = 1, 0
    for end in _END.finditer(text, 0, at):
        line, start = line + 1, end.end()
    return line, at - start + 1


def iter_lines(text: str) -> Iterator[str]:
    """`split_lines`, one line at a time (a list of a large text's lines is as large again)."""
    start = 0
    for end in _END.finditer(text):
        yield text[start : end.start()]
        start = end.end()
    yield text[start:]


def stream_lines(
    handle: IO[bytes], limit: int, most: int | None = None, *, block_bytes: int = _BLOCK
) -> Iterator[bytes | None]:
    """The lines of `handle`, each with its end, read `block_bytes` at a time. A line whose bytes
    before its end are more than `limit` is None, given as soon as it is over: what is left of
    it is read past, never held. With `most`, no line starting past the first `most` bytes is
    read (the one running on at that point is read to its end)."""
    for _, line in placed_lines(handle, limit, most, block_bytes=block_bytes):
        yield line


def placed_lines(
    handle: IO[bytes], limit: int, most: int | None = None, *, block_bytes: int = _BLOCK
) -> Iterator[tuple[int, bytes | None]]:
    """`stream_lines`, each line with how many bytes of `handle` lie before its end (its end
    included): where a reader that stops after it reads on from. A line over `limit` (None)
    is given as soon as it is over, before its end is read: with -1, as where it ends is not
    known yet."""
    parts: list[bytes] = []  # the line read so far
    held = 0
    over = False  # the line being read was given as None: its rest is passed over
    carry = b""  # a CR that ended the block before: alone, or the first half of "\r\n"
    read = 0
    at = 0  # the bytes before the next piece
    while True:
        finishing = most is not None and read >= most
        if finishing and not held and not carry:
            break
        block = handle.read(
            block_bytes if most is None or finishing else min(block_bytes, most - read)
        )
        read += len(block)
        if not block:
            break
        block, carry = carry + block, b""
        if block.endswith(b"\r"):
            block, carry = block[:-1], b"\r"
        # `bytes.splitlines` cuts at exactly these three ends; the last piece may run on.
        unread = len(block) + len(carry)  # (of this block, what is not given yet)
        for piece in block.splitlines(keepends=True):
            at += len(piece)
            unread -= len(piece)
            if not piece.endswith((b"\n", b"\r")):
                if over:
                    continue
                if held + len(piece) > limit:
                    parts, held, over = [], 0, True
                    yield -1, None
                else:
                    parts.append(piece)
                    held += len(piece)
                continue
            if not over:
                if held + len(piece) - (2 if piece.endswith(b"\r\n") else 1) > limit:
                    yield -1, None
                else:
                    yield at, b"".join((*parts, piece)) if parts else piece
            parts, held, over = [], 0, False
            if finishing:
                # The handle is left just past the last line given, not past the block read:
                # a reader asking whether more follows (`transcript_file`) was told no when
                # the rest of the file fit in that block, and those lines were never read.
                handle.seek(-unread, io.SEEK_CUR)
                return
    if (held or carry) and not over:
        yield at + len(carry), b"".join(parts) + carry
