"""ODT structure as LibreOffice shows it: numbered headings, a table of contents, lists in
footnotes, code in list items."""

from __future__ import annotations

from pathlib import Path

from .test_odt_rtf import _read, write_odt

# LibreOffice's chapter numbering (Tools > Heading Numbering): the outline style of
# `styles.xml`, a level a line, "1", "1.1" (two levels shown), "1.1.a)" by its list format.
OUTLINE = (
    '<office:styles><text:outline-style style:name="Outline">'
    '<text:outline-level-style text:level="1" style:num-format="1"/>'
    '<text:outline-level-style text:level="2" style:num-format="1" text:display-levels="2"/>'
    '<text:outline-level-style text:level="3" style:num-format="a" style:num-suffix=")" '
    'text:display-levels="3"/>'
    '<text:outline-level-style text:level="4" style:num-format=""/>'
    "</text:outline-style></office:styles>"
)


def _item(text: str, nested: str = "") -> str:
    return f"<text:list-item><text:p>{text}</text:p>{nested}</text:list-item>"


def _heading(level: int, text: str, extra: str = "") -> str:
    return f'<text:h text:outline-level="{level}"{extra}>{text}</text:h>'


def _outline(levels: str) -> str:
    """`styles.xml`'s styles: an outline style of `levels`."""
    return (
        f'<office:styles><text:outline-style style:name="Outline">{levels}'
        "</text:outline-style></office:styles>"
    )


def _blocks(path: Path, body: str, styles: str) -> list[str]:
    """The text read from an ODT of `body` and `styles`, a paragraph an entry."""
    return _read(write_odt(path, body, styles=styles))[1].split("\n\n")


def test_an_odt_s_numbered_headings_keep_the_numbers_libreoffice_shows(tmp_path: Path) -> None:
    # Before: "# Introduction", "## Rotation": the numbers a reader cites ("see 2.3") were
    # not in the text. Now as LibreOffice shows them, a level's count going on across its
    # parent's siblings and starting afresh under a new parent.
    body = (
        _heading(1, "Introduction")
        + "<text:p>Why keys rotate.</text:p>"
        + _heading(1, "Keys")
        + _heading(2, "Storage")
        + _heading(2, "Expiry")
        + _heading(3, "Grace period")
        + _heading(4, "Unnumbered level")
        + _heading(2, "Rotation")
        + _heading(1, "Appendix", ' text:is-list-header="true"')
        + _heading(1, "")  # (an empty heading shows its number, 3, and counts)
        + _heading(1, "Glossary")
        + _heading(1, "Restarted", ' text:restart-numbering="true" text:start-value="7"')
    )
    text = _read(write_odt(tmp_path / "keys.odt", body, styles=OUTLINE))[1]
    assert text.split("\n\n") == [
        "# 1 Introduction",
        "Why keys rotate.",
        "# 2 Keys",
        "## 2.1 Storage",
        "## 2.2 Expiry",
        "### 2.2.a) Grace period",
        "#### Unnumbered level",
        "## 2.3 Rotation",
        "# Appendix",
        "# 4 Glossary",
        "# 7 Restarted",
    ]


def test_an_odt_without_heading_numbering_keeps_its_headings_bare(tmp_path: Path) -> None:
    # LibreOffice's default outline style numbers no level (`num-format=""`).
    styles = (
        '<office:styles><text:outline-style style:name="Outline"><text:outline-level-style '
        'text:level="1" style:num-format=""/></text:outline-style></office:styles>'
    )
    body = _heading(1, "Introduction") + _heading(1, "Keys")
    # A number the writing program printed itself (`text:number`) where the outline style
    # numbers none: was glued to the heading ("A.Annex").
    body += _heading(1, "<text:number>A.</text:number>Annex")
    assert _read(write_odt(tmp_path / "bare.odt", body, styles=styles))[1] == (
        "# Introduction\n\n# Keys\n\n# A. Annex"
    )


