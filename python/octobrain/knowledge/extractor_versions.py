"""Each format's extraction, by version (`EXTRACTOR_VERSIONS`, by a `DocType`'s value).

A version is bumped when what the format's extraction makes of a document (its text, title
or headings, as the chunker reads them) changes, so that the sources of that format indexed
before are read and cut again by `knowledge index` and by a search naming one, though their
bytes did not change (`extract.extracted_by`). 1: as before versions were recorded.

- HTML 2: numbered lists. 3: list markers and headings in a page too deep or crowded for a
  tree. 4: a DOCTYPE's internal subset not read as text.
- Markdown 2: setext headings.
- PDF 2: running lines and hyphens. 3: note numbers, table cells, doubled spaces, words
  broken across pages. 4: a code line's spaces, private bullets. 5: a page's footnotes after
  its text, a sentence across pages one. 6: cells of rows drawn in one text object. 7:
  spaces squeezed but in fixed pitch.
- DOCX 2: list numbers, notes, headers and footers. 3: reviewers' comments. 4: tab stops are
  not tabs. 5: a header's text box read once, with its paragraph. 6: a text box's fallback
  copy left out of headers, footers and notes. 7: headings numbered by their style. 8:
  numbering from the style a style is built on, a numbered code line's number, indexes and
  tables of figures left out.
- EPUB 2: a chapter titled only by the book's title a section of its own. 3: a DOCTYPE's
  internal subset not read as text.
- ODT 2: headers and footers, lists numbered on where they continue, code paragraphs. 3:
  numbered headings. 4: LibreOffice's list formats (`1-a:`), the bibliography read. 5: every
  number a list format names, a level with no number left out of it. 6: an item holding
  only a nested list counted where LibreOffice counts it, a level with no number its prefix
  and suffix only, left out of its sublevels' numbers. 7: a heading level naming no number
  format numbered `1`, and the text around a heading level's number shown, where no level
  of the heading numbering names a format. 8: a list level its style does not define
  numbered `1.`, a heading level the outline style does not define left out of its
  sublevels' numbers.
- RTF 2: its `\\title`, raw bytes in its code page.
"""

from __future__ import annotations

# By a `DocType`'s value (a `DocType` is the string it names: `EXTRACTOR_VERSIONS["odt"]` and
# `EXTRACTOR_VERSIONS[DocType.ODT]` are the same entry).
EXTRACTOR_VERSIONS = {
    "html": 4,
    "markdown": 2,
    "text": 1,
    "pdf": 7,
    "docx": 8,
    "epub": 3,
    "odt": 8,
    "rtf": 2,
}
