"""`match_sources`: the lines of sources' extracted text matching a regex, bounded in time and
in what a reply shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from octobrain.errors import InvalidInput
from octobrain.kernels.regex_match import TimeLimitExceeded, match_lines
from octobrain.knowledge.pages import clip, clip_context
from octobrain.knowledge.results import LineHit, MatchReport

MAX_MATCH_CAP = 10_000
MAX_CONTEXT = 10
# One `match` call searches for at most this long: a pattern within the size limit can still
# cost its whole program at every byte (minutes over a few megabytes).
MATCH_SECONDS = 10.0


def match_sources(
    rows: Sequence[dict[str, Any]], pattern: str, *, ignore_case: bool, cap: int, context: int
) -> MatchReport:
    """The lines of the source `rows` (with their text) matching `pattern`, at most `cap` of
    them with `context` lines around each; a pattern that does not parse, or takes longer than
    `MATCH_SECONDS`, is `InvalidInput` naming it."""
    try:
        found = match_lines(
            [r["text"] for r in rows],
            pattern,
            ignore_case=ignore_case,
            max_matches=cap,
            context=context,
            seconds=MATCH_SECONDS,
        )
    except InvalidInput:
        raise
    except TimeLimitExceeded as exc:
        raise InvalidInput("pattern", str(exc).removeprefix("pattern: ")) from None
    except ValueError as exc:  # the regex engine's parse error
        detail = str(exc).strip().removeprefix("pattern: ").splitlines()[-1]
        detail = detail.removeprefix("error: ")
        raise InvalidInput("pattern", f"invalid regular expression: {detail}") from None
    hits = []
    for m in found.matches:  # a long line shows as a window around its match
        line, start, end = clip(m.line, m.start, m.end)
        hits.append(
            LineHit(
                rows[m.text_index]["uri"],
                rows[m.text_index]["title"],
                m.line_number,
                line,
                start,
                end,
                [clip_context(c) for c in m.before],
                [clip_context(c) for c in m.after],
            )
        )
    return MatchReport(pattern, hits, found.truncated, cap, len(rows))
