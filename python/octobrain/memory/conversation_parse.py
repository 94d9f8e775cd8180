"""A conversation file's text parsed: its format detected (or as given) and read to
`Conversation`s: a Claude Code session (JSONL), a generic chat export (`[{speaker, text, time}]`
as JSON or JSONL), LoCoMo's format, Claude.ai's and ChatGPT's data exports (`chat_exports`) and
WhatsApp's text export (`whatsapp_text`). Reading the file is `conversation`'s (and
`conversation_bytes`'); parsing is pure: no file, no store, no model."""

from __future__ import annotations

import hashlib
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import partial
from itertools import chain, islice, product
from typing import Any

from octobrain.errors import InvalidInput, as_json
from octobrain.json_values import UnreadableJSON, array_values, bounds, read_json
from octobrain.lines import iter_lines
from octobrain.memory.chat_exports import EXPORTS, export_conversations, export_of
from octobrain.memory.chat_keys import chat_fields, looks_like_chat, unsaid
from octobrain.memory.conversation_formats import FORMATS
from octobrain.memory.conversation_locomo import locomo_conversations
from octobrain.memory.slack_users import slack_text, stored_before
from octobrain.memory.transcript_branch import is_off, off_branch
from octobrain.memory.turn_fields import (
    LONE,
    SESSION_CHARS,
    SPEAKER_CHARS,
    same_id,
    speaker_name,
    turn_id,
    turn_name,
    turn_text,
    turn_time,
)
from octobrain.memory.turn_keys import (
    Occurrences,
    before_bidi,
    former_keys,
    said_as_written,
    said_key,
)
from octobrain.memory.turns import (
    ABANDONED,
    UNSAID,
    Conversation,
    Read,
    Turn,
    collected,
    duplicate,
    in_parts,
    streamed,
)
from octobrain.memory.whatsapp_text import WHATSAPP, is_whatsapp, whatsapp_records
from octobrain.safe_text import shows_something

__all__ = [
    "SESSION_GAP",
    "chat_turns",
    "detect_format",
    "once",
    "parse_chat",
    "parse_text",
]

# A generic export without session marks starts a new session after this long a silence.
SESSION_GAP = timedelta(hours=4)


def parse_text(
    text: str,
    fmt: str = "auto",
    *,
    default_key: str = "chat",
    people: Mapping[str, str] | None = None,
) -> list[Conversation]:
    """Conversations from a file's text (see `read_conversations`). A chat export's or a
    transcript's turns are checked here, then read from `text` again each time they are gone
    through (`Reread`), so they are never all held; LoCoMo's are held. `people` names a chat
    export's speakers given by Slack user id."""
    if fmt not in FORMATS:
        raise InvalidInput("format_in", f"must be one of {', '.join(FORMATS)}, got {as_json(fmt)}")
    if fmt in WHATSAPP or (fmt == "auto" and is_whatsapp(text)):
        messages = whatsapp_records(text, fmt if fmt in WHATSAPP else "whatsapp")
        return [streamed(lambda: chat_turns(messages()), default_key)]
    data, numbered = _load(text)
    records: Callable[[], Iterator[tuple[str, Any]]]
    if isinstance(data, _Array):  # each value read as its turns are made, not all first
        chosen = detect_format(list(islice(data.values(), 20))) if fmt == "auto" else fmt
        samples: Iterable[Any] = data.values()
        records = partial(_named, "turns" if chosen == "chat" else "file", data.values)
    elif numbered is None:  # a JSON document of one value
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            data = data["messages"]  # (DiscordChatExporter's, an OpenAI request's)
        chosen = detect_format(data) if fmt == "auto" else fmt
        samples = [data]
        if chosen != "locomo":
            entries = _records(data, chosen)
            where = "turns" if chosen == "chat" else "file"
            records = partial(_named, where, lambda: entries)
    else:  # JSONL: each line read as its turn is made, not every line's object first
        head = list(islice(numbered, 20))
        chosen = detect_format([r for _, r in head]) if fmt == "auto" else fmt
        samples = (r for _, r in chain(head, numbered))
        records = partial(_jsonl, text)
    if chosen in EXPORTS:  # (Claude.ai's, ChatGPT's conversations.json)
        return export_conversations(chosen, records(), once)
    if chosen == "locomo":
        return [in_parts(once(c)) for c in locomo_conversations(samples)]
    if chosen == "claude":
        session: list[str] = []  # (its id, found while the turns are checked)
        off = off_branch(entry for _, entry in records())  # (an edited prompt's old branch)
        claude = streamed(lambda: _claude_turns(records(), session, off), default_key)
        return [replace(claude, key=session[0]) if session else claude]
    return [streamed(lambda: chat_turns(records(), people), default_key)]


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
    """`locomo`, `claude`, `chat` or a product's export (`EXPORTS`), from the shape of the
    first records."""
    records = data[:20] if isinstance(data, list) else [data]
    dicts = [r for r in records if isinstance(r, dict)]
    if any(isinstance(r.get("conversation"), dict) or "speaker_a" in r for r in dicts):
        return "locomo"
    if any("sessionId" in r or isinstance(r.get("message"), dict) for r in dicts):
        return "claude"
    export = next((e for e in map(export_of, dicts) if e), None)
    if export:
        return export
    if dicts and all(looks_like_chat(r) for r in dicts):
        return "chat"
    raise InvalidInput(
        "file",
        "is not a known conversation format (a Claude Code transcript, a chat export of "
        "{speaker, text, time} records, also spelled {role, content} or {author, message, "
        "timestamp}, alone or under 'messages', LoCoMo, or a Claude.ai or ChatGPT export's "
        "conversations.json); pass --format-in to choose one",
    )


