"""ODT list and heading levels their style does not define, numbered as LibreOffice numbers
them (7.4, `--convert-to txt` and `html` alike)."""

from __future__ import annotations

from pathlib import Path

from .test_odt_structure import _blocks, _heading, _item, _outline


def test_an_odt_heading_level_its_outline_style_leaves_out_has_no_number(tmp_path: Path) -> None:
    # LibreOffice reads a level the outline style does not define as numbered with no
    # number: its headings bare, and left out of its sublevels' numbers. Before: "1.1
    # Storage" and "2.1.a Deep", the level left out counted as digits.
    body = _heading(1, "Keys") + _heading(2, "Storage") + _heading(2, "Expiry")
    body += _heading(1, "Tail") + _heading(2, "Again") + _heading(3, "Deep")
    second = _outline(
        '<text:outline-level-style text:level="2" style:num-format="1" text:display-levels="2"/>'
    )
    first_and_third = _outline(
        '<text:outline-level-style text:level="1" style:num-format="1"/>'
        '<text:outline-level-style text:level="3" style:num-format="a" text:display-levels="3"/>'
    )
    texts = [
        _blocks(tmp_path / f"{name}.odt", body, styles)
        for name, styles in (("second", second), ("outer", first_and_third))
    ]
    assert texts == [
        ["# Keys", "## 1 Storage", "## 2 Expiry", "# Tail", "## 1 Again", "### Deep"],
        ["# 1 Keys", "## Storage", "## Expiry", "# 2 Tail", "## Again", "### 2.a Deep"],
    ]


def test_an_odt_list_level_its_style_leaves_out_is_numbered_as_libreoffice_numbers_it(
    tmp_path: Path,
) -> None:
    # LibreOffice numbers a level a list style does not define `1.` (its new list's
    # default), and counts it as digits in its sublevels' numbers (`1.1)`, as before).
    # Before: bulleted, "- One". A list of no style, or of a style the document lacks, is
    # bulleted still, as LibreOffice bullets it.
    def styled(levels: str) -> str:
        return (
            f'<office:styles><text:list-style style:name="Gaps">{levels}</text:list-style>'
            "</office:styles>"
        )

    deep = f"<text:list>{_item('Deep')}</text:list>"
    nested = f"<text:list>{_item('One a', deep)}{_item('One b')}</text:list>"
    items = f"{_item('One', nested)}{_item('Two')}"
    second = styled(
        '<text:list-level-style-number text:level="2" style:num-suffix=")" '
        'style:num-format="1" text:display-levels="2"/>'
    )
    outer = styled(
        '<text:list-level-style-number text:level="1" style:num-suffix=")" '
        'style:num-format="A"/><text:list-level-style-number text:level="3" '
        'style:num-format="i" style:num-suffix="." text:display-levels="3"/>'
    )
    cases = (
        ("second", f'<text:list text:style-name="Gaps">{items}</text:list>', second),
        ("outer", f'<text:list text:style-name="Gaps">{items}</text:list>', outer),
        ("none", f'<text:list text:style-name="Gaps">{items}</text:list>', styled("")),
        ("lacking", f'<text:list text:style-name="Lacking">{items}</text:list>', second),
    )
    texts = [_blocks(tmp_path / f"{name}.odt", body, styles) for name, body, styles in cases]
    assert texts == [
        ["1. One", "1.1) One a", "1. Deep", "1.2) One b", "2. Two"],
        ["A) One", "1. One a", "A.1.i. Deep", "2. One b", "B) Two"],
        ["1. One", "1. One a", "1. Deep", "2. One b", "2. Two"],
        ["- One", "- One a", "- Deep", "- One b", "- Two"],
    ]
