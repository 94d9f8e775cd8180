"""The faster readers of a document give what the line-by-line readers they replaced gave.

Each reference below is the plain version (every line, every element, read in Python); the
production code skips what cannot change the result. A changed chunk, offset, heading path,
title or text would re-index every source on upgrade and move every stored offset.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import lxml.html
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.knowledge import chunk, extract, html_text, pdf_columns
from octobrain.knowledge.chunk import _Section, chunk_text, heading_text
from octobrain.safe_text import shows_something

# ---- references ------------------------------------------------------------------------------

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|[\r\n])|[^\r\n]+")  # as `bytes.splitlines(keepends=True)`


def sections_by_line(data: bytes, setext: bool = False) -> Iterator[_Section]:
    """Every line read: a fence line toggles, an unfenced heading whose text shows something
    starts a section (`#` headings only: no `setext`)."""
    assert not setext
    path: list[str] = []
    body_start = head_start = pos = 0
    head = b""
    fenced = False
    for found in _LINE.finditer(data):
        line = found.group()
        if chunk._FENCE.match(line):
            fenced = not fenced
        bare = line.rstrip(b"\r\n")
        match = None if fenced else chunk._HEADING.match(bare)
        heading = heading_text(match.group(2)) if match else b""
        if match and shows_something(heading.decode("utf-8", "replace")):
            yield _Section(tuple(path), body_start, data[body_start:pos], head_start, head)
            path = [*path[: len(match.group(1)) - 1], heading.decode("utf-8", "replace").strip()]
            body_start, head_start, head = pos + len(line), pos, bare
        pos += len(line)
    yield _Section(tuple(path), body_start, data[body_start:], head_start, head)


def normalise_by_line(text: str) -> str:
    """Each line's trailing whitespace (a line break apart) cut, runs of blank lines made one."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    lines = [line.rstrip() for line in text.split("\n")]  # (no "\n" is left inside a line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def first_title_by_line(text: str) -> str:
    first = ""
    for line in text.split("\n"):
        heading = extract._ATX.match(line)
        title = heading_text(heading.group(1).encode()).decode().strip() if heading else ""
        if shows_something(title):
            return title[:100]
        if not title and shows_something(line):
            first = first or line.strip()[:100]
    return first or "Untitled"


class BlocksByElement:
    """The HTML walk that joined and split its buffer at every block boundary."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.buf: list[str] = []

    def flush(self, prefix: str = "") -> None:
        lines = [" ".join(part.split()) for part in "".join(self.buf).split(html_text._BR)]
        text = "\n".join(line for line in lines if line)
        if text:
            self.blocks.append(prefix + text)
        self.buf = []

    def walk(self, el: Any) -> None:
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        if tag in html_text._HEADINGS:
            self.flush()
            text = " ".join(el.text_content().split())
            if text:
                self.blocks.append("#" * html_text._HEADINGS[tag] + " " + text)
        elif tag == "pre":
            self.flush()
            self.blocks.append(el.text_content().strip("\n"))
        elif tag == "br":
            self.buf.append(html_text._BR)
        elif tag in ("td", "th"):
            cell = BlocksByElement()
            cell.buf.append(el.text or "")
            for child in el:
                cell.walk(child)
            cell.flush()
            self.buf.append(" ".join(" ".join(cell.blocks).split()) + " | ")
        elif tag in html_text._BLOCKS:
            self.flush()
            first = len(self.blocks)
            self.buf.append(el.text or "")
            for child in el:
                self.walk(child)
            self.flush()
            if tag == "li" and len(self.blocks) > first:
                self.blocks[first] = "- " + self.blocks[first]
        elif tag:
            self.buf.append(el.text or "")
            for child in el:
                self.walk(child)
        self.buf.append(el.tail or "")


def html_text_by_element(root: Any) -> str:
    blocks = BlocksByElement()
    blocks.walk(root)
    blocks.flush()
    return "\n\n".join(b.strip(" |") if "|" in b else b for b in blocks.blocks)


# ---- inputs ----------------------------------------------------------------------------------

PLAIN = "".join(f"line {i} value {i * 7919 % 100_003}\n" for i in range(3_000))
MARKDOWN = "\n".join(
    f"## Part {i}\n\nSome prose about part {i}. It goes on for a while, and then some more.\n"
    f"```\n# not a heading {i}\n```\n~~~\n## nor this\n~~~\n### Sub {i} ###\n- item\n- item\n"
    for i in range(200)
)
DOCUMENTS = {
    "plain, many short lines": PLAIN,
    "markdown with fences and closing hashes": "# Guide\n\n" + MARKDOWN,
    "long lines": ("word " * 4_000 + "\n") * 5,
    "CR and CRLF endings": "# A\r\ntext\r## B\r\n\rmore text under b\r\n   ```\r# c\r```\n# D #\n",
    "headings only": "".join(f"{'#' * (i % 7 + 1)} h{i}\n" for i in range(300)),
    "no line end, a heading last": "intro text\n#### last",
    "blank heading and C#": "#   \n# C#\n##\tTabbed ##\n#x\n####### seven\nbody",
    "empty": "",
}

LINE_PIECES = st.sampled_from(
    ["# ", "## ", "###### ", "####### ", "#", "```", "~~~", "  ```", "\t~~~", " ", "\t", "#",
     "text", "C#", "é", "\n", "\r", "\r\n", "\n\n", "x.", "\u00a0", "\x1c"]
)  # fmt: skip
TEXTS = st.lists(LINE_PIECES, max_size=60).map("".join)


# ---- chunking --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_chunks_are_those_the_line_reader_makes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same chunks (text, header, parent, heading path, byte offsets) on varied documents."""
    text = DOCUMENTS[name]
    new = chunk_text(text, "Doc", chunk_size=300, overlap=60, parent_size=900)
    monkeypatch.setattr(chunk, "_sections", sections_by_line)
    assert new == chunk_text(text, "Doc", chunk_size=300, overlap=60, parent_size=900)


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_sections_are_those_the_line_reader_finds(text: str) -> None:
    data = text.encode()
    assert list(chunk._sections(data)) == list(sections_by_line(data))


