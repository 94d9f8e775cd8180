"""`match_sources`: the lines of sources' extracted text matching a regex, bounded in time, in
what a reply shows, and in the texts held at once."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from octobrain.errors import InvalidInput
from octobrain.kernels.regex_match import LineMatch, MatchResult, TimeLimitExceeded, match_lines
from octobrain.knowledge.pages import LINE_CHARS, clip, clip_context
from octobrain.knowledge.results import LineHit, MatchReport
from octobrain.models import PATTERN_BYTES
from octobrain.safe_text import byte_len
from octobrain.store.schema import SOURCES, check_knowledge
from octobrain.store.sql import sql_in

if TYPE_CHECKING:
    from octobrain.knowledge.store import KnowledgeStore

MAX_MATCH_CAP = 10_000
MAX_CONTEXT = 10
# One `match` call searches for at most this long: a pattern within the size limit can still
# cost its whole program at every byte (minutes over a few megabytes).
MATCH_SECONDS = 10.0
# Sources whose texts are read and searched at a time (each text up to `max_source_bytes`):
# a match over a project's every document holds this many, not all of them.
MATCH_BATCH = 16
_STOPPED_AT = re.compile(r"stopped in text (\d+) of")


def source_texts(kstore: KnowledgeStore, rows: Sequence[dict[str, Any]]) -> list[str]:
    """The extracted texts of the source `rows` (without theirs), each checked against its
    checksum before it is searched; a source deleted meanwhile has no lines."""
    read = kstore.scan_sources(sql_in("id", [r["id"] for r in rows]), with_text=True)
    for row in read:  # never a changed text searched and shown as the document's
        check_knowledge(row, SOURCES)
    texts = {row["id"]: row["text"] for row in read}
    return [texts.get(r["id"], "") for r in rows]


def match_sources(
    kstore: KnowledgeStore,
    rows: Sequence[dict[str, Any]],
    pattern: str,
    *,
    ignore_case: bool,
    cap: int,
    context: int,
    texts_of: Callable[[Sequence[dict[str, Any]]], list[str]] | None = None,
) -> MatchReport:
    """The lines of the source `rows` (read without their texts) matching `pattern`, at most
    `cap` of them with `context` lines around each, the texts read `MATCH_BATCH` sources at a
    time (by `texts_of`, else from the index); a pattern over `PATTERN_BYTES`, one that does
    not parse, or one taking longer than `MATCH_SECONDS` in all, is `InvalidInput` naming it."""
    size = byte_len(pattern)
    if size > PATTERN_BYTES:  # before it is parsed: the parse's memory grows with it
        raise InvalidInput(
            "pattern", f"must be at most {PATTERN_BYTES:,} bytes of UTF-8, got {size:,}"
        )
    read = texts_of if texts_of is not None else partial(source_texts, kstore)
    deadline = time.monotonic() + MATCH_SECONDS
    hits: list[LineHit] = []
    truncated = False
    for at in range(0, max(len(rows), 1), MATCH_BATCH):  # no rows: the pattern still parsed
        batch = rows[at : at + MATCH_BATCH]
        # Once the cap is reached, a later batch is searched only for whether one more matches.
        want = cap - len(hits) or 1
        texts = read(batch) if batch else []  # let go before the next batch
        found = _match(texts, pattern, ignore_case, want, context, deadline, at, len(rows))
        del texts
        if len(hits) == cap:
            truncated = bool(found.matches)
        else:
            hits.extend(_hit(batch[m.text_index], m) for m in found.matches)
            truncated = found.truncated
        if truncated:
            break
    return MatchReport(pattern, hits, truncated, cap, len(rows))


def _match(
    texts: list[str],
    pattern: str,
    ignore_case: bool,
    cap: int,
    context: int,
    deadline: float,
    offset: int,
    total: int,
) -> MatchResult:
    try:
        return match_lines(
            texts,
            pattern,
            ignore_case=ignore_case,
            max_matches=cap,
            context=context,
            seconds=max(0.0, deadline - time.monotonic()),
            context_chars=LINE_CHARS + 1,  # what `clip_context` shows, and whether it cut
        )
    except InvalidInput:
        raise
    except TimeLimitExceeded as exc:  # counted over every source, not this batch's
        stopped = _STOPPED_AT.search(str(exc))
        where = offset + (int(stopped.group(1)) if stopped else 1)
        raise InvalidInput(
            "pattern",
            f"took more than {MATCH_SECONDS:g} s, stopped in text {where} of {total}; use a "
            "simpler pattern or search fewer sources",
        ) from None
    except ValueError as exc:  # the regex engine's parse error
        detail = str(exc).strip().removeprefix("pattern: ").splitlines()[-1]
        detail = detail.removeprefix("error: ")
        raise InvalidInput("pattern", f"invalid regular expression: {detail}") from None


def _hit(row: dict[str, Any], m: LineMatch) -> LineHit:
    """A matching line as a reply shows it: a long line as a window around its match."""
    line, start, end = clip(m.line, m.start, m.end)
    return LineHit(
        row["uri"],
        row["title"],
        m.line_number,
        line,
        start,
        end,
        [clip_context(c) for c in m.before],
        [clip_context(c) for c in m.after],
    )
