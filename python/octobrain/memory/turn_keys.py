"""The key of a chat turn that has no id of its own, which its memory id derives from.

A turn with a time is the turn said then, in its session (when the export names it), by its
speaker, in its words: `said_key`, numbered by occurrence for a true repeat of all four within
one call or file. So a transcript sent over MCP in overlapping windows (turns 1-50, then
40-90) names turns 40-50 alike both times, and two different "ok" turns at the same place of
two calls are two turns. A session found by silence is left out: its number depends on where
the call starts.

A turn without a time has nothing but its place to tell it from the same words said again, so
it keeps the key of its place in its session (`placed_key`). That was every such turn's key
before; a timed turn's former keys (`former_keys`) are read as the turn too, so a store that
holds turns under them gets none of them a second time.
"""

from __future__ import annotations

import hashlib
import unicodedata
from datetime import UTC, datetime

from octobrain.memory.turn_fields import name_as_written, speaker_name

__all__ = [
    "Occurrences",
    "before_bidi",
    "former_keys",
    "placed_key",
    "said_as_written",
    "said_key",
]


def _nfd(name: str) -> str:
    return unicodedata.normalize("NFD", name)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def placed_key(session: str, place: int, speaker: str, text: str) -> str:
    """The key of the turn at `place` (1-based, blank turns not counted) of `session`, its
    words as written (not stripped)."""
    return f"{session}#{place}:{_digest(speaker, text)}"


def said_key(session: str, moment: datetime, speaker: str, text: str, occurrence: int) -> str:
    """The key of what `speaker` said at `moment` in `session` ("" for a session found by
    silence): the `occurrence`-th time (1-based) the same was said then."""
    when = moment.astimezone(UTC).isoformat()
    return f"said:{_digest(session, when, speaker, text, str(occurrence))}"


def former_keys(
    session: str, place: int, speaker: str, text: str, before_bidi: tuple[str, str] | None
) -> tuple[str, ...]:
    """The keys earlier versions gave a turn: its place's key, that key with the speaker and
    session as written before bidirectional controls were dropped from them (`before_bidi`:
    those names, None when they held none), and with them decomposed (NFD: an export written
    so, its names kept as written before they were read in NFC)."""
    keys = [placed_key(session, place, speaker, text)]
    if before_bidi is not None:
        keys.append(placed_key(before_bidi[1], place, before_bidi[0], text))
    decomposed = placed_key(_nfd(session), place, _nfd(speaker), text)
    return tuple(dict.fromkeys((*keys, decomposed)))


def said_as_written(
    speaker: object, session: object, spoken: tuple[str, datetime, str, str], occurrence: int
) -> tuple[str, ...]:
    """The key earlier versions gave the timed chat turn `spoken` (`said_key`'s first four),
    its `speaker` and `session` label as written, not in NFC (`turn_fields.same_name`), and
    decomposed (the same chat exported decomposed, as a store may hold it); none when they read
    the same."""
    label = "" if session is None else name_as_written(str(session))
    written = name_as_written(str(speaker))
    names = {
        (label, speaker_name(written)): None,
        (_nfd(label), speaker_name(_nfd(written))): None,  # (a decomposed export's, read so)
    }
    names.pop((spoken[0], spoken[2]), None)
    return tuple(said_key(named, spoken[1], who, spoken[3], occurrence) for named, who in names)


def before_bidi(
    speaker: object, session: object, now_speaker: str, now_session: str
) -> tuple[str, str] | None:
    """A chat turn's speaker and session as they were read before bidirectional controls were
    dropped from them (a derived session as it is), or None when they held none."""
    old_speaker = " ".join(str(speaker).split())
    old_session = now_session if session is None else " ".join(str(session).split())
    if (old_speaker, old_session) == (now_speaker, now_session):
        return None
    return old_speaker, old_session


class Occurrences:
    """How many times each (session, time, speaker, words) has been met so far."""

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}

    def next(self, session: str, moment: datetime, speaker: str, text: str) -> int:
        """The occurrence number of this turn (1 the first time). A hash of the four is held,
        not the words: a file's turns are never all held."""
        key = hash((session, moment, speaker, text))
        count = self._seen.get(key, 0) + 1
        self._seen[key] = count
        return count
