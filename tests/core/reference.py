"""Readable pure-Python references for the Rust kernels; the parity tests compare against these.

They favour clarity over speed. Each kernel keeps its own section under a
`# ---- <kernel> ----` header.
"""

from __future__ import annotations

import math
import re
import unicodedata

import numpy as np
from snowballstemmer.english_stemmer import EnglishStemmer

# ---- fusion ----
# Sums are plain left-to-right loops in list order (not `sum`, which compensates rounding on
# Python >= 3.12), so the scores are bit-identical to the core's.


def _fusion_order(rows: dict[int, tuple[float, int]], limit: int) -> tuple[list[int], list[float]]:
    """Sort {id: (score, best_rank)} by score desc, best rank asc, id asc; keep `limit`."""
    ranked = sorted(rows.items(), key=lambda item: (-item[1][0], item[1][1], item[0]))[:limit]
    return [doc for doc, _ in ranked], [score for _, (score, _) in ranked]


def rrf(
    lists: list[list[int]], weights: list[float] | None, k: float, limit: int
) -> tuple[list[int], list[float]]:
    weights = [1.0] * len(lists) if weights is None else weights
    rows: dict[int, tuple[float, int]] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        seen: set[int] = set()
        for position, doc in enumerate(ranked):
            if doc in seen:
                continue  # a repeat counts only at its first (best) rank
            seen.add(doc)
            rank = position + 1
            score, best = rows.get(doc, (0.0, rank))
            rows[doc] = (score + weight / (k + rank), min(best, rank))
    return _fusion_order(rows, limit)


def _normalise(values: list[float], method: str) -> tuple[list[float], float]:
    """Normalised values and what a missing document gets from this list."""
    if not values:
        return [], 0.0
    if method == "minmax":
        lo, hi = min(values), max(values)
        if hi - lo > 0.0:
            return [(v - lo) / (hi - lo) for v in values], 0.0
        return [1.0] * len(values), 0.0
    total = 0.0
    for v in values:
        total += v
    mean = total / len(values)
    squares = 0.0
    for v in values:
        squares += (v - mean) * (v - mean)
    std = math.sqrt(squares / len(values))
    z = [(v - mean) / std if std > 0.0 else 0.0 for v in values]
    return z, min(z)


def score_fusion(
    lists: list[list[int]],
    scores: list[list[float]],
    weights: list[float] | None,
    method: str,
    limit: int,
) -> tuple[list[int], list[float]]:
    weights = [1.0] * len(lists) if weights is None else weights
    total_weight = 0.0
    for w in weights:
        total_weight += w
    best_rank: dict[int, int] = {}
    normalised: list[tuple[dict[int, float], float]] = []
    for ranked, raw in zip(lists, scores, strict=True):
        first: dict[int, float] = {}
        for position, (doc, score) in enumerate(zip(ranked, raw, strict=True)):
            if doc not in first:
                first[doc] = score
                best_rank[doc] = min(best_rank.get(doc, position + 1), position + 1)
        values, missing = _normalise(list(first.values()), method)
        normalised.append((dict(zip(first, values, strict=True)), missing))
    fused = dict.fromkeys(best_rank, 0.0)
    for (norm, missing), w in zip(normalised, weights, strict=True):
        share = w / total_weight
        for doc in fused:
            if doc in norm:
                fused[doc] += share * norm[doc]
            elif method == "zscore":
                fused[doc] += share * missing
    return _fusion_order({d: (fused[d], best_rank[d]) for d in fused}, limit)


# ---- decay ----


def decayed_importance(
    importance: list[float],
    last_accessed: list[float],
    access_count: list[int],
    now: float,
    half_life_days: float,
    access_boost_factor: float,
    min_importance: float,
) -> list[float]:
    out = []
    for base, seen, count in zip(importance, last_accessed, access_count, strict=True):
        days = max(0.0, now - seen) / 86400.0  # a future access counts as "just now"
        fade = 0.5 ** (days / half_life_days)
        boost = 1.0 + access_boost_factor * math.log1p(count)
        out.append(min(1.0, max(min_importance, base * fade * boost)))
    return out


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


