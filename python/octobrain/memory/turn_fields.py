"""The fields of a turn as every conversation format gives them, each checked the one way: its
text, who said it, its session, its own id and when it was said. A value that breaks a rule is
refused naming its field (`InvalidInput`); parsing a format is `conversation` and
`conversation_locomo`."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime

from octobrain.errors import InvalidInput
from octobrain.field_checks import ID_CHARS
from octobrain.safe_text import check_visible, same_text_key, without_bidi
from octobrain.times import from_unix, iso_time, not_ahead

SPEAKER_CHARS = 60
SESSION_CHARS = 60

# A lone surrogate: what JSON's "\ud800" (a JS string cut inside an emoji) or a file name's
# bytes that are not UTF-8 give. No row holding one can be stored.
LONE = re.compile("[\ud800-\udfff]")
_SECONDS = re.compile(r"[0-9]{9,}(?:\.[0-9]+)?")  # Unix seconds (or milliseconds) as a string


def unicode_text(field_name: str, value: str) -> str:
    if LONE.search(value):
        raise InvalidInput(field_name, "must be valid Unicode (lone surrogates are not allowed)")
    return value


def conversation_name(field_name: str, value: object) -> str:
    """A conversation's name as given (`ingest --conversation`, MCP `ingest`): a string of
    1–`ID_CHARS` characters once trimmed, without NUL."""
    if not isinstance(value, str) or not 1 <= len(value.strip()) <= ID_CHARS or "\x00" in value:
        raise InvalidInput(field_name, f"must be a string of 1–{ID_CHARS} characters, without NUL")
    return same_name(unicode_text(field_name, value).strip())


def turn_time(field_name: str, value: object) -> datetime | None:
    """When a turn was said: ISO-8601, or Unix seconds or milliseconds (`from_unix`; also as a
    string of digits, as Slack writes `ts`), and not ahead of now by more than a day (a turn
    dated 9999 would head every briefing's recent memories until then). None, "" and 0 are
    not known: a turn dated 1 January 1970 is an export's placeholder, not a day it was said."""
    if value is None or value == "" or (value == 0 and not isinstance(value, bool)):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        moment = from_unix(field_name, value)
    elif isinstance(value, str) and _SECONDS.fullmatch(value.strip()):
        # (Slack's ts: "1709640000.000200"; a refusal quotes the string, not the float.)
        moment = from_unix(field_name, float(value), value)
    elif isinstance(value, str):
        moment = iso_time(field_name, value)
    else:
        raise InvalidInput(
            field_name, "must be an ISO-8601 time string, or Unix seconds or milliseconds"
        )
    return not_ahead(field_name, moment)


def turn_text(field_name: str, value: object) -> str:
    """A turn's text: a string without NUL characters (a memory cannot hold one)."""
    if not isinstance(value, str):
        raise InvalidInput(field_name, "must be a string")
    if "\x00" in value:
        raise InvalidInput(field_name, "must not contain NUL characters")
    return unicode_text(field_name, value)


def turn_name(field_name: str, value: object, limit: int | None) -> str:
    """A speaker's or session's name: one line of visible text of at most `limit` characters
    (None: any)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field_name, "must be a non-empty string")
    if "\x00" in value:
        raise InvalidInput(field_name, "must not contain NUL characters")
    unicode_text(field_name, value)
    name = same_name(name_as_written(value))
    if not name:
        raise InvalidInput(field_name, "must hold visible text, not only bidirectional controls")
    if limit is not None and len(name) > limit:
        raise InvalidInput(field_name, f"must be at most {limit} characters")
    return name


def name_as_written(value: str) -> str:
    """A name as earlier versions kept it: one line, and no bidirectional override (a speaker
    or session is in a turn's title and tags, where "al\u202eice" would print as another name:
    "Trojan Source")."""
    return " ".join(without_bidi(value).split())


def same_name(name: str) -> str:
    """`name` in NFC: "José" written composed (as most keyboards type it) and decomposed (as
    macOS writes file names, and exports made there) is one person, one conversation."""
    return unicodedata.normalize("NFC", name)


def speaker_name(name: str) -> str:
    """Who said a turn (`turn_name`, of any length) in at most `SPEAKER_CHARS` characters: a
    longer name (a display name with a title and a team) is cut to them, ending in "…", rather
    than refusing the whole export; the ingest report names the first turn cut."""
    if len(name) <= SPEAKER_CHARS:
        return name
    return name[: SPEAKER_CHARS - 1].rstrip() + "…"


def turn_id(field_name: str, value: object) -> str:
    """A turn's own id ("" when it has none): a string or an integer, 1–`ID_CHARS` characters
    with one that shows, as written (`same_id` is the one it names)."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInput(field_name, "must be a string or an integer")
    text = str(value)
    if len(text) > ID_CHARS or "\x00" in text:
        raise InvalidInput(field_name, f"must be 1–{ID_CHARS} characters, without NUL")
    unicode_text(field_name, text)
    check_visible(field_name, text)  # (" " was taken as an id: no one can name that turn)
    # ("x/part-2" and the second part of a long "x" were one memory)
    if _PART.search(same_id(text)[0]):
        raise InvalidInput(
            field_name, "must not end in '/part-<n>', which names the parts of a long turn"
        )
    return text


def same_id(given: str) -> tuple[str, tuple[str, ...]]:
    """The id a turn's own id `given` names, as two spellings of one text compare
    (`safe_text.same_text_key`: trimmed, in NFC, without zero-width or other format
    characters; an export that writes "a ", "a\u200b" or a decomposed "é" once names the
    turn "a" or "é" of another; `turn_id` refuses an id of only such characters), and the id
    as written when it differs: the key an earlier version stored the turn under."""
    named = same_text_key(given)
    return named, (given,) if given and named != given else ()


_PART = re.compile(r"/part-[0-9]+\Z")
