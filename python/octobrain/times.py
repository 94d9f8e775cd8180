"""Times as octobrain takes and keeps them: aware UTC datetimes within years 1–9999, read from
what a caller gives (ISO-8601 text, `24:00` as the day's end; Unix seconds or milliseconds) and
checked (not more than a day ahead), and converted to and from the integer microseconds Arrow
stores.

Each check fails with `InvalidInput`, naming the field and the rule it broke.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from octobrain.errors import InvalidInput, as_json

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def checked_time(field_name: str, moment: datetime) -> datetime:
    """`moment` (naive means UTC; its own offset is kept), or a field error when it falls
    outside years 1–9999 in UTC: such a time would be stored, then break every read of it."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(field_name, "must fall within years 1–9999 in UTC") from None
    return moment


ISO_CHARS = 64  # the longest ISO-8601 time, 2026-05-01T12:00:00.123456+05:30, has 32


def iso_time(field_name: str, text: str, example: str = "2026-05-01T12:00:00Z") -> datetime:
    """An ISO-8601 time (`Z` or an offset; naive means UTC) within years 1–9999 in UTC, or a
    field error that shows the text, or only its length when it is longer than any time."""
    text = text.strip()
    try:
        if len(text) > ISO_CHARS:  # Python reads any number of fraction digits
            raise ValueError(text)
        zulu = text.endswith(("Z", "z"))  # (RFC 3339 allows the lowercase `z`, and `t`)
        given = text[:-1] + "+00:00" if zulu else text
        end = _END_OF_DAY.match(given)  # ISO 8601's 24:00, which Python does not read
        moment = datetime.fromisoformat(end.expand(r"\g<1>00\g<2>") if end else given)
    except ValueError:
        shown = as_json(text) if len(text) <= ISO_CHARS else f"{len(text):,} characters"
        raise InvalidInput(field_name, f"must be ISO-8601 (e.g. {example}), got {shown}") from None
    if end:
        try:
            moment += timedelta(days=1)
        except OverflowError:
            raise InvalidInput(field_name, "must fall within years 1–9999 in UTC") from None
    return checked_time(field_name, moment)


# `<date>T24:00[:00[.000]]`: the end of that day, the next day's 00:00 (ISO 8601; RFC 3339 has
# no 24:00, and `datetime` refuses it).
_END_OF_DAY = re.compile(r"(.+[Tt ])24((?::00){1,2}(?:[.,]0+)?(?:[+-].*)?)\Z")


# A number of seconds from here up is past year 5138, never a time said: such a number is read
# as milliseconds (from 3 March 1973 on), as chat exports and JavaScript's Date.now() give them.
MILLIS_FROM = 10**11


def from_unix(field_name: str, number: float | int, sent: object = None) -> datetime:
    """Unix seconds, or milliseconds when the number is `MILLIS_FROM` or more (13 digits
    today), as an aware UTC datetime; or a field error (not finite, or outside years
    1–9999) quoting `sent`, what `number` was read from (by default `number` itself)."""
    try:
        seconds = number / 1000 if abs(number) >= MILLIS_FROM else number
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise InvalidInput(
            field_name,
            "must be Unix seconds, or milliseconds (a number of 12 digits or more), within "
            f"years 1–9999 in UTC, got {as_json(number if sent is None else sent)}",
        ) from None


FIRST = datetime.min.replace(tzinfo=UTC)  # the earliest time a datetime holds


def earlier_by(moment: datetime, span: timedelta) -> datetime:
    """`span` before `moment`, or the earliest time there is when that falls before year 1
    (a turn said in the first hours of year 1 is a time as good as any other). In UTC: in
    its own offset, 0001-01-01T00:00-05:00 less 4 hours falls before year 1."""
    moment = moment.astimezone(UTC)
    return moment - span if moment - FIRST > span else FIRST


FUTURE_SLACK = timedelta(days=1)  # clocks disagree; a time later than this is no time yet


def not_ahead(field_name: str, moment: datetime, shown: str = "") -> datetime:
    """`moment`, or a field error when it is more than a day ahead of now: a memory dated 9999
    would head every briefing's recent memories until then. `shown`: how the error shows it
    (its ISO form by default)."""
    if moment > utcnow() + FUTURE_SLACK:
        got = shown or moment.isoformat()
        raise InvalidInput(field_name, f"must not be more than a day ahead of now, got {got}")
    return moment


def from_micros(us: int) -> datetime:
    """Integer microseconds since the epoch (an Arrow timestamp) as an aware UTC datetime."""
    return EPOCH + timedelta(microseconds=int(us))


def micros(moment: datetime) -> int:
    """A timestamp as integer microseconds since the epoch (how Arrow stores it)."""
    return int(moment.timestamp() * 1_000_000)


def iso_z(moment: datetime, timespec: str = "auto") -> str:
    """A UTC timestamp as ISO-8601 ending in Z (how JSON output writes times)."""
    return moment.isoformat(timespec=timespec).replace("+00:00", "Z")


def utcnow() -> datetime:
    """Now, timezone-aware UTC, at microsecond precision (what Arrow timestamps keep)."""
    return datetime.now(UTC)