def _records(data: Any, fmt: str) -> list[Any]:
    if isinstance(data, dict):
        return [data]
    if not isinstance(data, list):
        raise InvalidInput("file", f"must hold a list of {fmt} records")
    return data


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def parse_chat(records: list[Any], *, key: str = "chat", field_name: str = "turns") -> Conversation:
    """A generic chat export: `{speaker, text, time?, session?, id?}` records in order.

    Without `session` fields a new session starts after a silence longer than 4 hours (or
    never, when no turn has a time). Records with blank text (or only invisible characters) are
    skipped, and counted. Errors name a record
    `<field_name>[i]`.
    """
    if not isinstance(records, list):
        raise InvalidInput(field_name, "must be a list of {speaker, text, time} objects")
    named = ((f"{field_name}[{i}]", r) for i, r in enumerate(records))
    return once(collected(key, chat_turns(named)))


def chat_turns(
    records: Iterable[tuple[str, Any]], people: Mapping[str, str] | None = None
) -> Iterator[Read]:
    """`parse_chat`'s turns, of records each given with how errors name it (`turns[3]`,
    `line 7`), one at a time; None for a record whose text shows nothing, UNSAID for one that
    holds nothing said (`chat_keys.unsaid`: a system prompt, a tool call): skipped, and
    counted. `people`: the names of a Slack export's user ids and channels (`slack_users`)."""
    people = people or {}
    profiles: dict[str, str] = {}  # Slack's user id → the name its messages' profile gives
    members = ChainMap(dict(people), profiles)  # (whom a Slack message mentions)
    session_no, last_time, per_session = 1, None, 0
    names: dict[str, str] = {}  # one string per speaker and session, not one per turn
    said = Occurrences()
    for where, record in records:
        if not isinstance(record, dict):
            raise InvalidInput(where, "must be an object with speaker and text")
        if unsaid(record):
            yield UNSAID
            continue
        fields, keys = chat_fields(where, record)
        by_id = fields["speaker"] if keys["speaker"].lower() == "user" else None
        if isinstance(by_id, str) and by_id in people:  # (Slack's user id: its name)
            fields["speaker"] = people[by_id]
        else:
            by_id = None
        text = turn_text(f"{where}.{keys['text']}", fields["text"])
        full = turn_name(f"{where}.{keys['speaker']}", fields["speaker"], None)
        speaker = names.setdefault(full, speaker_name(full))
        markup: tuple[str, ...] = ()  # a Slack message's text as earlier versions stored it
        if record.get("type") == "message" and "ts" in record:  # (Slack's: `<@U123>` …)
            if keys["speaker"] == "user_profile" and isinstance(record.get("user"), str):
                profiles.setdefault(record["user"], full)
            shown = slack_text(text, members)
            markup, text = stored_before(text, shown, members), shown
        moment = turn_time(f"{where}.{keys.get('time', 'time')}", fields.get("time"))
        given = fields.get("session")
        if given is not None:
            if isinstance(given, bool) or not isinstance(given, (str, int)):
                raise InvalidInput(f"{where}.{keys['session']}", "must be a string or an integer")
            session = turn_name(f"{where}.{keys['session']}", str(given), SESSION_CHARS)
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
        id_name = f"{where}.{keys.get('id', 'id')}"
        written = turn_id(id_name, fields.get("id"))
        own, former = same_id(written)
        per_session += 1
        if not shows_something(text):  # (zero-width or format characters: no word to find)
            yield None  # (its place still counted: the turns after it were keyed so)
            continue
        turn_key = own
        if not own:
            named = None if given is None else session
            # (named by its id, as before its `users.json` was read: the same turn)
            raw = before_bidi(by_id or fields["speaker"], given, full, session)
            placed = former_keys(session, per_session, speaker, text, raw)
            if moment is None:  # (its place is all there is to tell it by)
                turn_key, placed = placed[0], placed[1:]
            else:
                spoken = (named or "", moment, speaker, text.strip())
                occurrence = said.next(*spoken)
                turn_key = said_key(*spoken, occurrence)
                if by_id:
                    by_id_key = said_key(named or "", moment, by_id, text.strip(), occurrence)
                    placed = (by_id_key, *placed)
                else:  # (its names as written, not in NFC)
                    as_written = said_as_written(fields["speaker"], given, spoken, occurrence)
                    placed = (*as_written, *placed)
                for who, form in product((speaker, by_id), markup):  # (as stored before)
                    if who:
                        placed = (said_key(named or "", moment, who, form, occurrence), *placed)
            former = (*placed, *former)
        yield Turn(
            speaker,
            text.strip(),
            session,
            turn_key,
            moment,
            f"{moment:%d %B %Y}" if moment else "",
            id_name if own else where,
            former,
            ("session" if given is not None else "conversation") if moment else "",
            f"{where}.{keys['speaker']}" if len(full) > SPEAKER_CHARS else "",
            markup,
        )


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
    return replace(conversation, turns=turns)


