"""A WhatsApp "Export chat" text file read as a chat export's `{speaker, text, time}` records.

Each message starts a line with its date and time, as the phone writes them: iPhone
`[05/03/2024, 14:02:11] Ana: text`, Android `05/03/2024, 14:02 - Ana: text`, either with a
12-hour clock (`2:02 PM`), a two-digit year, or `.` or `-` between the date's numbers; a
line without one goes on the message before it. Lines without a speaker (`Ana added Ben`,
or a notice whose `: ` falls inside the group name it quotes: `Ana created group "Trip:
Lisbon"`), iPhone's marked ones (a U+200E mark before the text: its notices, `image omitted`,
`<attached: …>`, `Missed voice call`) and Android's placeholders (`<Media omitted>`, `This
message was deleted`, `null` for a view-once photo) say nothing said, and are left out; the
`<This message was edited>` WhatsApp adds after an edited message's text is not part of it.

A date is written day first or month first as the phone's language has it, and not said in
the file: a day over 12 tells which; a file where none is asks for `whatsapp-dmy` or
`whatsapp-mdy` rather than date half its messages on the wrong day. Times are the phone's
wall clock, read in this machine's time zone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

from octobrain.errors import InvalidInput
from octobrain.lines import iter_lines
from octobrain.memory.conversation_formats import WHATSAPP

__all__ = ["WHATSAPP", "is_whatsapp", "whatsapp_records"]


def _stamp(n: str) -> str:
    """A message's date and time, its groups named with suffix `n` (two layouts, one pattern)."""
    date = rf"(?P<a{n}>\d{{1,4}})[./-](?P<b{n}>\d{{1,2}})[./-](?P<c{n}>\d{{1,4}})"
    clock = rf"(?P<h{n}>\d{{1,2}})[:.](?P<m{n}>\d{{2}})(?:[:.](?P<s{n}>\d{{2}}))?"
    return rf"{date},? {clock}(?:[\s\u202f]?(?P<ampm{n}>[AaPp]\.?\s?[Mm]\.?))?"


# iPhone's `[date, time] rest`, Android's `date, time - rest`.
_LINE = re.compile(rf"\u200e?(?:\[{_stamp('')}\] |{_stamp('2')} - )(?P<rest>.*)")
_MARK = "\u200e"  # (iPhone's mark before a notice or an attachment)
# What Android writes as a message's text where nothing was said (iPhone marks its own).
_PLACEHOLDERS = frozenset(
    (
        "<Media omitted>",
        "This message was deleted",
        "You deleted this message",
        "null",  # (a view-once photo or video)
        "Waiting for this message. This may take a while.",
        "Missed voice call",
        "Missed video call",
    )
)
# Tried only where a run of blanks starts, the run taken whole: tried from each blank of a
# message of 32,000 spaces and "x", the plain pattern read on to the run's end (4.9 s).
_EDITED = re.compile(r"(?<!\s)\s*+\u200e?<This message was edited>$")
_QUOTES = '"\u201c\u201d\u201e\u00ab\u00bb'  # (the marks a notice quotes a group's name in)


def _fields(match: re.Match[str]) -> dict[str, str | None]:
    """A message line's date and time fields, whichever of the two layouts matched."""
    names = ("a", "b", "c", "h", "m", "s", "ampm")
    bracketed = match.group("a") is not None
    return {n: match.group(n if bracketed else f"{n}2") for n in names}


def is_whatsapp(text: str) -> bool:
    """Whether `text` starts as a WhatsApp chat export does."""
    first = next((line for line in iter_lines(text) if line.strip()), "")
    return _message(first) is not None


def _message(line: str) -> re.Match[str] | None:
    return _LINE.fullmatch(line.lstrip("\ufeff"))


def _order(text: str, fmt: str) -> str:
    """`ymd`, `dmy` or `mdy`: as `fmt` says, else as the file's dates tell."""
    if fmt != "whatsapp":
        return fmt.removeprefix("whatsapp-")
    day_first = month_first = False
    for line in iter_lines(text):
        match = _message(line)
        if match is None:
            continue
        f = _fields(match)
        if len(f["a"] or "") == 4:
            return "ymd"
        day_first |= int(f["a"] or 0) > 12
        month_first |= int(f["b"] or 0) > 12
    if day_first and month_first:
        raise InvalidInput("file", "writes its dates both day first and month first")
    if day_first or month_first:
        return "dmy" if day_first else "mdy"
    raise InvalidInput(
        "file",
        "is a WhatsApp chat whose dates can be read day first or month first (no day in it "
        "is over 12): --format-in whatsapp-dmy (05/03 is 5 March) or whatsapp-mdy (May 3) "
        "says which",
    )


def _time(where: str, f: dict[str, str | None], order: str) -> str:
    """A message's time as ISO-8601 in this machine's time zone, or a field error."""
    a, b, c = int(f["a"] or 0), int(f["b"] or 0), int(f["c"] or 0)
    year, month, day = {"ymd": (a, b, c), "dmy": (c, b, a), "mdy": (c, a, b)}[order]
    hour = int(f["h"] or 0)
    if f["ampm"]:
        hour = hour % 12 + (12 if f["ampm"][0] in "Pp" else 0)
    try:
        moment = datetime(
            year + 2000 if year < 100 else year,
            month,
            day,
            hour,
            int(f["m"] or 0),
            int(f["s"] or 0),
        )
    except ValueError as exc:
        raise InvalidInput(f"{where}.time", f"is not a date and time ({exc})") from None
    return moment.astimezone().isoformat()


def whatsapp_records(text: str, fmt: str) -> Callable[[], Iterator[tuple[str, dict[str, Any]]]]:
    """What reads the messages of a WhatsApp export, each time called, as chat records each
    named by its first line (`line 7`); `fmt` one of `WHATSAPP`. The date order is settled
    first, from the whole file."""
    return partial(_records, text, _order(text, fmt))


def _records(text: str, order: str) -> Iterator[tuple[str, dict[str, Any]]]:
    # The message being read: where it starts, its record, its lines (joined once it ends:
    # added to its text line by line, a message of 400,000 lines was copied at each, 82 s).
    held: tuple[str, dict[str, Any], list[str]] | None = None
    for number, line in enumerate(iter_lines(text), 1):
        match = _message(line)
        if match is None:
            if held is not None:  # (a message of more than one line)
                held[2].append(line)
            continue
        if held is not None:
            yield _said(held)
        held = None
        speaker, colon, said = match.group("rest").partition(": ")
        quoting = sum(speaker.count(q) for q in _QUOTES) % 2  # (": " inside a quoted name)
        if not colon or quoting or said.startswith(_MARK) or said.strip() in _PLACEHOLDERS:
            continue  # (a notice, or media: nothing said)
        where = f"line {number}"
        moment = _time(where, _fields(match), order)
        held = (where, {"speaker": speaker.strip(_MARK), "text": said, "time": moment}, [said])
    if held is not None:
        yield _said(held)


def _said(message: tuple[str, dict[str, Any], list[str]]) -> tuple[str, dict[str, Any]]:
    """A message read to its last line, without the mark WhatsApp adds after an edited one."""
    where, record, lines = message
    record["text"] = _EDITED.sub("", "\n".join(lines))
    return where, record
