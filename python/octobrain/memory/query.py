"""What a caller asks `remember` for, checked: the query strings, and the filters beside the
scope rule (types, tags, files, a time window), with the SQL prefilter they make; and the
calendar dates a question names ("on 3 June, 2023", "in January 2022"), which `remember`
prefers without filtering by them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from octobrain.errors import InvalidInput, json_type
from octobrain.field_checks import check_list, check_strings
from octobrain.models import (
    MAX_QUERIES,
    MAX_TYPE_FILTERS,
    QUERY_BYTES,
    MemoryType,
    clean_files,
    clean_tags,
    parse_memory_type,
)
from octobrain.safe_text import check_text
from octobrain.store.sql import Sight, sql_in, sql_str
from octobrain.times import checked_time, iso_time


@dataclass(frozen=True)
class Filters:
    """What a query may return besides the scope rule."""

    memory_types: tuple[MemoryType, ...] = ()
    tags: tuple[str, ...] = ()
    related_files: tuple[str, ...] = ()
    created_after: datetime | None = None
    created_before: datetime | None = None
    include_archived: bool = False

    def where(self, sight: Sight) -> str:
        """The SQL prefilter for the vector leg: every filter, so a narrow one (a tag a few
        hundred of a million rows carry) still gets the index's nearest rows that meet it."""
        parts = [sight.where(include_archived=self.include_archived)]
        if self.memory_types:
            parts.append(sql_in("memory_type", [t.value for t in self.memory_types]))
        for column, wanted in (("tags", self.tags), ("related_files", self.related_files)):
            if wanted:  # any of them, as the mirror's mask reads it
                parts.append(f"array_has_any({column}, [{', '.join(map(sql_str, wanted))}])")
        if self.created_after is not None:
            parts.append(f"created_at >= timestamp {sql_str(self.created_after.isoformat())}")
        if self.created_before is not None:
            parts.append(f"created_at < timestamp {sql_str(self.created_before.isoformat())}")
        return " AND ".join(parts)


