"""A conversation's turns as `memory ingest` goes through them: a list, or for a file's chat
export or transcript, its text read again each time (`Reread`), after one pass that checks every
turn (`streamed`), so a 64 MiB file of tiny turns is never held as its 0.5 GB of turns.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import islice
from typing import overload

from octobrain.errors import InvalidInput, as_json
from octobrain.models import CONTENT_BYTES
from octobrain.spans import split_text

__all__ = [
    "UNSAID",
    "Conversation",
    "Read",
    "Reread",
    "Turn",
    "collected",
    "duplicate",
    "in_parts",
    "listed",
    "parts",
    "streamed",
]


@dataclass(frozen=True, slots=True)  # (a file holds up to millions of them)
class Turn:
    """One thing one speaker said."""

    speaker: str
    text: str
    session: str  # the session's label within its conversation ("1", "2", … or an id)
    key: str  # stable within the conversation
    time: datetime | None = None  # when it was said (a turn's own time, else its session's)
    session_date: str = ""  # the session's date as the source wrote it, for the context
    # Where its key was given (`turns[3].id`, `line 7.uuid`), for errors; not what it is.
    origin: str = field(default="", compare=False)
    # The keys earlier versions gave it (`turn_keys.former_keys`): a turn stored under one of
    # them is this turn.
    former: tuple[str, ...] = field(default=(), compare=False)
    # How the turn an earlier call stored before it is found, when it starts its session in
    # this call: "session" (the latest of its session up to its time), "conversation" (of
    # its conversation, within a silence that starts no session), or "" (not looked for).
    follows: str = field(default="", compare=False)
    # The field of a name cut to fit (`turns[3].speaker`: `turn_fields.speaker_name`), or "".
    cut: str = field(default="", compare=False)
    # Its text as earlier versions stored it, where reading its markup changed it: as written
    # (Slack's `<@U123>`, `&amp;`), with a channel by id (`#C024BE7LR`, before `channels.json`
    # was read): a turn an earlier version stored with one of them is this turn, already there.
    written: tuple[str, ...] = field(default=(), compare=False)
    # The name of the conversation earlier versions stored it under, where not its own (a
    # Slack day file's date: each day of a channel was a conversation of its own), or "".
    earlier: str = field(default="", compare=False)


@dataclass
class Conversation:
    """The turns of one conversation, in order; `key` names it (stable for the same source)."""

    key: str
    # A list, or for a file's chat export or transcript its text read again each time the
    # turns are gone through (`Reread`): a 64 MiB file of tiny turns held them as 0.5 GB.
    turns: Sequence[Turn] = field(default_factory=list)
    blank: int = 0  # records of a chat export whose text was blank: skipped, and counted
    cut: int = 0  # turns whose speaker's name was cut to fit (`Turn.cut`), and the first one's
    cut_at: str = ""
    undated: int = 0  # turns without a time: stored as of the ingest
    # Records that hold nothing said in the conversation (a system prompt, a tool call or its
    # result, a notice): skipped, and counted.
    unsaid: int = 0
    # Turns of a branch the user left by editing an earlier prompt in Claude Code (or
    # rewinding): not in the conversation it resumes (`transcript_branch`), skipped, counted.
    abandoned: int = 0
    # The conversation's title where its export gives one (Claude.ai's `name`, ChatGPT's
    # `title`): shown and indexed with each turn; its key stays its id.
    title: str = ""

    @property
    def speakers(self) -> list[str]:
        """Distinct speakers in order of first appearance."""
        return list(dict.fromkeys(t.speaker for t in self.turns))


class _Unsaid:
    """What a reader yields for a record that holds nothing said in the conversation."""


UNSAID = _Unsaid()
ABANDONED = _Unsaid()  # a turn on a branch left by an edited prompt (`Conversation.abandoned`)
# What a reader of records yields for each: a turn, None for one whose text is blank, UNSAID
# or ABANDONED.
Read = Turn | None | _Unsaid


class Reread(Sequence[Turn]):
    """A file's turns, made from its text again each time they are gone through."""

    def __init__(self, make: Callable[[], Iterator[Turn]], count: int) -> None:
        self._make, self._count = make, count

    def __iter__(self) -> Iterator[Turn]:
        return self._make()

    def __len__(self) -> int:
        return self._count

    def __eq__(self, other: object) -> bool:  # the same turns, as a list of them is
        if not isinstance(other, (list, Reread)):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    @overload
    def __getitem__(self, index: int) -> Turn: ...

    @overload
    def __getitem__(self, index: slice) -> list[Turn]: ...

    def __getitem__(self, index: int | slice) -> Turn | list[Turn]:
        return list(self)[index]  # (a caller's lookup; ingest goes through them in order)