def test_a_list_in_an_odt_footnote_is_numbered_as_its_style_says(tmp_path: Path) -> None:
    # Before: "[^1]: Steps: - Drain - Reboot", the note read without the document's list
    # styles, every list a bulleted one. Counted apart from the body's list of that style.
    items = (
        '<text:list text:style-name="L1"><text:list-item><text:p>Drain</text:p>'
        "</text:list-item><text:list-item><text:p>Reboot</text:p></text:list-item></text:list>"
    )
    body = (
        f"<text:p>Patch it.<text:note><text:note-body><text:p>Steps:</text:p>{items}"
        f"</text:note-body></text:note></text:p>{items}"
    )
    assert _read(write_odt(tmp_path / "note.odt", body))[1].split("\n\n") == [
        "Patch it.[^1]",
        "1. Drain",
        "2. Reboot",
        "[^1]: Steps: 1. Drain 2. Reboot",
    ]


_CODE_STYLES = (
    '<office:styles><style:style style:name="Preformatted_20_Text" style:display-name='
    '"Preformatted Text" style:family="paragraph"/></office:styles>'
)


def test_code_in_an_odt_list_item_keeps_its_lines_and_indentation(tmp_path: Path) -> None:
    # Before: each line of the sample a paragraph of the item, reflowed: "  def rotate(key):",
    # "  return key[::-1]" (its indentation gone). Now one block as it shows, after the
    # item's line (or with the item's number, when the item begins with it).
    code = '<text:p text:style-name="Preformatted_20_Text">'
    body = (
        '<text:list text:style-name="L1"><text:list-item><text:p>Define it:</text:p>'
        f'{code}def rotate(key):</text:p>{code}<text:s text:c="4"/>return key[::-1]</text:p>'
        f"<text:p>Then call it.</text:p></text:list-item><text:list-item>{code}make</text:p>"
        f'{code}<text:s text:c="2"/>install</text:p></text:list-item></text:list>'
    )
    text = _read(write_odt(tmp_path / "code.odt", body, styles=_CODE_STYLES))[1]
    assert text.split("\n\n") == [
        "1. Define it:",
        "def rotate(key):\n    return key[::-1]",
        "  Then call it.",
        "2. make\n  install",
    ]


def test_an_odt_table_of_contents_is_left_out_as_its_headings_repeat(tmp_path: Path) -> None:
    # Its index body repeats each heading with a page number: a reader meets the headings
    # once, in the text. Read, a "Contents" chunk would match questions about every section
    # beside the section itself. (Its number, as LibreOffice shows it, is in the heading.)
    toc = (
        '<text:table-of-content text:name="Contents"><text:table-of-content-source '
        'text:outline-level="3"><text:index-title-template>Contents</text:index-title-template>'
        "</text:table-of-content-source><text:index-body><text:index-title><text:p>Contents"
        "</text:p></text:index-title><text:p>1 Introduction<text:tab/>1</text:p><text:p>2 Keys"
        "<text:tab/>2</text:p></text:index-body></text:table-of-content>"
    )
    body = toc + _heading(1, "Introduction") + "<text:p>Why.</text:p>" + _heading(1, "Keys")
    assert _read(write_odt(tmp_path / "toc.odt", body, styles=OUTLINE))[1].split("\n\n") == [
        "# 1 Introduction",
        "Why.",
        "# 2 Keys",
    ]


def test_an_odt_heading_number_is_bounded_whatever_its_outline_style_says(
    tmp_path: Path,
) -> None:
    # The text around a heading's number at most 40 characters a side, a start at most 9
    # digits, ten levels shown at most: a 20 kB prefix and 4,000-digit starts, at every
    # level, print at most a few hundred characters before each heading (as a list's do).
    levels = "".join(
        f'<text:outline-level-style text:level="{level}" style:num-format="i" '
        f'text:start-value="{"9" * 4_000}" text:display-levels="99" '
        f'style:num-prefix="{"Part " * 4_000}"/>'
        for level in range(1, 11)
    )
    styles = f'<office:styles><text:outline-style style:name="Outline">{levels}'
    styles += "</text:outline-style></office:styles>"
    body = _heading(10, "Deep") * 200
    text = _read(write_odt(tmp_path / "deep.odt", body, styles=styles))[1]
    lines = text.split("\n\n")
    assert len(lines) == 200 and all(len(line) < 200 for line in lines)
    assert lines[1] == "###### " + "Part " * 8 + ".".join(["i"] * 9 + ["ii"]) + " Deep"


