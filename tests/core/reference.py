"""Readable pure-Python references for the Rust kernels. Slow on purpose; clarity first."""

from __future__ import annotations

# ---- text analysis ----
#
# Reference for `octobrain.text.analyze`. The word split is UAX #29 (Unicode default word
# boundaries) restricted to the scripts the parity tests draw from: Latin, Greek, Cyrillic,
# CJK ideographs, Hiragana, digits, ASCII punctuation and combining marks. Katakana, Hebrew,
# South-East Asian scripts, emoji and regional indicators are out of this reference's scope.
# Stemming: the pure-Python Snowball English stemmer of snowballstemmer 2.2.0, the same
# algorithm version as rust-stemmers (newer Snowball releases changed a few English rules).
import math
import unicodedata

from snowballstemmer.english_stemmer import EnglishStemmer

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
    return [s for s in segments if any(unicodedata.category(c)[0] in "LN" for c in s)]


def fold(word: str) -> str:
    """ASCII folding, per character: NFKD minus marks if that is all ASCII, else unchanged."""
    out = ""
    for c in word:
        if c.isascii():
            out += c
        elif c in "\u2018\u2019":
            out += "'"
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
    """Words → lowercase → fold → drop stopwords → Snowball English stem."""
    tokens = []
    for word in split_words(text):
        token = fold(word.lower())
        if not token or (stopwords and token in ENGLISH_STOPWORDS):
            continue
        tokens.append(_STEMMER.stemWord(token) if stem else token)
    return tokens


# ---- bm25 ----
#
# Reference for `octobrain.bm25.BM25Index`: Lucene BM25 computed from scratch for every query,
# in float64. Duplicate query terms count once per occurrence (as in Lucene and bm25s).


def bm25_scores(
    docs: list[list[str]], query: list[str], k1: float = 1.2, b: float = 0.75
) -> list[float]:
    """BM25 score of every document (already analysed) for an analysed query."""
    n = len(docs)
    if n == 0:
        return []
    avgdl = sum(len(d) for d in docs) / n or 1.0
    scores = [0.0] * n
    for term in query:
        df = sum(1 for d in docs if term in d)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, doc in enumerate(docs):
            tf = doc.count(term)
            if tf:
                norm = k1 * (1 - b + b * len(doc) / avgdl)
                scores[i] += idf * tf * (k1 + 1) / (tf + norm)
    return scores


def bm25_top_k(scores: list[float], k: int) -> list[tuple[int, float]]:
    """Positions with a positive score, best first, ties by position; at most k."""
    ranked = sorted((-s, i) for i, s in enumerate(scores) if s > 0)
    return [(i, -s) for s, i in ranked[:k]]