def _claude_turns(
    entries: Iterable[tuple[str, Any]], session: list[str], off: frozenset[str] = frozenset()
) -> Iterator[Read]:
    """A Claude Code transcript's turns: the user's and the assistant's text blocks, in order,
    and the prompts the user queued while the assistant worked (tool calls, tool results,
    thinking, injected command/system text, interruption marks, API errors, subagents' turns
    and compaction summaries are left out: `hooks.said_in`, `hooks.said_texts`; so are the
    entries whose `uuid` is in `off`, a branch abandoned by an edited prompt: ABANDONED). Each
    entry comes with how errors name it: its line, or its place in a JSON array. The first
    session id met is added to `session` (the conversation's key; the file's name without
    one)."""
    from octobrain.memory.hooks import said_in, speaker_of, transcript_text

    made = 0
    session_id = ""
    chat_record = ""  # where the first chat record is ({speaker, text}: not Claude Code's)
    for where, entry in entries:
        if isinstance(entry, dict) and "speaker" in entry and "message" not in entry:
            chat_record = chat_record or where
        if not isinstance(entry, dict) or not said_in(entry):
            continue
        # A stray NUL (printed binary) is dropped, half an emoji said as U+FFFD.
        text = LONE.sub("\ufffd", transcript_text(entry).replace("\x00", ""))
        if not text:
            continue
        if not session_id:
            session_id = turn_id(f"{where}.sessionId", entry.get("sessionId"))
            if session_id and not session:
                session.append(session_id)
        if is_off(entry, off):
            yield ABANDONED
            continue
        moment = turn_time(f"{where}.timestamp", entry.get("timestamp"))
        speaker = speaker_of(entry)
        own, former = same_id(turn_id(f"{where}.uuid", entry.get("uuid")))
        yield Turn(
            speaker,
            text,
            "1",
            own or f"{made}:{_digest(speaker, text)}",
            moment,
            f"{moment:%d %B %Y}" if moment else "",
            f"{where}.uuid" if own else where,
            former,
        )
        made += 1
    if chat_record and made:  # (a mixed file: its chat records were skipped without a word)
        raise InvalidInput(
            chat_record,
            "is a chat record ({speaker, text}) in a Claude Code transcript: ingest the two "
            "formats from files of their own",
        )