def test_an_odt_heading_numbered_by_a_list_is_a_heading_with_its_number(tmp_path: Path) -> None:
    # A heading given a list style ("Numbering 123") stands in a `text:list`. Before: read as
    # a list item ("1. Scope"), no longer a heading: its section had no path.
    body = (
        '<text:list text:style-name="L1"><text:list-item><text:h text:outline-level="1">'
        'Scope</text:h><text:list><text:list-item><text:h text:outline-level="2">Limits'
        "</text:h></text:list-item></text:list></text:list-item><text:list-item>"
        '<text:h text:outline-level="1">Terms</text:h></text:list-item></text:list>'
        "<text:p>Defined below.</text:p>"
    )
    assert _read(write_odt(tmp_path / "listed.odt", body))[1].split("\n\n") == [
        "# 1. Scope",
        "## a) Limits",
        "# 2. Terms",
        "Defined below.",
    ]
    # In a list of the outline style itself (not a list style): numbered by the outline.
    body = (
        '<text:list text:style-name="Outline"><text:list-item><text:h text:outline-level="1">'
        "Scope</text:h></text:list-item></text:list>" + _heading(1, "Terms")
    )
    text = _read(write_odt(tmp_path / "outlined.odt", body, styles=OUTLINE))[1]
    assert text == "# 1 Scope\n\n# 2 Terms"


def test_an_odt_list_level_showing_its_parents_numbers_prints_them(tmp_path: Path) -> None:
    # LibreOffice's "Show sublevels" (`text:display-levels`): a legal list's nested items
    # are "1.1.", "1.2.", "2.1.". Before: "1.", "2.", "1." (only the item's own count).
    styles = (
        '<office:styles><text:list-style style:name="Legal"><text:list-level-style-number '
        'text:level="1" style:num-suffix="." style:num-format="1"/><text:list-level-style-number '
        'text:level="2" style:num-suffix="." style:num-format="1" text:display-levels="2"/>'
        "</text:list-style></office:styles>"
    )

    first = f"<text:list>{_item('Notice')}{_item('Cure')}</text:list>"
    second = f"<text:list>{_item('Effect')}</text:list>"
    body = (
        f'<text:list text:style-name="Legal">{_item("Term", first)}'
        f"{_item('Termination', second)}</text:list>"
    )
    assert _read(write_odt(tmp_path / "legal.odt", body, styles=styles))[1].split("\n\n") == [
        "1. Term",
        "1.1. Notice",
        "1.2. Cure",
        "2. Termination",
        "2.1. Effect",
    ]
    # Ten levels shown at most (LibreOffice's lists have ten), however deep the list.
    deep = _item("bottom")
    for _ in range(40):
        deep = f"<text:list-item><text:list>{deep}</text:list></text:list-item>"
    styles = styles.replace('text:display-levels="2"', 'text:display-levels="999"').replace(
        'text:level="2"', 'text:level="41"'
    )
    text = _read(
        write_odt(
            tmp_path / "deep.odt",
            f'<text:list text:style-name="Legal">{deep}</text:list>',
            styles=styles,
        )
    )[1]
    assert text == "1.1.1.1.1.1.1.1.1.1. bottom"


