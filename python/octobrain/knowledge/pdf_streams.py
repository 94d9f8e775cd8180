"""A PDF page's content streams, measured before pypdf parses any of them.

pypdf parses a content stream whole before its text extraction reads the first operator (and
with it the time, `extract.PDF_SECONDS`), and its bound on one stream's tokens does not count
one token's bytes: 70 MB inflated (under pypdf's own 75 MB bound; 70 kB compressed) of one hex
string parsed for 36 s, of comment lines 15 s. So the streams a page's text is read from (its
`/Contents` before it is read, and each form as it is drawn, nested ones too) are inflated
first, each only to `PDF_STREAM_BYTES` and a byte, and a page with one longer is left out
unparsed. A form is the one pypdf draws: named in the resources of the page or form whose
content draws it (`visitor_operand_before` and `_after` on `Do` tell which), not another of
the same name elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The most bytes one content stream a page's text is read from may inflate to: pypdf parses
# at most 0.5 s a megabyte (a hex string; whitespace 0.1 s, comment lines 0.2 s), so one parse
# runs past the deadline by 4 s at the most; the text of one operator in it is not timed either
# (one `Tj` of a 7.9 MB hex string: 11 s more). Real pages are far below it: 0.3 to 19 kB in the
# PDFs LibreOffice and TeX make (3,000 tokens, 6 to 10 bytes each); a page of
# `extract.PDF_PAGE_TOKENS` (500,000) such tokens is 3 to 5 MB, and is left out anyway.
PDF_STREAM_BYTES = 8 * 1024 * 1024


class StreamTooLarge(BaseException):
    """A content stream of a page inflates past `PDF_STREAM_BYTES`: to `size` bytes or more.
    (Not an `Exception`: raised as a page draws a form, which pypdf reads on past.)"""

    def __init__(self, size: int) -> None:
        super().__init__(
            f"has a content stream that inflates to {size} bytes or more, over the "
            f"{PDF_STREAM_BYTES}-byte bound on one"
        )
        self.size = size


class PageStreams:
    """Measures the content streams of one PDF's pages, each stream inflated once (pages often
    share their forms); `in_time` is called before each (it raises when time is up)."""

    def __init__(self, in_time: Callable[[], None]) -> None:
        self._in_time = in_time
        self._sizes: dict[int, tuple[Any, int]] = {}  # (by id: the stream kept, so its id is)
        self._named: dict[int, tuple[Any, dict[str, Any]]] = {}  # each holder's forms, by id
        # The page, then each XObject being drawn (by the `Do` drawing it) in the one before.
        self._drawing: list[tuple[int, Any]] = []

    def check(self, page: Any) -> None:
        """Raise `StreamTooLarge` if the page's content inflates past `PDF_STREAM_BYTES`; its
        forms are measured as it draws them (`drawing`)."""
        from pypdf.generic import ArrayObject, StreamObject

        self._drawing = [(0, page)]
        contents = page.get("/Contents")
        contents = contents.get_object() if contents is not None else None
        parts = contents if isinstance(contents, ArrayObject) else [contents]
        total = 0
        for part in parts:
            if isinstance(stream := _resolved(part), StreamObject):
                total += self._size(stream)
        if total > PDF_STREAM_BYTES:
            raise StreamTooLarge(total)

    def drawing(self, operands: list[Any]) -> None:
        """Before pypdf draws an XObject (a `Do` of these `operands`): raise `StreamTooLarge` if
        it is a form that inflates past `PDF_STREAM_BYTES`, as the resources of the page or
        form being drawn name it (where pypdf looks it up)."""
        holder = self._drawing[-1][1]
        form = self._forms(holder).get(str(operands[0])) if holder is not None else None
        if form is not None and (size := self._size(form)) > PDF_STREAM_BYTES:
            raise StreamTooLarge(size)
        self._drawing.append((id(operands), form))

    def drawn(self, operands: list[Any]) -> None:
        """After pypdf drew it (the `Do` of these `operands`, alive from `drawing` to here):
        back to what drew it, past any form an error left unfinished."""
        while len(self._drawing) > 1 and self._drawing.pop()[0] != id(operands):
            pass

    def _forms(self, holder: Any) -> dict[str, Any]:
        if id(holder) not in self._named:
            self._in_time()
            self._named[id(holder)] = (holder, dict(_forms(holder)))
        return self._named[id(holder)][1]

    def _size(self, stream: Any) -> int:
        """The stream's inflated size, or `PDF_STREAM_BYTES` + 1 if it inflates to more."""
        if id(stream) not in self._sizes:
            self._in_time()
            self._sizes[id(stream)] = (stream, _inflated_size(stream))
        return self._sizes[id(stream)][1]


def _resolved(item: Any) -> Any:
    try:
        return item.get_object()
    except Exception:  # a broken reference: pypdf reads past it too
        return None


def _forms(holder: Any) -> list[tuple[str, Any]]:
    """The forms a page's or a form's resources name, with their names: every XObject that is
    a stream and not an image (pypdf extracts text from any other one a page draws)."""
    from pypdf.generic import DictionaryObject, StreamObject

    try:
        resources = _resolved(holder.get_inherited("/Resources", None))
        xobjects = _resolved(resources.get("/XObject")) if resources is not None else None
    except Exception:  # a cycle of parents or resources not a dictionary: no forms
        return []
    if not isinstance(xobjects, DictionaryObject):
        return []
    named = ((name, _resolved(value)) for name, value in xobjects.items())
    return [
        (name, form)
        for name, form in named
        if isinstance(form, StreamObject) and form.get("/Subtype") != "/Image"
    ]


def _inflated_size(stream: Any) -> int:
    """The bytes a stream's filters give, inflating no further than `PDF_STREAM_BYTES` + 1
    (pypdf's own bounds on each filter's output, lowered); 0 if its data cannot be decoded
    (pypdf then reads past it as it does a damaged stream)."""
    from pypdf import apply_configuration
    from pypdf.errors import LimitReachedError
    from pypdf.filters import decode_stream_data
    from pypdf.generic import EncodedStreamObject

    if not isinstance(stream, EncodedStreamObject):
        return len(stream.get_data())  # (no filter: its bytes as the file holds them)
    over = PDF_STREAM_BYTES + 1
    try:
        with apply_configuration(
            zlib_maximum_output_length=over,
            lzw_maximum_output_length=over,
            run_length_maximum_output_length=over,
            brotli_maximum_output_length=over,
        ):
            return len(decode_stream_data(stream))
    except LimitReachedError:
        return over
    except Exception:
        return 0
