"""Conversations into memory: one memory per turn that keeps its context.

What is shown stays the turn: the title names the speaker and the session's date, the content is
what was said. What is embedded and indexed adds the context a lone turn has lost (`Memory.
context`): the conversation's participants, the session and its date, and the turns just before
and after it (contextual chunking), so "Yeah, it was so much fun!" is still about the pottery
class. Turns of a session are chained by `same_session` edges (temporal association), so a hit
brings its neighbour along.

Ids are derived from the scope, the conversation and the turn's stable key, so ingesting the
same transcript twice adds nothing the second time. Writes go in batches: one embedding call and
one commit per batch. Text is screened for secrets as `memorize` screens it.
"""

from __future__ import annotations

import math
import unicodedata
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING

import numpy as np

from octobrain.memory import ingest_writes, temporal
from octobrain.memory.conversation import (
    CONVERSATION_PREFIX,
    SESSION_GAP,
    SPEAKER_PREFIX,
    Conversation,
    Turn,
)
from octobrain.memory.earlier_turns import (
    Earlier,
    Settler,
    continued_sessions,
)
from octobrain.memory.turn_fields import SPEAKER_CHARS
from octobrain.models import (
    CONTENT_BYTES,
    CONTEXT_BYTES,
    TAG_CHARS,
    Memory,
    MemoryType,
    Source,
)
from octobrain.secrets import screen
from octobrain.store.respell import former_spellings
from octobrain.text import analyze
from octobrain.times import earlier_by, utcnow

if TYPE_CHECKING:
    from datetime import datetime

    from octobrain.memory.brain import Brain

__all__ = ["IngestReport", "NotEmbedded", "ingest", "turn_id", "turn_memories", "unstored_texts"]

# Turns built, checked and written at once: one read of their ids, one of their links (a file
# ingested again skips every batch it holds unchanged, without the lock), one embedding call,
# two commits. Batches of 256 made 200,000 tiny turns 1,564 commits: 95 s of CPU and 903 MB
# resident, against 64 s and 700 MB (the store's own memory grows with its commits).
BATCH = 1024
WINDOW = 1  # turns on each side whose words join a turn's context
TOPIC_WORDS = (
    0  # a session's most distinctive words in its turns' context (8 measured worse: README)
)
NEIGHBOUR_CHARS = 240
_NAMESPACE = uuid.UUID("6f1d3c2a-9b7e-4c41-8f0a-1c5e2d7b9a34")

Progress = Callable[[int], None]


@dataclass
class IngestReport:
    """What an ingest did."""

    conversations: int = 0
    turns: int = 0
    added: int = 0
    skipped_existing: int = 0
    links: int = 0
    # Turns whose id names a stored turn with other words (the same `id` given to another
    # turn in a later call): not stored, and counted, rather than taken for the stored one.
    other_words: int = 0
    forgotten: int = 0  # turns the user forgot (`forget`): not stored again
    blank: int = 0  # records with blank text: nothing to store
    unsaid: int = 0  # records that hold nothing said (a system prompt, a tool call, a notice)
    abandoned: int = 0  # turns of a branch left by an edited prompt (`Conversation.abandoned`)
    cut: int = 0  # turns whose speaker's name was cut to fit, and the first one's field
    cut_at: str = ""
    # Turns without a time: created when first ingested (what `--after`, `--before` and a
    # question naming a date read); `memory ingest` says so.
    undated: int = 0

    def summary(self, added: str) -> str:
        """`<added> added, M already present[, K forgotten …][, K not stored: …]`."""
        text = f"{added} added, {self.skipped_existing} already present"
        if self.forgotten:
            text += f", {self.forgotten} forgotten earlier (`forget`), not stored again"
        if self.blank:
            text += f", {self.blank} with blank text skipped (no visible character)"
        if self.unsaid:
            text += (
                f", {self.unsaid} not said in the conversation skipped (system prompts, tool "
                "calls and results, notices)"
            )
        if self.abandoned:
            text += (
                f", {self.abandoned} of a branch left by editing an earlier prompt skipped (not "
                "in the conversation Claude Code resumes)"
            )
        if self.cut:
            text += (
                f", {self.cut} with the speaker's name cut to {SPEAKER_CHARS} characters, the "
                f"most a name holds (first: {self.cut_at})"
            )
        if self.other_words:
            text += (
                f", {self.other_words} not stored: their id names a stored turn with other "
                "words (a turn id must name one turn)"
            )
        return text