def test_an_odt_list_format_prints_numbers_as_libreoffice_shows_them(tmp_path: Path) -> None:
    # LibreOffice 7.2+ writes a level's whole number as `loext:num-list-format` ("%1%-%2%:"
    # after a Word list `%1-%2:`), which its prefix, suffix and levels shown cannot say: the
    # separator, a level skipped. LibreOffice shows "1-a:" and "(1/1)"; before: "1.a:" and
    # "(b.1)" (the levels above joined by dots).
    loext = "urn:org:documentfoundation:names:experimental:office:xmlns:loext:1.0"
    styles = (
        f'<office:styles><text:list-style xmlns:loext="{loext}" style:name="WWNum9">'
        '<text:list-level-style-number text:level="1" loext:num-list-format="%1%)" '
        'style:num-suffix=")" style:num-format="1"/><text:list-level-style-number '
        'text:level="2" loext:num-list-format="%1%-%2%:" style:num-suffix=":" '
        'style:num-format="a" text:display-levels="2"/><text:list-level-style-number '
        'text:level="3" loext:num-list-format="(%1%/%3%)" style:num-prefix="(" '
        'style:num-suffix=")" style:num-format="1" text:display-levels="2"/>'
        "</text:list-style></office:styles>"
    )

    deep = f"<text:list>{_item('Deep')}</text:list>"
    first = f"<text:list>{_item('One a')}{_item('One b', deep)}</text:list>"
    body = (
        f'<text:list text:style-name="WWNum9">{_item("One", first)}'
        f"{_item('Two', '<text:list>' + _item('Two a') + '</text:list>')}</text:list>"
    )
    assert _read(write_odt(tmp_path / "format.odt", body, styles=styles))[1].split("\n\n") == [
        "1) One",
        "1-a: One a",
        "1-b: One b",
        "(1/1) Deep",
        "2) Two",
        "2-a: Two a",
    ]
    # In the heading numbering too: "1-1 Rotation" as LibreOffice shows it.
    outline = (
        f'<office:styles><text:outline-style xmlns:loext="{loext}" style:name="Outline">'
        '<text:outline-level-style text:level="1" style:num-format="1" '
        'loext:num-list-format="%1%"/><text:outline-level-style text:level="2" '
        'style:num-format="1" text:display-levels="2" loext:num-list-format="%1%-%2%"/>'
        "</text:outline-style></office:styles>"
    )
    body = _heading(1, "Keys") + _heading(2, "Storage") + _heading(2, "Rotation")
    assert _read(write_odt(tmp_path / "outline.odt", body, styles=outline))[1].split("\n\n") == [
        "# 1 Keys",
        "## 1-1 Storage",
        "## 1-2 Rotation",
    ]


def test_an_odt_list_format_prints_every_number_it_names_in_its_order(tmp_path: Path) -> None:
    # A list format may name a level twice or out of order (Word's `%1.%1`, LibreOffice's
    # `%3%/%2%/%1%/%3%`). Word and LibreOffice (not 7.4) print each: before, only the first
    # of each was, the others left as written: "1.%1%", "i/b/1/%3%". A level numbered with no
    # number is left out with what follows it (LibreOffice: "1.i.", not "1.2.i."); its own
    # items show the text around their number only (". One a", as LibreOffice shows them).
    loext = "urn:org:documentfoundation:names:experimental:office:xmlns:loext:1.0"

    def level(at: int, list_format: str, form: str) -> str:
        return (
            f'<text:list-level-style-number text:level="{at}" loext:num-list-format='
            f'"{list_format}" style:num-format="{form}" text:display-levels="{at}"/>'
        )

    styles = (
        f'<office:styles><text:list-style xmlns:loext="{loext}" style:name="Repeat">'
        + level(1, "%1%.%1%", "1") + level(2, "%2%&lt;%1%&gt;", "a")
        + level(3, "%3%/%2%/%1%/%3%", "i")
        + f'</text:list-style><text:list-style xmlns:loext="{loext}" style:name="Skip">'
        + level(1, "%1%.", "1") + level(2, "%1%.%2%.", "") + level(3, "%1%.%2%.%3%.", "i")
        + "</text:list-style></office:styles>"
    )  # fmt: skip
    deep = f"<text:list>{_item('Deep')}</text:list>"
    nested = f"<text:list>{_item('One a', deep)}{_item('One b', deep)}</text:list>"
    body = "".join(
        f'<text:list text:style-name="{name}">{_item("One", nested)}</text:list>'
        for name in ("Repeat", "Skip")
    )
    assert _read(write_odt(tmp_path / "repeat.odt", body, styles=styles))[1].split("\n\n") == [
        "1.1 One",
        "a<1> One a",
        "i/a/1/i Deep",
        "b<1> One b",
        "i/b/1/i Deep",
        "1. One",
        ". One a",
        "1.i. Deep",
        ". One b",
        "1.i. Deep",
    ]