# ---- normalising ------------------------------------------------------------------------------

BLANKY = st.text(
    alphabet=st.sampled_from(["a", "#", "\n", "\r", "\x00", " ", "\t", "\x0b", "\x0c", "\x1c",
                              "\x85", "\u00a0", "\u2028", "\u2029", "\u3000", "\u200b"]),
    max_size=80,
)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(st.one_of(TEXTS, BLANKY))
def test_normalise_is_the_line_readers(text: str) -> None:
    assert extract.normalise(text) == normalise_by_line(text)


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_normalise_on_documents(name: str) -> None:
    text = DOCUMENTS[name] + " \t\n\n\n\n  x  \u3000\n" + " " * 5_000 + "y \n"
    assert extract.normalise(text) == normalise_by_line(text)


# ---- title ---------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_first_title_is_the_line_readers(text: str) -> None:
    assert extract.first_title(text) == first_title_by_line(text)


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_first_title_on_documents(name: str) -> None:
    text = extract.normalise(DOCUMENTS[name])
    assert extract.first_title(text) == first_title_by_line(text)


# ---- HTML ------------------------------------------------------------------------------------

HTML_PIECES = st.sampled_from(
    ["<p>", "</p>", "<br>", "<li>", "</li>", "<ul>", "</ul>", "<td>", "</td>", "<tr>",
     "<table>", "</table>", "<h2>", "</h2>", "<pre>", "</pre>", "<b>", "</b>", "<div>",
     "</div>", "<!-- c -->", "<span>", "</span>", "text", "a b", " ", "\n", "  \n ", "|",
     "&nbsp;", "\u3000", "é"]
)  # fmt: skip
PAGES = st.lists(HTML_PIECES, min_size=1, max_size=50).map(lambda parts: "".join(parts) + ".")

VARIED_PAGE = """<html><head><title>Var | Site</title></head><body><h1>Main  title</h1>
<p>Some <b>bold</b> text<br>next line<br/>  </p><ul><li>one</li><li> two <i>x</i></li></ul>
<table><tr><td>a</td><td>b<br>c</td></tr><tr><th>h</th></tr></table><pre>
  code
   here
</pre><div>tail<!-- c --> after</div>&nbsp;<p>   </p><p>
multi
line</p><h3></h3><h2>Sec</h2>text end</body></html>"""


def _root(markup: str) -> Any:
    parser = lxml.html.HTMLParser(encoding="utf-8")
    return lxml.html.document_fromstring(markup.encode(), parser=parser)


@settings(max_examples=300, deadline=None)
@given(PAGES)
def test_html_text_is_the_element_walks(markup: str) -> None:
    assert html_text._html_text(_root(markup)) == html_text_by_element(_root(markup))


def test_html_text_of_a_varied_page() -> None:
    text = html_text._html_text(_root(VARIED_PAGE))
    assert text == html_text_by_element(_root(VARIED_PAGE))
    assert "- two x" in text and "a | b c" in text and "  code\n   here" in text
    assert "Some bold text\nnext line" in text and "multi line" in text


# ---- a PDF line's cells (layout mode) ---------------------------------------------------------


def cells_by_search(line: str) -> tuple[list[int], list[str]]:
    """Each cell looked for in the line after the last, the spaces after it skipped."""
    starts: list[int] = []
    texts: list[str] = []
    at = len(line) - len(line.lstrip())
    for part in pdf_columns._GAP.split(line.strip()):
        starts.append(at)
        texts.append(" ".join(part.split()))
        at = line.index(part, at) + len(part)
        at += len(line[at:]) - len(line[at:].lstrip(" "))
    return starts, texts


LAYOUT_LINES = st.lists(
    st.sampled_from([" ", "  ", "   ", "    ", "\t", "\u00a0", "\n", "x", "ab", "é", "|"]),
    max_size=40,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(LAYOUT_LINES)
def test_a_layout_line_s_cells_are_those_the_search_found(line: str) -> None:
    assert pdf_columns._cells(line) == cells_by_search(line)
