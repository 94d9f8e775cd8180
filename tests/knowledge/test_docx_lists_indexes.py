"""DOCX list numbers as Word prints them (a list style built on a numbered one, a code sample
numbered as a step of its list), and which of its indexes are read."""

from __future__ import annotations

from pathlib import Path

from .test_document_structure import _W_NS, _saved


def test_a_docx_style_built_on_a_numbered_style_numbers_its_items(tmp_path: Path) -> None:
    # A style takes its numbering from the style it is built on (`w:basedOn`), as any other
    # paragraph property: a template's "Procedure" built on "List Number" prints 1., 2.
    # Before: "Drain the node." bare, and "Reboot it." numbered 1. (those before it uncounted).
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import parse_xml

    document = docx.Document()
    procedure = document.styles.add_style("Procedure", WD_STYLE_TYPE.PARAGRAPH)
    procedure.base_style = document.styles["List Number"]
    step = document.styles.add_style("Step", WD_STYLE_TYPE.PARAGRAPH)
    step.base_style = procedure  # two steps down
    aside = document.styles.add_style("Aside", WD_STYLE_TYPE.PARAGRAPH)
    aside.base_style = procedure  # its own numId 0: numbering taken off
    aside.element.get_or_add_pPr().append(
        parse_xml(f'<w:numPr {_W_NS}><w:numId w:val="0"/></w:numPr>')
    )
    for text, style in (
        ("Drain the node.", "Procedure"),
        ("Cordon it.", "Step"),
        ("Mind the pager.", "Aside"),
        ("Reboot it.", "List Number"),
    ):
        document.add_paragraph(text, style=style)
    assert _saved(document, tmp_path / "based.docx").split("\n\n") == [
        "1. Drain the node.",
        "2. Cordon it.",
        "Mind the pager.",
        "3. Reboot it.",
    ]


def test_a_numbered_docx_code_paragraph_keeps_its_number(tmp_path: Path) -> None:
    # A step of a numbered list written in a code style prints its number, as Word shows it,
    # and counts. Before: "make install" bare and the step after it numbered 2., not 3.
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import parse_xml

    document = docx.Document()
    document.styles.add_style("Code", WD_STYLE_TYPE.PARAGRAPH)
    document.add_paragraph("Fetch the sources.", style="List Number")
    code = document.add_paragraph("make install", style="Code")
    code._p.get_or_add_pPr().append(
        parse_xml(f'<w:numPr {_W_NS}><w:ilvl w:val="0"/><w:numId w:val="5"/></w:numPr>')
    )
    document.add_paragraph("    --prefix=/opt", style="Code")  # (its next line, unnumbered)
    document.add_paragraph("Restart the service.", style="List Number")
    assert _saved(document, tmp_path / "code.docx").split("\n\n") == [
        "1. Fetch the sources.",
        "2. make install\n    --prefix=/opt",
        "3. Restart the service.",
    ]


def test_a_docx_bibliography_is_read_and_its_indexes_left_out(tmp_path: Path) -> None:
    # Word's bibliography (a content control of the "Bibliographies" gallery, entries in the
    # "Bibliography" style) holds the references themselves, which the text cites only by
    # a short form: read. An index ("index 1" entries under "index heading" letters) and a
    # table of figures repeat the text's words and captions with page numbers the text has
    # none for, as a table of contents does: left out, as an ODT's are. Before: "rotation, 1"
    # and "Figure 1: Key ring 1" were read.
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import parse_xml

    document = docx.Document()
    for name in ("index heading", "index 1", "table of figures", "Bibliography"):
        document.styles.add_style(name, WD_STYLE_TYPE.PARAGRAPH)
    document.add_heading("Keys", level=1)
    document.add_paragraph("Rotate keys monthly (Knuth, 1984).")
    document.add_paragraph("R", style="index heading")
    document.add_paragraph("rotation, 1", style="index 1")
    document.add_paragraph("Figure 1: Key ring\t1", style="table of figures")
    references = (
        f'<w:sdt {_W_NS}><w:sdtPr><w:docPartObj><w:docPartGallery w:val="Bibliographies"/>'
        '</w:docPartObj></w:sdtPr><w:sdtContent><w:p><w:pPr><w:pStyle w:val="Heading1"/>'
        "</w:pPr><w:r><w:t>References</w:t></w:r></w:p><w:p><w:pPr><w:pStyle w:val="
        '"Bibliography"/></w:pPr><w:r><w:t>Knuth, D. (1984). The TeXbook.</w:t></w:r></w:p>'
        "</w:sdtContent></w:sdt>"
    )
    body = document.element.body
    body.insert(len(body) - 1, parse_xml(references))  # (before the section properties)
    assert _saved(document, tmp_path / "indexes.docx").split("\n\n") == [
        "# Keys",
        "Rotate keys monthly (Knuth, 1984).",
        "# References",
        "Knuth, D. (1984). The TeXbook.",
    ]