def test_an_odt_list_item_holding_only_a_nested_list_counts_as_libreoffice_counts_it(
    tmp_path: Path,
) -> None:
    # An item with no paragraph of its own, only a nested list, the first at its level: in
    # LibreOffice's list tree a parent ("phantom") that counts, its nested items numbered
    # under it (1.a.) and the items after it on from it (2.). Before: it counted none, "Two"
    # was "1.", "Two a" "1.a.", "One b" "1.a." again. After an item of its level it counts
    # none: its nested items go on under that item ("x" is "2.c.", as LibreOffice shows).
    styles = (
        '<office:styles><text:list-style style:name="Legal"><text:list-level-style-number '
        'text:level="1" style:num-suffix="." style:num-format="1"/><text:list-level-style-number '
        'text:level="2" style:num-suffix="." style:num-format="a" text:display-levels="2"/>'
        '<text:list-level-style-number text:level="3" style:num-suffix="." style:num-format="i" '
        'text:display-levels="3"/></text:list-style></office:styles>'
    )

    def listed(*items: str) -> str:
        return f"<text:list>{''.join(items)}</text:list>"

    def bare(nested: str) -> str:
        return f"<text:list-item>{nested}</text:list-item>"

    body = (
        f'<text:list text:style-name="Legal">{bare(listed(_item("One a")))}'
        + _item("Two", listed(_item("Two a"), bare(listed(_item("Deep"))), _item("Two b")))
        + bare(listed(_item("x")))
        + _item("Three")
        + "</text:list>"
    )
    assert _read(write_odt(tmp_path / "phantom.odt", body, styles=styles))[1].split("\n\n") == [
        "1.a. One a",
        "2. Two",
        "2.a. Two a",
        "2.a.i. Deep",
        "2.b. Two b",
        "2.c. x",
        "3. Three",
    ]


def test_an_odt_list_level_with_no_number_shows_as_libreoffice_shows_it(tmp_path: Path) -> None:
    # A level numbered with no number (`num-format=""`): LibreOffice shows only the text
    # around it (its prefix and suffix, "." here), and leaves it out of the numbers of the
    # levels under it that show their parents' ("1.i."). Before: "- One a" (a bullet) and
    # "1.1.i." (the level printed as digits). A heading level so: its "(" and ")" only.
    styles = (
        '<office:styles><text:list-style style:name="Skip"><text:list-level-style-number '
        'text:level="1" style:num-suffix="." style:num-format="1"/><text:list-level-style-number '
        'text:level="2" style:num-suffix="." style:num-format="" text:display-levels="2"/>'
        '<text:list-level-style-number text:level="3" style:num-suffix="." style:num-format="i" '
        'text:display-levels="3"/><text:list-level-style-number text:level="4" '
        'style:num-format="" text:display-levels="4"/></text:list-style>'
        '<text:outline-style style:name="Outline"><text:outline-level-style text:level="1" '
        'style:num-format="1" style:num-suffix="."/><text:outline-level-style text:level="2" '
        'style:num-format="" style:num-prefix="(" style:num-suffix=")"/></text:outline-style>'
        "</office:styles>"
    )
    bare = f"<text:list>{_item('Bare')}</text:list>"
    deep = f"<text:list>{_item('Deep', bare)}</text:list>"
    nested = f"<text:list>{_item('One a', deep)}</text:list>"
    body = f'<text:list text:style-name="Skip">{_item("One", nested)}</text:list>'
    body += _heading(1, "Keys") + _heading(2, "Storage")
    assert _read(write_odt(tmp_path / "skip.odt", body, styles=styles))[1].split("\n\n") == [
        "1. One",
        ". One a",
        "1.i. Deep",
        "Bare",
        "# 1. Keys",
        "## () Storage",
    ]


def test_an_odt_bibliography_is_read_and_its_other_indexes_left_out(tmp_path: Path) -> None:
    # A bibliography's index body holds the references themselves: in the text a citation
    # shows only its short name ("[Knuth84]"), its author and title are attributes. Before:
    # left out with the table of contents. An alphabetical index, the indexes of figures,
    # tables, objects and a user's are, as the table of contents is, a repeat of the text's
    # words and captions with page numbers the text has none for: left out still.
    def index(kind: str, title: str, entry: str) -> str:
        return (
            f'<text:{kind} text:name="{kind}1"><text:{kind}-source><text:index-title-template>'
            f"{title}</text:index-title-template></text:{kind}-source><text:index-body>"
            f'<text:index-title text:name="{kind}1_Head"><text:p>{title}</text:p>'
            f"</text:index-title><text:p>{entry}</text:p></text:index-body></text:{kind}>"
        )

    body = (
        _heading(1, "Keys") + "<text:p>Rotate keys<text:alphabetical-index-mark text:string-value="
        '"rotation"/> monthly, as in <text:bibliography-mark text:identifier="Knuth84" '
        'text:bibliography-type="book" text:author="Knuth, D." text:title="The TeXbook">'
        "[Knuth84]</text:bibliography-mark>.</text:p>"
        + index("alphabetical-index", "Alphabetical Index", "rotation, 1")
        + index("illustration-index", "Figures", "Figure 1: Key ring<text:tab/>1")
        + index("table-index", "Tables", "Table 1: Quotas<text:tab/>1")
        + index("object-index", "Objects", "Object1<text:tab/>1")
        + index("user-index", "Terms", "rotation<text:tab/>1")
        + index("bibliography", "Bibliography", "[Knuth84] Knuth, D.: The TeXbook, 1984")
    )
    assert _read(write_odt(tmp_path / "indexes.odt", body))[1].split("\n\n") == [
        "# Keys",
        "Rotate keys monthly, as in [Knuth84].",
        "Bibliography",
        "[Knuth84] Knuth, D.: The TeXbook, 1984",
    ]