def parse_time(
    field: str, value: str | datetime | None, *, end_of_day: bool = False
) -> datetime | None:
    """ISO-8601 (with or without zone; naive means UTC) or a bare YYYY-MM-DD.

    A bare date as an upper bound means the end of that day, so `created_before=2026-05-01`
    keeps memories of 1 May — the opposite of upstream, which dropped the whole day. Only
    None is "no bound": an empty or blank text is refused, as a time that cannot be read.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        text = str(value).strip()
        moment = iso_time(field, text, "2026-05-01 or 2026-05-01T12:00:00Z")
        if len(text) == 10 and end_of_day:
            day = moment.date()
            moment = (
                datetime.max
                if day == day.max
                else datetime.combine(day + timedelta(days=1), time())
            )
    return checked_time(field, moment)


def parse_queries(query: str | Iterable[str]) -> list[str]:
    """1–5 query strings, each 2–500 bytes after trimming."""
    try:
        items = [query] if isinstance(query, str) else check_list("query", query)
    except InvalidInput:
        raise InvalidInput(
            "query", f"must be a string or a list of strings, got {json_type(query)}"
        ) from None
    if not 1 <= len(items) <= MAX_QUERIES:
        raise InvalidInput("query", f"give 1–{MAX_QUERIES} query strings, got {len(items)}")
    name = "query" if isinstance(query, str) else "query[{}]"
    return [check_text(name.format(i), q, QUERY_BYTES) for i, q in enumerate(items)]


def parse_filters(
    memory_types: Iterable[str] | None,
    tags: Iterable[str] | None,
    related_files: Iterable[str] | None,
    created_after: str | datetime | None,
    created_before: str | datetime | None,
) -> Filters:
    """Validated filters; a bare-date upper bound includes that day."""
    after = parse_time("created_after", created_after)
    before = parse_time("created_before", created_before, end_of_day=True)
    if after and before and after >= before:
        raise InvalidInput("created_before", "must be later than created_after")
    if isinstance(memory_types, str):
        raise InvalidInput("memory_types", "must be a list of memory types")
    # Each a string: a null item was read as the default type, `code`, a filter nobody asked for.
    named = [] if memory_types is None else check_strings("memory_types", memory_types)
    if len(named) > MAX_TYPE_FILTERS:
        raise InvalidInput(
            "memory_types", f"give at most {MAX_TYPE_FILTERS} types, got {len(named):,}"
        )
    types = tuple(
        dict.fromkeys(
            parse_memory_type(t, field_name=f"memory_types[{i}]") for i, t in enumerate(named)
        )
    )
    tag_filter, file_filter = clean_tags(tags), clean_files(related_files)
    for name, given, kept in (
        ("tags", tags, tag_filter),
        ("related_files", related_files, file_filter),
    ):
        if given and not kept:  # all blank: filtering by it would silently match everything
            raise InvalidInput(name, "must hold at least one non-blank entry to filter by")
    return Filters(types, tuple(tag_filter), tuple(file_filter), after, before)


_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = "(?P<month>" + "|".join(_MONTHS) + ")"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d{2})"
# Most specific first; a span one pattern took is not read again by a later one, so
# "3 June, 2023" names that day and not also the month. A month or a year alone counts only
# after a preposition ("in May", "during 2023"): "may" is also a verb.
_AFTER = r"\b(?:in|on|during|of|since|until|till|before|after|by|early|late|mid)[\s-]+"
_DATE_PATTERNS = [
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\b" + _YEAR + r"-(?P<month>\d{2})-(?P<day>\d{2})\b",  # ISO 8601
        r"\b" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r"\b(?:,?\s*" + _YEAR + r"\b)?",
        r"\b" + _MONTH + r"\s+" + _DAY + r"\b(?:,?\s*" + _YEAR + r"\b)?",
        r"\b" + _MONTH + r",?\s+" + _YEAR + r"\b",
        _AFTER + _MONTH + r"\b",
        _AFTER + _YEAR + r"\b",
    )
]

_MAY_NAME_A_DATE = re.compile(r"\d|" + _MONTH, re.IGNORECASE)  # (most questions do not)


@dataclass(frozen=True)
class Period:
    """A calendar period a question names: a day, a month or a year; a part left None is
    any ("in June": June of any year)."""

    year: int | None = None
    month: int | None = None
    day: int | None = None

    def holds(self, moment: datetime) -> bool:
        """Whether `moment` (compared in UTC) falls within the period."""
        moment = moment.astimezone(UTC) if moment.tzinfo else moment
        return (
            (self.year is None or moment.year == self.year)
            and (self.month is None or moment.month == self.month)
            and (self.day is None or moment.day == self.day)
        )


def _period(parts: dict[str, str | None]) -> Period | None:
    """The period of one date match's named groups; None for a day or month no calendar has."""
    year, month, day = parts.get("year"), parts.get("month"), parts.get("day")
    mon = (
        None
        if month is None
        else int(month)
        if month.isdigit()
        else _MONTHS.index(month.lower()) + 1
    )
    if (mon is not None and not 1 <= mon <= 12) or (day is not None and not 1 <= int(day) <= 31):
        return None
    return Period(int(year) if year else None, mon, int(day) if day else None)


def named_periods(queries: Sequence[str]) -> list[Period]:
    """The calendar days, months and years the queries name, each once (see `Period`)."""
    found: dict[Period, None] = {}
    for query in queries:
        if not _MAY_NAME_A_DATE.search(query):
            continue
        text = query
        for pattern in _DATE_PATTERNS:
            for match in pattern.finditer(text):
                period = _period(match.groupdict())
                if period is not None:
                    found.setdefault(period)
            text = pattern.sub(lambda m: " " * len(m.group(0)), text)
    return list(found)
