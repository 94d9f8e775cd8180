"""What a page's shape would cost readability beyond its pass over each element.

`html_text.ARTICLE_ELEMENTS` bounds that pass; three more of readability's steps (0.9) grow with
the square of a page's shape, not its size, and are estimated here from the tree:

- each block it weighs (`div`, `table`, `ul`, …) is read whole: 250 nested `<div>` over
  20,000 `<p>` (163 kB) took 5.2 s;
- a weighed block without text looks through its siblings for one with text: 3,000 sibling
  `<div><img></div>` (86 kB) took 10.4 s;
- a `div`'s children (but inline ones) followed by text each get that text put in a new `<p>`
  after them, found by walking its children from the first: 20,000 `<img>x` in one `<div>`
  (120 kB) took 7.9 s, and 200,000 (1.2 MB) would take about ten minutes.
"""

from __future__ import annotations

from typing import Any

# The blocks readability weighs one by one (`Document.sanitize`).
_WEIGHED = frozenset(("table", "ul", "div", "aside", "header", "footer", "section"))
# What it first gathers into paragraphs, text after them included (`transform_misused_divs…`).
_INLINE = frozenset(("a", "b", "cite", "code", "em", "font", "i", "small", "span", "strong",
                     "sub", "sup", "u"))  # fmt: skip
# Seconds per element read again (a block's contents, a sibling looked at), and per child
# walked past to place a `<p>`, measured on the pages above.
_REREAD = 1.1e-6
_WALKED = 0.04e-6

# The most seconds a page's shape may add to readability's time. Real pages add far less: at
# most 0.6 s among the 400 largest pages of Rust's docs (the Reference on one page, 4.4 MB).
ARTICLE_EXTRA_SECONDS = 3.0


def extra_seconds(root: Any) -> float:
    """About how long readability's steps above would take on the tree `root`, as it came
    (readability reads the markup itself, chrome and all). One pass over the tree."""
    from lxml import etree

    rereads = walked = around = 0
    # For each open element: whether it holds text, whether it is a `div`, its children so
    # far, then the run of textless children last closed in it and how many are weighed.
    open_: list[list[Any]] = []
    for event, el in etree.iterwalk(root, events=("start", "end"), tag=etree.Element):
        weighed = el.tag in _WEIGHED
        if event == "start":
            rereads += around
            around += weighed
            open_.append([bool(el.text and not el.text.isspace()), el.tag == "div", 0, 0, 0])
            continue
        around -= weighed
        has_text, _, _, run, blocks = open_.pop()
        rereads += run * blocks
        if not open_:
            break
        parent = open_[-1]
        if el.tail and not el.tail.isspace():
            parent[0] = True
            if parent[1] and el.tag not in _INLINE:
                walked += parent[2]
        parent[2] += 1
        if has_text:
            parent[0] = True
            rereads += parent[3] * parent[4]
            parent[3] = parent[4] = 0
        else:
            parent[3] += 1
            parent[4] += weighed
    return rereads * _REREAD + walked * _WALKED