def test_an_odt_level_naming_no_number_format_is_numbered_as_libreoffice_reads_it(
    tmp_path: Path,
) -> None:
    # LibreOffice always writes `style:num-format`; another program's file may leave it out.
    # LibreOffice (7.4, `--convert-to txt`) reads a level without one as numbered `1`, in a
    # list and in the heading numbering alike, its prefix and suffix around the number. So
    # read before this test too: kept.
    styles = (
        '<office:styles><text:list-style style:name="Absent"><text:list-level-style-number '
        'text:level="1" style:num-suffix="." style:num-format="1"/><text:list-level-style-number '
        'text:level="2" style:num-prefix="(" style:num-suffix=")" text:display-levels="2"/>'
        '<text:list-level-style-number text:level="3" style:num-suffix="." style:num-format="i" '
        'text:display-levels="3"/></text:list-style>'
        '<text:outline-style style:name="Outline"><text:outline-level-style text:level="1" '
        'style:num-format="1" style:num-suffix="."/><text:outline-level-style text:level="2" '
        'style:num-prefix="(" style:num-suffix=")" text:display-levels="2"/>'
        "</text:outline-style></office:styles>"
    )
    deep = f"<text:list>{_item('Deep')}</text:list>"
    nested = f"<text:list>{_item('One a', deep)}</text:list>"
    body = f'<text:list text:style-name="Absent">{_item("One", nested)}{_item("Two")}</text:list>'
    body += _heading(1, "Keys") + _heading(2, "Storage") + _heading(2, "Expiry")
    assert _read(write_odt(tmp_path / "absent.odt", body, styles=styles))[1].split("\n\n") == [
        "1. One",
        "(1.1) One a",
        "1.1.i. Deep",
        "2. Two",
        "# 1. Keys",
        "## (1.1) Storage",
        "## (1.2) Expiry",
    ]


def test_an_odt_heading_numbering_with_no_format_named_shows_what_libreoffice_shows(
    tmp_path: Path,
) -> None:
    # An outline style none of whose levels names a number format: LibreOffice numbers a
    # level naming none `1`, and shows the prefix and suffix of one numbered with no number
    # (`num-format=""`). Before: every heading bare, as if no level were numbered.
    body = _heading(1, "Keys") + _heading(2, "Storage") + _heading(2, "Expiry")
    body += _heading(1, "Tail")
    unnamed = _outline(
        '<text:outline-level-style text:level="1"/><text:outline-level-style text:level="2"/>'
    )
    affixes = _outline(
        '<text:outline-level-style text:level="1" style:num-format="" style:num-prefix="(" '
        'style:num-suffix=")"/><text:outline-level-style text:level="2" style:num-format="" '
        'style:num-suffix="."/>'
    )
    second = _outline(
        '<text:outline-level-style text:level="1" style:num-format=""/>'
        '<text:outline-level-style text:level="2" style:num-suffix="."/>'
    )
    texts = [
        _blocks(tmp_path / f"{name}.odt", body, styles)
        for name, styles in (("unnamed", unnamed), ("affixes", affixes), ("second", second))
    ]
    assert texts == [
        ["# 1 Keys", "## 1 Storage", "## 2 Expiry", "# 2 Tail"],
        ["# () Keys", "## . Storage", "## . Expiry", "# () Tail"],
        ["# Keys", "## 1. Storage", "## 2. Expiry", "# Tail"],
    ]