# ---- bm25 ----
#
# Reference for `octobrain.kernels.bm25.BM25Index`: Lucene BM25 computed from scratch for every
# query, in float64. Duplicate query terms count once per occurrence (as in Lucene and bm25s).


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


# ---- clustering ----
# Plain agglomerative clustering over the full similarity matrix: repeatedly merge the pair of
# clusters with the highest linkage (min or mean of cross-pair cosines) that reaches the cutoff;
# ties go to the smallest (first row of A, first row of B). Clusters are kept sorted by first row.

CLUSTER_TIE_EPS = 1e-5


def cosine_clusters(
    vectors: np.ndarray,
    threshold: float,
    min_cluster_size: int,
    linkage: str = "complete",
    margins: list[float] | None = None,
) -> list[list[int]]:
    """Reference clustering. If `margins` is given, append each step's distance to a decision
    flip (linkage vs cutoff, best vs runner-up) so tests can skip knife-edge inputs."""
    x = np.asarray(vectors, dtype=np.float64)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    sim = x @ x.T
    cutoff = threshold - CLUSTER_TIE_EPS
    clusters = [[i] for i in range(len(x))]

    def link(a: list[int], b: list[int]) -> float:
        block = sim[np.ix_(a, b)]
        return float(block.min() if linkage == "complete" else block.mean())

    while True:
        scored = [
            (link(a, b), ia, ib)
            for ia, a in enumerate(clusters)
            for ib, b in enumerate(clusters)
            if ia < ib
        ]
        if margins is not None and scored:
            values = sorted((s for s, _, _ in scored), reverse=True)
            near_cutoff = min(abs(s - cutoff) for s in values)
            top_gap = values[0] - values[1] if len(values) > 1 and values[1] >= cutoff else 1.0
            margins.append(min(near_cutoff, top_gap))
        mergeable = [(-s, clusters[ia][0], clusters[ib][0], ia, ib) for s, ia, ib in scored]
        mergeable = [m for m in mergeable if -m[0] >= cutoff]
        if not mergeable:
            break
        _, _, _, ia, ib = min(mergeable)
        clusters[ia] = clusters[ia] + clusters[ib]
        del clusters[ib]

    kept = [sorted(c) for c in clusters if len(c) >= min_cluster_size]
    return sorted(kept, key=lambda c: (-len(c), c[0]))


# ---- regex match ----
# Split every text into lines (on "\n", trailing "\r" stripped, no empty line after a final
# "\n"), search each line with `re`, report the first match per line, stop after the cap.


def split_lines(text: str) -> list[str]:
    """The lines of `text` as the kernel defines them."""
    if not text:
        return []
    body = text[:-1] if text.endswith("\n") else text
    return [line[:-1] if line.endswith("\r") else line for line in body.split("\n")]


def match_lines(
    texts: list[str], pattern: str, ignore_case: bool, max_matches: int, context: int
) -> tuple[list[tuple[int, int, str, int, int, list[str], list[str]]], bool]:
    """Reference line matching: (matches, truncated)."""
    rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    found: list[tuple[int, int, str, int, int, list[str], list[str]]] = []
    for ti, text in enumerate(texts):
        lines = split_lines(text)
        for li, line in enumerate(lines):
            m = rx.search(line)
            if m is None:
                continue
            if len(found) == max_matches:
                return found, True
            before = lines[max(0, li - context) : li]
            after = lines[li + 1 : li + 1 + context]
            found.append((ti, li + 1, line, m.start(), m.end(), before, after))
    return found, False


def coverage(docs: list[list[str]], query: list[str], positions: list[int]) -> list[float]:
    """idf-weighted share of the query's distinct terms each document holds (Lucene idf over
    the documents that are not None; a removed document is None and holds nothing)."""
    live = [set(d) for d in docs if d is not None]
    n = max(1, len(live))
    idf = {}
    for t in dict.fromkeys(query):
        df = sum(t in d for d in live)
        idf[t] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    total = sum(idf.values())
    if not idf:
        return [0.0] * len(positions)
    held = [set(d) if d is not None else set() for d in docs]
    return [sum(w for t, w in idf.items() if t in held[p]) / total for p in positions]