def listed(key: str, turns: list[Turn], blank: int = 0) -> Conversation:
    """A conversation of turns held in a list, its names cut to fit and its turns without a
    time counted."""
    cut = [turn.cut for turn in turns if turn.cut]
    undated = sum(turn.time is None for turn in turns)
    return Conversation(key, turns, blank, len(cut), cut[0] if cut else "", undated)


def collected(key: str, reads: Iterable[Read], title: str = "") -> Conversation:
    """`listed`, of the turns a reader yields, its blank and unsaid records counted."""
    turns: list[Turn] = []
    blank = unsaid = 0
    for read in reads:
        if isinstance(read, Turn):
            turns.append(read)
        else:
            blank += read is None
            unsaid += read is UNSAID
    return replace(listed(key, turns, blank), unsaid=unsaid, title=title)


def streamed(make: Callable[[], Iterator[Read]], key: str) -> Conversation:
    """The conversation whose records `make` reads (a turn, None for a blank record or UNSAID for
    one that holds nothing said), each
    checked once now and read again when its turns are gone through: a turn id given to two
    different turns is the field error `once` raises, a repeated turn is dropped, and a turn
    longer than a memory holds is said in parts (`in_parts`). Only two digests and a count a
    turn are held (32 bytes, not the turn's 270 or more)."""
    keys, said, pieces = bytearray(), bytearray(), array("I")
    blank, cut, cut_at, undated, unsaid, abandoned = 0, 0, "", 0, 0, 0
    for turn in make():
        if not isinstance(turn, Turn):
            blank += turn is None
            unsaid += turn is UNSAID
            abandoned += turn is ABANDONED
            continue
        undated += turn.time is None
        if turn.cut:
            cut, cut_at = cut + 1, cut_at or turn.cut
        keys += _digest16(turn.key)
        said += _digest16(turn.speaker, turn.text)
        pieces.append(len(split_text(turn.text, CONTENT_BYTES[1])))
    drop = _repeats(keys, said, make)
    count = sum(pieces) - sum(pieces[i] for i in drop)
    del keys, said, pieces

    def turns() -> Iterator[Turn]:
        said = (t for t in make() if isinstance(t, Turn))
        for i, turn in enumerate(said):
            if i not in drop:
                yield from parts(turn)

    return Conversation(key, Reread(turns, count), blank, cut, cut_at, undated, unsaid, abandoned)


def _digest16(*parts: str) -> bytes:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=16).digest()


def _repeats(keys: bytearray, said: bytearray, make: Callable[[], Iterator[Read]]) -> set[int]:
    """The places of the turns that repeat an earlier turn (its key, speaker and words), from
    each turn's key and words digested (`_digest16`); a key given to two different turns is
    `once`'s field error, at the first turn where `once` meets it."""
    if not keys:
        return set()
    import numpy as np

    key = np.frombuffer(keys, dtype=np.uint64).reshape(-1, 2)
    words = np.frombuffer(said, dtype=np.uint64).reshape(-1, 2)
    order = np.lexsort((key[:, 1], key[:, 0]))  # stable: a key's turns in their order
    ranked = key[order]
    again = np.zeros(len(order), dtype=bool)
    again[1:] = (ranked[1:] == ranked[:-1]).all(axis=1)
    if not again.any():
        return set()
    heads = np.maximum.accumulate(np.where(again, 0, np.arange(len(order))))
    later, first = order[again], order[heads[again]]
    other = (words[later] != words[first]).any(axis=1)
    if other.any():
        at = int(np.argmin(np.where(other, later, len(order))))
        bad, given = int(later[at]), int(first[at])
        turns = list(islice((t for t in make() if isinstance(t, Turn)), bad + 1))
        raise duplicate(bad, turns[bad], given, turns[given])
    return {int(i) for i in later}


def duplicate(i: int, turn: Turn, j: int, first: Turn) -> InvalidInput:
    return InvalidInput(
        turn.origin or f"turn {i + 1}",
        f"duplicate of {first.origin or f'turn {j + 1}'} ({as_json(turn.key)}), "
        "which is a different turn; a turn id must name one turn",
    )


def in_parts(conversation: Conversation) -> Conversation:
    """`conversation` with each turn longer than a memory holds (`CONTENT_BYTES`) said as
    several turns of its speaker, cut at natural breaks, so none of it is lost: the first part
    keeps the turn's key, part n is `<key>/part-<n>`."""
    turns = [part for turn in conversation.turns for part in parts(turn)]
    return replace(conversation, turns=turns)


def parts(turn: Turn) -> Iterator[Turn]:
    """`turn`, or the parts of it `in_parts` says it as."""
    pieces = split_text(turn.text, CONTENT_BYTES[1])
    if len(pieces) == 1 and pieces[0] is turn.text:
        yield turn
        return
    for n, part in enumerate(pieces, 1):
        tail = "" if n == 1 else f"/part-{n}"
        former = tuple(f"{key}{tail}" for key in turn.former)
        yield replace(turn, text=part, key=f"{turn.key}{tail}", former=former)