def turn_id(scope: str, conversation: str, turn_key: str, role: str = "") -> str:
    """The memory id of a turn: the same for the same turn of the same conversation in a scope,
    stored by one role (a role-less turn's id as before roles were: stores keep their ids)."""
    parts = (scope, conversation, turn_key, *((role,) if role else ()))
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))


def _tag(prefix: str, value: str) -> str:
    return (prefix + "-".join(value.lower().split()))[:TAG_CHARS]


def _cut(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0]
    return head + " …"


def _fit(text: str, max_bytes: int) -> str:
    data = text.encode()
    return text if len(data) <= max_bytes else data[:max_bytes].decode(errors="ignore")


def _title(turn: Turn, conversation: str) -> str:
    """`<speaker>, <session date>`, and the conversation's title where its export gives one
    (`Conversation.title`: what a hit shows of which chat it is from; its tags name its id)."""
    when = turn.session_date or f"session {turn.session}"
    named = f" — {conversation}" if conversation else ""
    return _fit(f"{turn.speaker}, {when}{named}", 200)


def session_topics(turns: Sequence[Turn], n: int) -> dict[str, list[str]]:
    """Each session's `n` most distinctive words (tf-idf against the conversation's other
    sessions; words said at least twice in it, stopwords and short words left out)."""
    if n <= 0:
        return {}
    words: dict[str, Counter[str]] = {}
    for turn, terms in zip(turns, analyze([t.text for t in turns], stem=False), strict=True):
        words.setdefault(turn.session, Counter()).update(w for w in terms if len(w) > 3)
    sessions = len(words)
    spread = Counter(w for counts in words.values() for w in counts)
    out = {}
    for session, counts in words.items():
        scored = [
            (c * math.log((1 + sessions) / spread[w]), w) for w, c in counts.items() if c >= 2
        ]
        out[session] = [w for _, w in sorted(scored, key=lambda x: (-x[0], x[1]))[:n]]
    return out


def _context(
    turn: Turn, before: list[Turn], after: list[Turn], topics: dict[str, list[str]], people: str
) -> str:
    """The indexed context of `turn`: who takes part, the session and its date, and the words
    of the turns just `before` and `after` it in the same session (without their speakers'
    names, so a question naming a person matches the turns that person said)."""
    parts = [f"Conversation between {people}, session {turn.session}"]
    if turn.session_date:
        parts[0] += f" on {turn.session_date}"
    if topics.get(turn.session):
        parts.append("Session about: " + ", ".join(topics[turn.session]))
    before = [t for t in before if t.session == turn.session]
    after = [t for t in after if t.session == turn.session]
    near = []  # on lines of their own: indexed by words, not embedded (`Memory.embedded_text`)
    if before:
        near.append("Replying to: " + " / ".join(_cut(t.text, NEIGHBOUR_CHARS) for t in before))
    if after:
        near.append("Answered with: " + " / ".join(_cut(t.text, NEIGHBOUR_CHARS) for t in after))
    return _fit("\n".join([". ".join(parts), *near]), CONTEXT_BYTES)


def _with_neighbours(
    turns: Iterable[Turn], window: int
) -> Iterator[tuple[list[Turn], Turn, list[Turn]]]:
    """Each of `turns` with the `window` turns before and after it, holding no more of them."""
    ahead = iter(turns)
    coming = deque(islice(ahead, window + 1))
    past: deque[Turn] = deque(maxlen=window)
    while coming:
        turn = coming.popleft()
        coming.extend(islice(ahead, 1))
        yield list(past), turn, list(coming)[:window]
        past.append(turn)


def turn_memories(
    brain: Brain,
    conv: Conversation,
    *,
    scope: str,
    window: int = WINDOW,
    topic_words: int = TOPIC_WORDS,
) -> list[Memory]:
    """The memories (not yet stored) for every turn of `conv`, in order, in `scope`."""
    whole = _batches(brain, conv, scope, window, topic_words, max(1, len(conv.turns)))
    return [m for batch, _, _ in whole for m in batch]


