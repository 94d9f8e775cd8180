"""Readable pure-Python reference for the text analyser (`octobrain.text.analyze`); the parity
tests compare against it. The other kernels' references are in reference.py."""

from __future__ import annotations

import unicodedata

from snowballstemmer.english_stemmer import EnglishStemmer

# ---- text analysis ----
#
# Reference for `octobrain.text.analyze`. The word split is UAX #29 (Unicode default word
# boundaries) restricted to the scripts the parity tests draw from: Latin, Greek, Cyrillic,
# CJK ideographs, Hiragana, digits, ASCII punctuation and combining marks. Katakana, Hebrew,
# South-East Asian scripts, emoji and regional indicators are out of this reference's scope.
# Stemming: the pure-Python Snowball English stemmer of snowballstemmer 2.2.0, the same
# algorithm version as rust-stemmers (newer Snowball releases changed a few English rules).

# Lucene's English stopword list (as bm25s "en"), the same 33 words as the Rust const.
_STOPWORD_TEXT = """a an and are as at be but by for if in into is it no not of on or such that the
their then there these they this to was will with"""
ENGLISH_STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_MID_LETTER = set(":\u00b7\u0387\u055f\u05f4\u2027\ufe13\ufe55\uff1a")
_MID_NUM = set(",;\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b")
_MID_NUM_LET = set(".\u2018\u2019\u2024\ufe52\uff07\uff0e")
_NEWLINES = set("\r\n\x0b\x0c\x85\u2028\u2029")
_NOT_ALETTER = ("CJK", "HIRAGANA", "KATAKANA", "IDEOGRAPHIC")


def word_break_class(c: str) -> str:
    """The UAX #29 Word_Break class of `c` (for the scripts in scope)."""
    cat = unicodedata.category(c)
    if c in _NEWLINES:
        return "Newline"
    if cat[0] == "M" or c in "\u200c\u200d" or (cat == "Cf" and c != "\u200b"):
        return "Extend"  # Extend, Format and ZWJ behave alike here (rule WB4)
    if c == "'":
        return "MidNumLetQ"
    if c in _MID_NUM_LET:
        return "MidNumLetQ"
    if c in _MID_LETTER:
        return "MidLetter"
    if c in _MID_NUM:
        return "MidNum"
    if cat == "Pc" or c == "\u202f":
        return "ExtendNumLet"
    if cat == "Nd":
        return "Numeric"
    if (cat[0] == "L" or cat == "Nl") and not unicodedata.name(c, "").startswith(_NOT_ALETTER):
        return "ALetter"
    return "Other"


def _joins(before: str | None, left: str, right: str, after: str | None) -> bool:
    """Whether UAX #29 keeps `left` and `right` in one word (rules WB5-WB13b)."""
    letter_or_num = ("ALetter", "Numeric")
    if left in letter_or_num and right in letter_or_num:
        return True  # WB5, WB8, WB9, WB10
    mid_letter = ("MidLetter", "MidNumLetQ")
    mid_num = ("MidNum", "MidNumLetQ")
    if left == "ALetter" and right in mid_letter and after == "ALetter":
        return True  # WB6
    if before == "ALetter" and left in mid_letter and right == "ALetter":
        return True  # WB7
    if left == "Numeric" and right in mid_num and after == "Numeric":
        return True  # WB12
    if before == "Numeric" and left in mid_num and right == "Numeric":
        return True  # WB11
    if right == "ExtendNumLet" and left in (*letter_or_num, "ExtendNumLet"):
        return True  # WB13a
    return left == "ExtendNumLet" and right in letter_or_num  # WB13b


def split_words(text: str) -> list[str]:
    """UAX #29 segments of `text` that contain a letter or a digit."""
    return [s for s in _segments(text) if _is_word(s)]


def _is_word(segment: str) -> bool:
    return any(unicodedata.category(c)[0] in "LN" for c in segment)


_HYPHENS = "-\u2010\u2011"


def words_and_compounds(text: str) -> list[str]:
    """The words of `text`, each run of words joined by single hyphens (`IL-6`) followed by
    the run joined without them (`IL6`)."""
    out: list[str] = []
    run: list[str] = []
    hyphen = False
    end = 0
    for seg in _segments(text):
        end += len(seg)
        if _is_word(seg):
            if not hyphen and run:
                out += ["".join(run)] if len(run) > 1 else []
                run = []
            run.append(seg)
            out.append(seg + _language_mark(text, end, seg))
            out += identifier_parts(seg)
            hyphen = False
        elif not hyphen and run and len(seg) == 1 and seg in _HYPHENS:
            hyphen = True
        else:
            out += ["".join(run)] if len(run) > 1 else []
            run, hyphen = [], False
    out += ["".join(run)] if len(run) > 1 else []
    return out


