"""JSONL lines: cut at "\n", "\r\n" and a lone "\r", never at U+2028, U+2029 or U+0085."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from octobrain.lines import iter_lines, split_lines, stream_lines

# Line ends, halves of them, and what JSON writers leave raw inside strings.
PIECES = ["a", "{}", "\r", "\n", "\r\n", "\u2028", "\u2029", "\x85", " "]


def _reference(text: str) -> list[str]:
    """The standard library's universal newlines, each line with its end."""
    return io.StringIO(text, newline="").readlines()


@given(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.integers(1, 7),
    st.integers(0, 6),
    st.one_of(st.none(), st.integers(0, 60)),
)
def test_stream_lines_cut_as_universal_newlines_do_at_any_block_size(
    text: str, block: int, limit: int, most: int | None
) -> None:
    data = text.encode()
    expected: list[bytes | None] = []
    start = 0
    for line in _reference(text):
        if most is not None and start >= most:
            break
        raw = line.encode()
        content = raw.rstrip(b"\r\n") if raw.endswith((b"\r", b"\n")) else raw
        expected.append(raw if len(content) <= limit else None)
        start += len(raw)
    got = list(stream_lines(io.BytesIO(data), limit, most, block_bytes=block))
    assert got == expected
    ends = [line.rstrip("\r\n") for line in _reference(text)]
    assert split_lines(text) in (ends, [*ends, ""])
    assert list(iter_lines(text)) == split_lines(text)


def test_a_line_over_the_limit_is_none_and_the_next_is_read() -> None:
    data = b"ok\r" + b"x" * 1000 + b"\r\n\xe2\x80\xa8\rlast"
    got = list(stream_lines(io.BytesIO(data), 10, block_bytes=4))
    assert got == [b"ok\r", None, "\u2028\r".encode(), b"last"]