def _batches(
    brain: Brain, conv: Conversation, scope: str, window: int, topic_words: int, size: int
) -> Iterator[tuple[list[Memory], dict[str, str], Earlier]]:
    """The memories of `conv`'s turns, `size` at a time, each batch with the id of the
    previous turn of each of its turns' sessions (id → id; a session's first turn has none)
    and what of its turns an earlier call may have stored (`earlier_turns`).
    Every turn is screened for secrets before the first batch comes, so a refused one stops
    the ingest before anything is written; the caller holds a batch's memories, not every
    turn's (200,000 tiny turns built at once held 300 MB). The turns are gone through twice,
    a turn and its neighbours at a time, so a file's (`turns.Reread`) are never all
    held."""
    policy = brain.config.memory.secrets

    numbers: dict[str, str] = {}  # a session's number in this call → in the conversation

    def screened() -> Iterator[Turn]:
        for i, t in enumerate(conv.turns):
            turn = _screened(t, f"turns[{i}]", policy)
            number = numbers.get(turn.session, turn.session)
            yield turn if number == turn.session else replace(turn, session=number)

    key = screen("conversation", conv.key, policy)
    title = screen("conversation title", conv.title, policy) if conv.title else ""
    speakers: dict[str, None] = {}
    spans: dict[str, tuple[datetime, datetime]] = {}  # sessions found by silence: when said
    for turn in screened():  # (held one at a time: a file's turns are read again below)
        if len(speakers) < 4:
            speakers.setdefault(turn.speaker)
        if turn.follows == "conversation" and turn.time is not None:
            spans[turn.session] = (spans.get(turn.session, (turn.time,))[0], turn.time)
    conversation_tag = _tag(CONVERSATION_PREFIX, key)
    # A name is in NFC (`turn_fields.same_name`); before, as written: a macOS file's, as NFD.
    decomposed = unicodedata.normalize("NFD", key)
    # Its scope as an earlier version spelt it (`store.respell`): its turns' ids were made so.
    spelt = former_spellings(brain.store, scope) if scope else []
    role = brain.role  # (in the id: another role's copy of the turn is not this role's)
    if spans:  # (numbered from 1 in each call: they go on from those earlier calls stored)
        numbers.update(
            continued_sessions(brain.store, scope, conversation_tag, key, spans, brain.role)
        )
    now = utcnow()
    # (the distinctive words weigh every turn of the conversation: held for them, when asked)
    topics = session_topics(list(screened()), topic_words) if topic_words > 0 else {}
    people = " and ".join(speakers)
    last: dict[str, str] = {}  # session → id of its latest turn so far
    batch: list[Memory] = []
    previous: dict[str, str] = {}
    earlier = Earlier()
    for before, turn, after in _with_neighbours(screened(), window):
        session_tag = temporal.session_tag(f"{key}/{turn.session}")
        memory = Memory(
            id=turn_id(scope, key, turn.key, role),
            title=_title(turn, title),
            content=_fit(turn.text, CONTENT_BYTES[1]),
            context=_context(turn, before, after, topics, people),
            memory_type=MemoryType.COMMUNICATION,
            scope=scope,
            role=brain.role,
            tags=[
                conversation_tag,
                session_tag,
                _tag(SPEAKER_PREFIX, turn.speaker),
            ],
            importance=brain.config.memory.default_importance,
            source=Source.IMPORTED,
            created_at=turn.time or now,
            updated_at=now,
            last_accessed=now,
        )
        if turn.former or decomposed != key or spelt or turn.earlier or role:
            # (a role's turns were stored under a role-less id before the id named the role)
            roles = (role, "") if role else ("",)
            former = tuple(turn_id(scope, key, k, r) for r in roles for k in turn.former)
            former += (turn_id(scope, key, turn.key),) if role else ()
            keys = (turn.key, *turn.former)
            # (its name as an earlier version stored it: decomposed, or another conversation's)
            others = [n for n in dict.fromkeys((decomposed, turn.earlier)) if n not in ("", key)]
            former += tuple(turn_id(scope, n, k, r) for r in roles for n in others for k in keys)
            names = dict.fromkeys((key, *others))
            former += tuple(
                turn_id(s, n, k, r) for r in roles for s in spelt for n in names for k in keys
            )
            earlier.former[memory.id] = (former, turn.time)
        if turn.written:
            earlier.written[memory.id] = tuple(_fit(t, CONTENT_BYTES[1]) for t in turn.written)
        if turn.session in last:
            previous[memory.id] = last[turn.session]
        elif turn.follows and turn.time is not None:
            alone = turn.follows == "conversation"  # (numbered by silence: `continued_sessions`)
            earlier.firsts[memory.id] = (
                session_tag,
                turn.time,
                earlier_by(turn.time, SESSION_GAP) if alone else None,
            )
        last[turn.session] = memory.id
        batch.append(memory)
        if len(batch) == size:
            yield batch, previous, earlier
            batch, previous, earlier = [], {}, Earlier()
    if batch:
        yield batch, previous, earlier


