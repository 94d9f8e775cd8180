"""Conversations read from transcripts: a Claude Code session (JSONL), a generic chat export
(`[{speaker, text, time}]` as JSON or JSONL) and LoCoMo's format, all to one shape.

A `Conversation` is a list of `Turn`s grouped in sessions; each turn has a key that is stable
across re-reads of the same file (its own id where the format has one; else, for a chat turn
with a time, what was said when and by whom, `turn_keys`; else its position in its session and
its text), which is what makes a re-ingest add nothing new. Parsing is pure: no
store, no model.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from functools import partial
from itertools import chain, islice
from pathlib import Path
from typing import Any

from octobrain.errors import InvalidInput
from octobrain.files import TooLarge, gunzipped, named_by, read_regular
from octobrain.json_values import UnreadableJSON, array_values, bounds, read_json
from octobrain.lines import iter_lines, place
from octobrain.memory.turn_keys import Occurrences, former_keys, said_key
from octobrain.memory.turns import (
    Conversation,
    Turn,
    duplicate,
    in_parts,
    streamed,
)
from octobrain.models import ID_CHARS
from octobrain.safe_text import without_bidi
from octobrain.times import from_unix, iso_time, not_ahead

__all__ = [
    "FORMATS",
    "SPEAKER_PREFIX",
    "Conversation",
    "Turn",
    "detect_format",
    "once",
    "parse_chat",
    "parse_text",
    "read_conversations",
]

FORMATS = ("auto", "claude", "chat", "locomo")
SPEAKER_PREFIX = "speaker:"  # the tag naming who said an ingested turn
CONVERSATION_PREFIX = "conversation:"  # the tag naming the conversation a turn belongs to


def is_turn(tags: Sequence[str] | None) -> bool:
    """Whether a memory tagged `tags` is a turn of an ingested conversation."""
    return any(t.startswith(CONVERSATION_PREFIX) for t in tags or ())


MAX_FILE_BYTES = 64 * 1024 * 1024
SPEAKER_CHARS = 60
SESSION_CHARS = 60
# A generic export without session marks starts a new session after this long a silence.
SESSION_GAP = timedelta(hours=4)
_LOCOMO_SESSION = re.compile(r"^session_(\d{1,9})$")


def read_conversations(
    path: str | Path, fmt: str = "auto", *, name: str | None = None
) -> list[Conversation]:
    """The conversations in a file; `fmt` one of `FORMATS` (auto: detected from the content).

    A conversation is stored under its own id (a Claude Code session id, a LoCoMo
    `sample_id`), else under the file's name without its extension; `name` stores the file's
    one conversation under that name instead (two exports both called `result.json` are two
    conversations, not one)."""
    file = Path(path)
    if name is not None:
        name = conversation_name("conversation", name)
    with named_by("file", file, "is a directory, not a conversation file"):
        try:
            data, _ = read_regular(file, MAX_FILE_BYTES)
        except TooLarge as exc:
            got = f", got {exc.size}" if exc.size is not None else ""
            raise InvalidInput("file", f"must be at most {MAX_FILE_BYTES >> 20} MiB{got}") from None
    if data.startswith(b"\x1f\x8b"):  # gzip, as LoCoMo's own file is kept
        data = gunzipped("file", data, MAX_FILE_BYTES)
    try:  # (each turn was stored with U+FFFD for what was not UTF-8, and no word said)
        text = data.decode("utf-8").removeprefix("\ufeff")  # (a byte order mark)
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8")  # (all UTF-8 up to there)
        line, column = place(before, len(before))
        raise InvalidInput(
            "file", f"is not UTF-8 text (line {line}, column {column}); save it as UTF-8"
        ) from None
    del data  # (up to 64 MiB, not needed beside its text)
    stem = Path(file.stem).stem if file.suffix == ".gz" else file.stem  # (talk.jsonl.gz: talk)
    stem = _LONE.sub("\ufffd", stem)  # (a name's bytes that are not UTF-8, as Python reads them)
    conversations = parse_text(text, fmt, default_key=name or stem)
    if name is None:
        return conversations
    if len(conversations) != 1:
        raise InvalidInput(
            "conversation", f"names one conversation; {file} holds {len(conversations)}"
        )
    return [replace(conversations[0], key=name)]


def conversation_name(field_name: str, value: object) -> str:
    """A conversation's name as given (`ingest --conversation`, MCP `ingest`): a string of
    1–`ID_CHARS` characters once trimmed, without NUL."""
    if not isinstance(value, str) or not 1 <= len(value.strip()) <= ID_CHARS or "\x00" in value:
        raise InvalidInput(field_name, f"must be a string of 1–{ID_CHARS} characters, without NUL")
    return _unicode(field_name, value).strip()


# A lone surrogate: what JSON's "\ud800" (a JS string cut inside an emoji) or a file name's
# bytes that are not UTF-8 give. No row holding one can be stored.
_LONE = re.compile("[\ud800-\udfff]")


def _unicode(field_name: str, value: str) -> str:
    if _LONE.search(value):
        raise InvalidInput(field_name, "must be valid Unicode (lone surrogates are not allowed)")
    return value


def parse_text(text: str, fmt: str = "auto", *, default_key: str = "chat") -> list[Conversation]:
    """Conversations from a file's text (see `read_conversations`). A chat export's or a
    transcript's turns are checked here, then read from `text` again each time they are gone
    through (`Reread`), so they are never all held; LoCoMo's are held."""
    if fmt not in FORMATS:
        raise InvalidInput("format_in", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    data, numbered = _load(text)
    records: Callable[[], Iterator[tuple[str, Any]]]
    if isinstance(data, _Array):  # each value read as its turns are made, not all first
        chosen = detect_format(list(islice(data.values(), 20))) if fmt == "auto" else fmt
        samples: Iterable[Any] = data.values()
        where = "file" if chosen == "claude" else "turns"
        records = partial(_named, where, data.values)
    elif numbered is None:  # a JSON document of one value
        chosen = detect_format(data) if fmt == "auto" else fmt
        samples = [data]
        if chosen != "locomo":
            entries = _records(data, chosen)
            records = partial(_named, "file" if chosen == "claude" else "turns", lambda: entries)
    else:  # JSONL: each line read as its turn is made, not every line's object first
        head = list(islice(numbered, 20))
        chosen = detect_format([r for _, r in head]) if fmt == "auto" else fmt
        samples = (r for _, r in chain(head, numbered))
        records = partial(_jsonl, text)
    if chosen == "locomo":
        return [in_parts(once(c)) for c in _locomo(samples)]
    if chosen == "claude":
        session: list[str] = []  # (its id, found while the turns are checked)
        claude = streamed(lambda: _claude_turns(records(), session), default_key)
        return [replace(claude, key=session[0]) if session else claude]
    return [streamed(lambda: _chat_turns(records()), default_key)]


def _named(where: str, values: Callable[[], Iterable[Any]]) -> Iterator[tuple[str, Any]]:
    return ((f"{where}[{i}]", value) for i, value in enumerate(values()))


@dataclass(frozen=True)
class _Array:
    """A JSON document that is an array: its values read again, one at a time, each time they
    are asked for (a 64 MiB array read whole is about ten times that as objects)."""

    text: str
    start: int
    stop: int

    def values(self) -> Iterator[Any]:
        return array_values(self.text, self.start, self.stop)


def _load(text: str) -> tuple[Any, Iterator[tuple[str, Any]] | None]:
    """A JSON document (and None): an `_Array`, or the one value of any other document; or
    (None and) the objects of a JSONL file, each with the name of its line (`line N`), read
    one at a time as they are asked for, so a record is named by its line and a file's objects
    are never all held at once. An array is read through once first, holding one value at a
    time, to know it is one JSON document before any of it is used."""
    start, stop = bounds(text)
    if start == stop:
        raise InvalidInput("file", "is empty")
    try:
        if text.startswith("[", start):
            array = _Array(text, start, stop)
            for _ in array.values():
                pass
            return array, None
        return read_json(text[start:stop]), None
    except UnreadableJSON as exc:
        if not exc.syntax:
            raise InvalidInput("file", exc.reason) from None
        if text.startswith("[", start):  # an array is no JSONL: where it broke, not "line 1"
            raise InvalidInput("file", exc.placed(text)) from None
    return None, _jsonl(text)


def _jsonl(text: str) -> Iterator[tuple[str, Any]]:
    for number, line in enumerate(iter_lines(text), 1):
        if not line.strip():
            continue
        try:
            record = read_json(line)
        except UnreadableJSON as exc:
            tail = "; expected JSON or JSONL" if exc.syntax else ""
            raise InvalidInput("file", f"line {number} {exc.reason}{tail}") from None
        yield f"line {number}", record


def detect_format(data: Any) -> str:
    """`locomo`, `claude` or `chat`, from the shape of the first records."""
    records = data[:20] if isinstance(data, list) else [data]
    dicts = [r for r in records if isinstance(r, dict)]
    if any(isinstance(r.get("conversation"), dict) or "speaker_a" in r for r in dicts):
        return "locomo"
    if any("sessionId" in r or isinstance(r.get("message"), dict) for r in dicts):
        return "claude"
    if dicts and all("speaker" in r or "text" in r for r in dicts):
        return "chat"
    raise InvalidInput(
        "file",
        "is not a known conversation format (a Claude Code transcript, a chat export of "
        "{speaker, text, time} records, or LoCoMo); pass --format-in to choose one",
    )


def _records(data: Any, fmt: str) -> list[Any]:
    if isinstance(data, dict):
        return [data]
    if not isinstance(data, list):
        raise InvalidInput("file", f"must hold a list of {fmt} records")
    return data


def _time(field_name: str, value: object) -> datetime | None:
    """When a turn was said: ISO-8601 or Unix seconds, and not ahead of now by more than a
    day (a turn dated 9999 would head every briefing's recent memories until then)."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        moment = from_unix(field_name, value)
    elif isinstance(value, str):
        moment = iso_time(field_name, value)
    else:
        raise InvalidInput(field_name, "must be an ISO-8601 time string or Unix seconds")
    return not_ahead(field_name, moment)


def _said(field_name: str, value: object) -> str:
    """A turn's text: a string without NUL characters (a memory cannot hold one)."""
    if not isinstance(value, str):
        raise InvalidInput(field_name, "must be a string")
    if "\x00" in value:
        raise InvalidInput(field_name, "must not contain NUL characters")
    return _unicode(field_name, value)


def _name(field_name: str, value: object, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field_name, "must be a non-empty string")
    if "\x00" in value:
        raise InvalidInput(field_name, "must not contain NUL characters")
    _unicode(field_name, value)
    # One line, and no bidirectional override: a speaker or session is in a turn's title and
    # tags, where "al\u202eice" would print as another name ("Trojan Source").
    name = " ".join(without_bidi(value).split())
    if not name:
        raise InvalidInput(field_name, "must hold visible text, not only bidirectional controls")
    if len(name) > limit:
        raise InvalidInput(field_name, f"must be at most {limit} characters")
    return name


def _turn_id(field_name: str, value: object) -> str:
    """A turn's own id ("" when it has none): a string or an integer, 1–`ID_CHARS` characters."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInput(field_name, "must be a string or an integer")
    text = str(value)
    if len(text) > ID_CHARS or "\x00" in text:
        raise InvalidInput(field_name, f"must be 1–{ID_CHARS} characters, without NUL")
    _unicode(field_name, text)
    if _PART.search(text):  # ("x/part-2" and the second part of a long "x" were one memory)
        raise InvalidInput(
            field_name, "must not end in '/part-<n>', which names the parts of a long turn"
        )
    return text


_PART = re.compile(r"/part-[0-9]+\Z")


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def parse_chat(records: list[Any], *, key: str = "chat", field_name: str = "turns") -> Conversation:
    """A generic chat export: `{speaker, text, time?, session?, id?}` records in order.

    Without `session` fields a new session starts after a silence longer than 4 hours (or
    never, when no turn has a time). Records with blank text are skipped. Errors name a record
    `<field_name>[i]`.
    """
    if not isinstance(records, list):
        raise InvalidInput(field_name, "must be a list of {speaker, text, time} objects")
    made = _chat_turns((f"{field_name}[{i}]", r) for i, r in enumerate(records))
    turns: list[Turn] = []
    blank = 0
    for turn in made:
        if turn is None:
            blank += 1
        else:
            turns.append(turn)
    return once(Conversation(key, turns, blank))


def _chat_turns(records: Iterable[tuple[str, Any]]) -> Iterator[Turn | None]:
    """`parse_chat`'s turns, of records each given with how errors name it (`turns[3]`,
    `line 7`), one at a time; None for a record whose text is blank (skipped, and counted)."""
    session_no, last_time, per_session = 1, None, 0
    names: dict[str, str] = {}  # one string per speaker and session, not one per turn
    said = Occurrences()
    for where, record in records:
        if not isinstance(record, dict):
            raise InvalidInput(where, "must be an object with speaker and text")
        text = _said(f"{where}.text", record.get("text"))
        speaker = _name(f"{where}.speaker", record.get("speaker"), SPEAKER_CHARS)
        speaker = names.setdefault(speaker, speaker)
        moment = _time(f"{where}.time", record.get("time"))
        given = record.get("session")
        if given is not None:
            if isinstance(given, bool) or not isinstance(given, (str, int)):
                raise InvalidInput(f"{where}.session", "must be a string or an integer")
            session = _name(f"{where}.session", str(given), SESSION_CHARS)
        else:
            gap = moment is not None and last_time is not None and moment - last_time > SESSION_GAP
            if gap:
                session_no, per_session = session_no + 1, 0
            session = str(session_no)
        session = names.setdefault(session, session)
        last_time = moment or last_time
        if not text.strip():
            yield None
            continue
        own = _turn_id(f"{where}.id", record.get("id"))
        per_session += 1
        turn_key = own
        former: tuple[str, ...] = ()
        if not own:
            named = None if given is None else session
            raw = _before_bidi(record["speaker"], given, speaker, session)
            former = former_keys(session, per_session, speaker, text, raw)
            if moment is None:  # (its place is all there is to tell it by)
                turn_key, former = former[0], former[1:]
            else:
                spoken = (named or "", moment, speaker, text.strip())
                turn_key = said_key(*spoken, said.next(*spoken))
        yield Turn(
            speaker,
            text.strip(),
            session,
            turn_key,
            moment,
            f"{moment:%d %B %Y}" if moment else "",
            f"{where}.id" if own else where,
            former,
            ("session" if given is not None else "conversation") if moment else "",
        )


def _before_bidi(
    speaker: object, session: object, now_speaker: str, now_session: str
) -> tuple[str, str] | None:
    """A chat turn's speaker and session as they were read before bidirectional controls were
    dropped from them (a derived session as it is), or None when they held none."""
    old_speaker = " ".join(str(speaker).split())
    old_session = now_session if session is None else " ".join(str(session).split())
    if (old_speaker, old_session) == (now_speaker, now_session):
        return None
    return old_speaker, old_session


def once(conversation: Conversation) -> Conversation:
    """`conversation` with each turn id given to one turn: a repeat of a turn (its id, speaker
    and words again, as where two copies of a transcript were joined) is dropped; an id given to
    two different turns is a field error. Stored, two turns of one id would be two memories of
    one id, which every later edit would treat as one."""
    seen: dict[str, tuple[int, Turn]] = {}
    turns = []
    for i, turn in enumerate(conversation.turns):
        first = seen.setdefault(turn.key, (i, turn))
        if first[0] == i:
            turns.append(turn)
        elif (first[1].speaker, first[1].text) != (turn.speaker, turn.text):
            raise duplicate(i, turn, *first)
    return Conversation(conversation.key, turns, conversation.blank)


def _claude_turns(entries: Iterable[tuple[str, Any]], session: list[str]) -> Iterator[Turn]:
    """A Claude Code transcript's turns: the user's and the assistant's text blocks, in order
    (tool calls, tool results, injected command/system text, subagents' turns and compaction
    summaries are left out: `hooks.said_in`, `hooks.said_texts`). Each entry comes
    with how errors name it: its line, or its place in a JSON array. The first session id met
    is added to `session` (the conversation's key; the file's name without one)."""
    from octobrain.memory.hooks import said_in, transcript_text

    made = 0
    session_id = ""
    chat_record = ""  # where the first chat record is ({speaker, text}: not Claude Code's)
    for where, entry in entries:
        if isinstance(entry, dict) and "speaker" in entry and "message" not in entry:
            chat_record = chat_record or where
        if not isinstance(entry, dict) or not said_in(entry):
            continue
        # A stray NUL (printed binary) is dropped, half an emoji said as U+FFFD.
        text = _LONE.sub("\ufffd", transcript_text(entry).replace("\x00", ""))
        if not text:
            continue
        if not session_id:
            session_id = _turn_id(f"{where}.sessionId", entry.get("sessionId"))
            if session_id and not session:
                session.append(session_id)
        stamp = entry.get("timestamp")
        moment = _time(f"{where}.timestamp", stamp) if stamp else None
        speaker = str(entry["type"])
        own = _turn_id(f"{where}.uuid", entry.get("uuid"))
        yield Turn(
            speaker,
            text,
            "1",
            own or f"{made}:{_digest(speaker, text)}",
            moment,
            f"{moment:%d %B %Y}" if moment else "",
            f"{where}.uuid" if own else where,
        )
        made += 1
    if chat_record and made:  # (a mixed file: its chat records were skipped without a word)
        raise InvalidInput(
            chat_record,
            "is a chat record ({speaker, text}) in a Claude Code transcript: ingest the two "
            "formats from files of their own",
        )


_LOCOMO_DATE = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%d %B, %Y", "%d %B %Y")


def _locomo_date(value: str) -> datetime | None:
    for pattern in _LOCOMO_DATE:
        try:
            return datetime.strptime(value.strip(), pattern).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    return None


def _session_date(field_name: str, body: dict[str, Any]) -> tuple[str, datetime | None]:
    """A LoCoMo session's date as written and when it was: LoCoMo's own form ("1:56 pm on 8
    May, 2023") or ISO-8601. One neither reads is refused: its turns were stored dated at the
    ingest, so a question bounded by time never found them."""
    value = body.get(field_name.rsplit(".", 1)[1])
    if value is None or value == "":
        return "", None
    if not isinstance(value, str):
        raise InvalidInput(field_name, f"must be a string, got {type(value).__name__}")
    moment = _locomo_date(value)
    if moment is None:
        try:
            moment = iso_time(field_name, value)
        except InvalidInput:
            raise InvalidInput(
                field_name,
                f"must be a date as LoCoMo writes it ('1:56 pm on 8 May, 2023') or ISO-8601, "
                f"got {value[:60]!r}",
            ) from None
    return value, not_ahead(field_name, moment, repr(value))


def _locomo(samples: Iterable[Any]) -> list[Conversation]:
    """LoCoMo samples, one at a time: `conversation` holds `session_<n>` turn lists and their
    `session_<n>_date_time`; a shared photo's caption is kept with its turn."""
    out = []
    for i, sample in enumerate(samples):
        where = f"file[{i}]"
        body = sample.get("conversation", sample) if isinstance(sample, dict) else None
        if not isinstance(body, dict):
            raise InvalidInput(f"{where}.conversation", "must be an object of sessions")
        key = _turn_id(f"{where}.sample_id", sample.get("sample_id")) or f"locomo-{i}"
        said: list[Turn] = []
        # (the pattern takes at most 9 digits: a longer number names no session)
        named = sorted((int(m.group(1)), k) for k in body if (m := _LOCOMO_SESSION.match(k)))
        for (n, name), (again, other) in itertools.pairwise(named):
            if n == again:  # `session_1` and `session_01`: one of them read twice, one lost
                raise InvalidInput(
                    f"{where}.conversation.{other}", f"names session {n} again (as {name} does)"
                )
        for n, name in named:
            date, moment = _session_date(f"{where}.conversation.{name}_date_time", body)
            turns = body[name]
            if not isinstance(turns, list):
                raise InvalidInput(f"{where}.conversation.{name}", "must be a list of turns")
            for j, turn in enumerate(turns):
                twhere = f"{where}.conversation.{name}[{j}]"
                if not isinstance(turn, dict):
                    raise InvalidInput(twhere, "must be an object with speaker and text")
                speaker = _name(f"{twhere}.speaker", turn.get("speaker"), SPEAKER_CHARS)
                text = _said(f"{twhere}.text", turn.get("text"))
                caption = turn.get("blip_caption")
                if isinstance(caption, str) and _said(f"{twhere}.blip_caption", caption).strip():
                    text = f"{text} [shares {caption.strip()}]"
                if not text.strip():
                    continue
                given = _turn_id(f"{twhere}.dia_id", turn.get("dia_id"))
                origin = f"{twhere}.dia_id" if given else twhere
                said.append(
                    Turn(
                        speaker,
                        text.strip(),
                        str(n),
                        given or f"D{n}:{j + 1}",
                        moment,
                        date,
                        origin,
                    )
                )
        out.append(Conversation(key, said))
    return out
