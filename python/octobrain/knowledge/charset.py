"""The text of a web page's bytes, decoded as a browser would (WHATWG's sniffing, in short).

A byte order mark first, then the charset of the HTTP Content-Type, then one a `<meta>` (or an
XML declaration) names in the page's first 8 KiB, then UTF-8 if the bytes are UTF-8, else
windows-1252. A named charset decodes with replacement characters where the bytes belie it; a
name that is not a web encoding is passed over. Pages are decoded here, not by readability: given
bytes, it looks for their charset with regexes that are quadratic on some pages (100 kB of
`<meta ` in Latin-1 took 52 s).
"""

from __future__ import annotations

import codecs
import re

META_BYTES = 8192  # how far into a page a `<meta>` charset is looked for

# The encodings of the WHATWG Encoding Standard, as Python's codecs name them. Python knows
# others a page could name (`rot13`, `unicode_escape`, `punycode`, …): text codecs no browser
# applies, some slower than linear.
_WEB = frozenset((
    "utf-8", "utf-16-le", "utf-16-be", "cp866", "iso8859-2", "iso8859-3", "iso8859-4",
    "iso8859-5", "iso8859-6", "iso8859-7", "iso8859-8", "iso8859-10", "iso8859-13",
    "iso8859-14", "iso8859-15", "iso8859-16", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic",
    "cp874", "cp1250", "cp1251", "cp1252", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257",
    "cp1258", "gbk", "gb18030", "big5hkscs", "euc_jp", "iso2022_jp", "cp932", "cp949",
))  # fmt: skip
# Labels a browser reads as a larger encoding: Latin-1 and ASCII pages are windows-1252 ones.
_READ_AS = {
    "iso8859-1": "cp1252", "ascii": "cp1252", "iso8859-9": "cp1254",
    "iso8859-11": "cp874", "tis-620": "cp874", "gb2312": "gbk", "big5": "big5hkscs",
    "euc_kr": "cp949", "shift_jis": "cp932", "utf-16": "utf-16-le",
}  # fmt: skip
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([a-z0-9._:-]{1,40})")
_XML_ENCODING = re.compile(r"<\?xml[^>]{0,200}?encoding\s*=\s*[\"']([a-z0-9._:-]{1,40})")
_TAG_END = re.compile(r"[\s/]")


def decode_page(data: bytes, charset: str = "") -> str:
    """The text of an HTML page; `charset` is what its HTTP Content-Type named, if anything."""
    text = decode_named(data, charset, page=True)
    if text is not None:
        return text
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:  # five bytes windows-1252 leaves undefined
        return data.decode("latin-1")


def decode_named(data: bytes, charset: str = "", *, page: bool = False) -> str | None:
    """`data` decoded as its byte order mark says, else as `charset` (an HTTP Content-Type's)
    names, else (for a `page`) as its own `<meta>` or XML declaration names; None when none
    of them names a web encoding. A named encoding the bytes belie gives replacement
    characters."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(name, "replace")
    name = web_encoding(charset)
    if not name and page:
        name = web_encoding(_declared(data[:META_BYTES]), in_page=True)
    return data.decode(name, "replace") if name else None


def web_encoding(label: str, *, in_page: bool = False) -> str:
    """The Python codec a browser would use for a charset `label`; "" when it would use none.

    A page that names UTF-16 in its own markup was read as ASCII to find that name: UTF-8."""
    label = label.strip().lower()
    if not label or len(label) > 40:
        return ""
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return ""
    name = _READ_AS.get(name, name)
    if in_page and name.startswith("utf-16"):
        return "utf-8"
    return name if name in _WEB else ""


def _declared(head: bytes) -> str:
    """The charset a `<meta>` tag or an XML declaration names in `head`, else "".

    One pass: each tag is cut at the next `<`, so text full of `<meta <meta …` is read once."""
    text = head.decode("latin-1").lower()  # the labels are ASCII; any byte decodes
    if text.startswith("<?xml"):
        found = _XML_ENCODING.match(text)
        if found:
            return found.group(1)
    for tag in text.split("<")[1:]:
        if tag.startswith("meta") and _TAG_END.match(tag, 4):
            end = tag.find(">")
            found = _CHARSET.search(tag, 0, end if end >= 0 else len(tag))
            if found:
                return found.group(1)
    return ""