def _settled(
    brain: Brain, conv: Conversation, scope: str, window: int, topic_words: int
) -> Iterator[tuple[list[Memory], dict[str, str], dict[str, str]]]:
    """`_batches`, each turn held under an id an earlier version gave it taking that id, a
    session's first turn of this call linked to the turn before it an earlier call stored
    (`earlier_turns.Settler`), and each batch with the content the store holds of its turns
    and their previous turns (id → content)."""
    settler: Settler | None = None
    for batch, previous, earlier in _batches(brain, conv, scope, window, topic_words, BATCH):
        if settler is None:  # (a turn's first tag names its conversation)
            settler = Settler(brain.store, scope, batch[0].tags[0], brain.role)
        yield batch, *settler.settle(batch, previous, earlier)


def _screened(turn: Turn, where: str, policy: str) -> Turn:
    text = screen(f"{where}.text", turn.text, policy)
    speaker = screen(f"{where}.speaker", turn.speaker, policy)
    if (text, speaker) == (turn.text, turn.speaker):
        return turn
    return replace(turn, speaker=speaker, text=text)


def ingest(
    brain: Brain,
    conversations: Sequence[Conversation],
    *,
    global_: bool = False,
    window: int = WINDOW,
    topic_words: int = TOPIC_WORDS,
    progress: Progress = lambda _n: None,
    vectors: Mapping[str, np.ndarray] | None = None,
    embed_missing: bool = True,
    begun: Callable[[Conversation], None] = lambda _c: None,
) -> IngestReport:
    """Store every turn of `conversations` not stored yet, chained within its sessions.

    `progress(n)` after each batch of `n` turns, `begun(c)` as each conversation's turns are
    started on. Secrets follow `memory.secrets` (refuse: the
    first turn holding one stops the ingest before anything of its conversation is written).
    `vectors`: embeddings computed beforehand, by embedded text (`unstored_texts`); a turn
    whose text is not among them is embedded here, unless `embed_missing` is off: then
    `NotEmbedded` names every such text of the conversation before any of it is written."""
    scope = "" if global_ else brain.scope
    if not vectors:
        brain.embedder.prepare()  # loads while the store opens to find the turns already stored
    report = IngestReport(conversations=len(conversations))
    for conv in conversations:
        begun(conv)
        if not embed_missing:
            missing = [
                t
                for batch, _, _ in _settled(brain, conv, scope, window, topic_words)
                for t in _unstored(brain, batch)
                if t not in (vectors or {})
            ]
            if missing:
                raise NotEmbedded(missing)
        report.turns += len(conv.turns)
        report.blank += conv.blank
        report.unsaid += conv.unsaid
        report.abandoned += conv.abandoned
        report.cut, report.cut_at = report.cut + conv.cut, report.cut_at or conv.cut_at
        report.undated += conv.undated
        ends: dict[str, Memory] = {}  # session tag → its latest turn in this call
        for batch, previous, stored in _settled(brain, conv, scope, window, topic_words):
            if ingest_writes.unchanged(brain, batch, previous, stored):
                report.skipped_existing += len(batch)
            else:
                added, links, other, gone = ingest_writes.write_batch(
                    brain, batch, previous, vectors or {}, stored
                )
                report.added += added
                report.other_words += other
                report.forgotten += gone
                report.skipped_existing += len(batch) - added - other - gone
                report.links += links
            for m in batch:
                end = ends.setdefault(m.tags[1], m)
                if m.created_at >= end.created_at:
                    ends[m.tags[1]] = m
            progress(len(batch))
        if ends:  # (also when nothing was added: an ingest killed before it left it undone)
            report.links += ingest_writes.link_onward(brain, scope, ends)
    return report


def unstored_texts(
    brain: Brain, conversations: Sequence[Conversation], *, global_: bool = False
) -> list[str]:
    """What `ingest` would embed: the embedded texts of the turns the store does not hold yet
    (screened for secrets, so a refused turn stops here). A caller that must not hold a lock
    through the embedding embeds these first and hands the vectors to `ingest`."""
    scope = "" if global_ else brain.scope
    return [
        t
        for conv in conversations
        for batch, _, _ in _settled(brain, conv, scope, WINDOW, TOPIC_WORDS)
        for t in _unstored(brain, batch)
    ]


def _unstored(brain: Brain, memories: list[Memory]) -> list[str]:
    """The embedded texts of `memories` the store does not hold, batch by batch."""
    texts: list[str] = []
    for start in range(0, len(memories), BATCH):
        texts += [
            m.embedded_text() for m in ingest_writes.absent(brain, memories[start : start + BATCH])
        ]
    return texts


class NotEmbedded(Exception):
    """Turns `ingest` would have to embed itself (`embed_missing` off): their embedded texts."""

    def __init__(self, texts: list[str]) -> None:
        super().__init__(f"{len(texts)} turns have no vector")
        self.texts = texts
