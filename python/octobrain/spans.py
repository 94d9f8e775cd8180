"""Cutting text into byte windows at natural breaks: the one splitter for documents and turns.

A window ends at a paragraph break if one lies in its last fifth, else at a sentence end, a line
break or a space, and never inside a UTF-8 character. Consecutive windows may share `overlap`
bytes; together they cover every byte. Each step moves the start forward by at least one
character, so the loop ends for every size > overlap >= 0.

A token budget (`fits`) may shorten a window, never below a sixteenth of `size`, and a window
shares at most half of itself with the next, so each step moves by a third of a window or more.
Token-dense text (punctuation, hex) thus costs windows in proportion to its tokens: a window cut
short used to keep the whole overlap, the next began one character later, and a 2 kB note of
punctuation made 1,800 chunks to embed (145 s over MCP).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["Fits", "split_spans", "split_text"]

_SENTENCE_END = re.compile(rb"[.!?][\"')\]]*\s")


def _char_start(data: bytes, i: int) -> int:
    """Move `i` back to the first byte of the UTF-8 character holding it."""
    while 0 < i < len(data) and (data[i] & 0xC0) == 0x80:
        i -= 1
    return i


def _next_char(data: bytes, i: int) -> int:
    """The first character start strictly after `i`."""
    i += 1
    while i < len(data) and (data[i] & 0xC0) == 0x80:
        i += 1
    return i


def _break(data: bytes, lo: int, hi: int) -> int:
    """The best cut in data[lo:hi] (the cut is an end offset), or `hi` when there is none."""
    if lo >= hi:
        return hi
    para = data.rfind(b"\n\n", lo, hi)
    if para >= 0:
        return para + 2
    ends = [m.end() for m in _SENTENCE_END.finditer(data, lo, hi)]
    if ends:
        return ends[-1]
    for sep in (b"\n", b" ", b"\t"):
        found = data.rfind(sep, lo, hi)
        if found >= 0:
            return found + 1
    return hi


Fits = Callable[[int, int], bool]


def _fit(data: bytes, start: int, hi: int, floor: int, fits: Fits) -> int:
    """The largest end in [floor, hi] (a character start, or `hi`) with data[start:end] fitting
    the budget; `floor` when nothing does (a chunk must make progress)."""
    if fits(start, hi):
        return hi
    lo = floor  # invariant: the answer lies in [lo, hi); data[start:hi] does not fit
    while hi - lo > 1:
        mid = _char_start(data, (lo + hi) // 2)
        if mid <= lo:
            break
        if fits(start, mid):
            lo = mid
        else:
            hi = mid
    return lo


def split_spans(
    data: bytes, size: int, overlap: int, fits: Fits | None = None
) -> list[tuple[int, int]]:
    """Cut `data` into (start, end) windows of at most `size` bytes (one character more only
    when a single character is wider than the room left), consecutive windows sharing at most
    `overlap` bytes. The windows cover every byte.

    With `fits(start, end)` (a token budget), a window is also shortened until it fits, but
    never below `size` // 16 bytes (one character more at most); a window shares at most half
    of itself with the next."""
    if not 0 <= overlap < size:
        raise ValueError(f"need size > overlap >= 0, got size {size}, overlap {overlap}")
    spans: list[tuple[int, int]] = []
    start, n = 0, len(data)
    shortest = max(1, size // 16)
    while start < n:
        target = min(n, start + size)
        if fits is not None:
            floor = min(target, _next_char(data, start + shortest - 1))
            target = _fit(data, start, target, floor, fits)
        if target == n:
            spans.append((start, n))
            break
        room = target - start  # the window's budget: `size`, or less when tokens bind
        shared = min(overlap, room // 2)  # at most half a window cut short by tokens
        # The cut must leave the next start (end - shared) beyond this start.
        lo = max(start + shared + 1, target - max(1, room // 5))
        end = _char_start(data, _break(data, lo, target))
        if end <= start + shared:
            end = _next_char(data, start + shared)
        spans.append((start, end))
        if end >= n:  # a wide last character took the window to the end
            break
        nxt = end - shared  # > start, because end > start + shared
        if nxt < end and (data[nxt] & 0xC0) == 0x80:  # round the overlap down to whole chars
            nxt = _next_char(data, nxt)
        if shared:  # begin the overlap at a word start when one is near
            space = data.find(b" ", nxt, min(end, nxt + 40))
            if space >= 0 and space + 1 < end:
                nxt = space + 1
        start = nxt
    return spans


def split_text(text: str, max_bytes: int) -> list[str]:
    """`text` cut at natural breaks into pieces of at most `max_bytes` UTF-8 bytes each (for
    `max_bytes` >= 4), trimmed, blank ones left out; one piece when it fits."""
    data = text.encode()
    if len(data) <= max_bytes:
        return [text]
    # A window may end one character past its size (at most 3 bytes), so ask for 3 fewer.
    pieces = (data[a:b].decode().strip() for a, b in split_spans(data, max_bytes - 3, 0))
    return [p for p in pieces if p]