def _language_mark(text: str, end: int, word: str) -> str:
    """The `++` or `#` after a word ending in a letter or digit (`C++`, `C#`), with no letter
    or digit after the mark; else ""."""
    if not _is_word(word[-1]):
        return ""
    for mark in ("++", "#"):
        if text.startswith(mark, end):
            after = text[end + len(mark) : end + len(mark) + 1]
            return "" if after and _is_word(after) else mark
    return ""


def identifier_parts(word: str) -> list[str]:
    """The parts of an identifier word (`max_connections`, `pgbouncer.ini`) of three or more
    characters, or none when that leaves the word whole: cut at `_`, and at `.`/`:` without
    digits on both sides."""
    parts = [""]
    for i, c in enumerate(word):
        near = (word[i - 1] if i else "", word[i + 1] if i + 1 < len(word) else "")
        digits = all(n and unicodedata.category(n)[0] == "N" for n in near)
        if c == "_" or (c in ".:" and not digits):
            parts.append("")
        else:
            parts[-1] += c
    kept = [p for p in parts if len(p) >= 3 and _is_word(p)]
    out = []
    for part in kept:
        if kept != [word]:
            out.append(part)
        number = part[1:] if part[:1] in ("v", "V") else ""  # a version's number, `v` apart
        if "." in number and number[0] in _DIGITS and set(number) <= set(_DIGITS + "."):
            out.append(number)
    return out


_DIGITS = "0123456789"


def _segments(text: str) -> list[str]:
    """All UAX #29 segments of `text`."""
    # WB4: a mark (Extend/Format/ZWJ) sticks to the character before it, unless that is a
    # newline or the start of text; such glued units are then classed by their first char.
    units: list[str] = []
    for c in text:
        if units and word_break_class(c) == "Extend" and units[-1][-1] not in _NEWLINES:
            units[-1] += c
        else:
            units.append(c)
    classes = [word_break_class(u[0]) for u in units]
    segments: list[str] = []
    for i, unit in enumerate(units):
        before = classes[i - 2] if i >= 2 else None
        after = classes[i + 1] if i + 1 < len(units) else None
        crlf = i > 0 and units[i - 1] == "\r" and unit == "\n"  # WB3
        if i > 0 and (crlf or _joins(before, classes[i - 1], classes[i], after)):
            segments[-1] += unit
        else:
            segments.append(unit)
    return segments


_GREEK = {
    **dict(
        zip(
            "αβγδεζηθικλμνξοπρστυφχψω",
            [
                "alpha",
                "beta",
                "gamma",
                "delta",
                "epsilon",
                "zeta",
                "eta",
                "theta",
                "iota",
                "kappa",
                "lambda",
                "mu",
                "nu",
                "xi",
                "omicron",
                "pi",
                "rho",
                "sigma",
                "tau",
                "upsilon",
                "phi",
                "chi",
                "psi",
                "omega",
            ],
            strict=True,
        )
    ),
    **dict(
        zip(
            "ϐϵϑϰµϖϱςϕ",
            ["beta", "epsilon", "theta", "kappa", "mu", "pi", "rho", "sigma", "phi"],
            strict=True,
        )
    ),
}


def spell_greek(word: str) -> str:
    """Greek letters spelled out in a word holding a Latin letter or digit, or of <= 2 chars."""
    if not any(c in _GREEK for c in word):
        return word
    if not (any(c.isascii() and c.isalnum() for c in word) or len(word) <= 2):
        return word
    return "".join(_GREEK.get(c, c) for c in word)


# Invisible format characters the analyser drops (the soft hyphen, zero-width spaces and
# joiners, direction marks, the word joiner, the byte order mark, tag characters, …).
_INVISIBLE = (
    (0xAD, 0xAD), (0x61C, 0x61C), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0xFEFF, 0xFEFF), (0x1BCA0, 0x1BCA3), (0xE0000, 0xE0FFF),
)  # fmt: skip


def fold(word: str) -> str:
    """ASCII folding, per character: invisible format characters dropped, then NFKD minus
    marks if that is all ASCII, else unchanged."""
    out = ""
    for c in word:
        if c.isascii():
            out += c
        elif c in "\u2018\u2019":
            out += "'"
        elif any(lo <= ord(c) <= hi for lo, hi in _INVISIBLE):
            continue
        else:
            base = "".join(
                d for d in unicodedata.normalize("NFKD", c) if unicodedata.category(d)[0] != "M"
            )
            if not base:  # a bare mark: dropped after ASCII output, kept on other scripts
                out += "" if (not out or out[-1].isascii()) else c
            else:
                out += base if base.isascii() else c
    return out


_STEMMER = EnglishStemmer()


def analyze_text(text: str, stem: bool = True, stopwords: bool = True) -> list[str]:
    """Words and joined compounds → lowercase → fold → drop stopwords → Snowball English stem."""
    tokens = []
    for word in words_and_compounds(text):
        token = spell_greek(fold(word.lower()))
        if not token or (stopwords and token in ENGLISH_STOPWORDS):
            continue
        tokens.append(_STEMMER.stemWord(token) if stem else token)
    return tokens
