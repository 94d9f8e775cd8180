"""What an ingest's turns have to do with turns the store already holds of their conversation.

Two things, batch by batch (`Settler.settle`):
- a turn held under a key an earlier version gave it (`Turn.former`: its place in the call, its
  speaker's name before bidirectional controls were dropped) keeps that row's id, so ingesting
  a transcript again after an upgrade stores none of it a second time, and a turn forgotten
  under that id stays forgotten. A timed turn is taken for the held row only when that row was
  said at the same time: its former key is its place, and another call's turn at that place is
  another turn;
- a turn that starts its session in this call, and is not stored yet, is linked to the latest
  turn of that session an earlier call stored up to its time (`Turn.follows`), so a transcript
  sent in windows is chained across them as one call would chain it (a turn of another
  conversation whose tags read alike, "Standup" and "standup", is no turn of it); and once the
  call's turns are stored, the first turn an earlier call stored after the last of a session of
  this call, linked to none before it, is linked to that last turn (`onward_links`: a window
  sent after the one that follows it).

And before them, for a chat export whose sessions are found by silence (numbered in each call
from 1), the number each session takes among those earlier calls stored
(`continued_sessions`): the one it continues, or the next one free.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from octobrain.memory.conversation import SESSION_GAP
from octobrain.memory.temporal import SESSION_LINK_STRENGTH, SESSION_PREFIX, session_tag
from octobrain.models import Memory, Relationship, RelationshipType
from octobrain.store import forgotten
from octobrain.store.sql import sql_in, sql_str

if TYPE_CHECKING:
    from octobrain.store.memories import MemoryStore

__all__ = ["SAID_NEXT", "Earlier", "Settler", "continued_sessions", "onward_links"]

SAID_NEXT = "said next in the same session"  # what a link between two turns says


@dataclass
class Earlier:
    """Of a batch's turns (by memory id): the ids earlier versions gave each, with its time;
    and for each that starts its session in this call, how to find the turn before it (the
    tag its session's turns carry, its time, and the earliest time that turn may have: a
    session found by silence continues only within `SESSION_GAP`)."""

    former: dict[str, tuple[tuple[str, ...], datetime | None]] = field(default_factory=dict)
    # The text as the export wrote it of those whose markup was read (`Turn.written`).
    written: dict[str, tuple[str, ...]] = field(default_factory=dict)
    firsts: dict[str, tuple[str, datetime, datetime | None]] = field(default_factory=dict)


class Settler:
    """`settle` for the batches of one conversation of one ingest, in order."""

    def __init__(self, store: MemoryStore, scope: str, conversation_tag: str, role: str) -> None:
        self._store, self._scope, self._tag, self._role = store, scope, conversation_tag, role
        self._renamed: dict[str, str] = {}  # id → the id the store holds the turn under
        self._held: bool | None = None  # whether the conversation had turns held (asked once)

    def settle(
        self, batch: list[Memory], previous: dict[str, str], earlier: Earlier
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Give each turn of `batch` held under a former id that id (in place); the previous
        turn of each (`previous`, id → id) with those ids and with the links to turns earlier
        calls stored; and the content the store holds of the batch's turns and their previous
        turns (id → content)."""
        store = self._store
        ids = [m.id for m in batch]
        olds = [old for m in batch for old in earlier.former.get(m.id, ((), None))[0]]
        ends = {self._renamed.get(v, v) for v in previous.values()} - set(ids)
        stored: dict[str, str] = store.values_of(ids + olds + sorted(ends), "content")
        if olds:
            self._take_former(batch, earlier, stored, olds)
        renamed = self._renamed
        previous = {renamed.get(k, k): renamed.get(v, v) for k, v in previous.items()}
        firsts = {renamed.get(k, k): v for k, v in earlier.firsts.items()}
        wanted = [i for i in firsts if i not in stored and i not in previous]
        if wanted and self._conversation_held():
            gone = forgotten.among(store, wanted)
            found = {}
            for turn_id in wanted:
                if turn_id not in gone:
                    # (another ingest may have stored the turn since `stored` was read)
                    before = latest_up_to(
                        store, self._scope, self._tag, *firsts[turn_id], other_than=turn_id,
                        role=self._role,
                    )  # fmt: skip
                    if before is not None:
                        found[turn_id] = before
            if found:
                stored |= store.values_of(sorted(set(found.values()) - set(stored)), "content")
                previous |= found
        return previous, stored

    def _take_former(
        self, batch: list[Memory], earlier: Earlier, stored: dict[str, str], olds: list[str]
    ) -> None:
        held = [old for old in olds if old in stored]
        if held:  # (a turn another role holds is not this role's: its id was made without one)
            roles = self._store.values_of(held, "role")
            held = [old for old in held if roles.get(old) == self._role]
        said = dict(self._store.values_of(held, "created_at")) if held else {}
        gone = forgotten.among(self._store, [old for old in olds if old not in stored])
        for memory in batch:
            if memory.id in stored or memory.id not in earlier.former:
                continue
            keys, moment = earlier.former[memory.id]
            for old in keys:
                same = old in said and (moment is None or said[old] == moment)
                if same or old in gone:
                    if old in stored and stored[old] in earlier.written.get(memory.id, ()):
                        stored[old] = memory.content  # (its text as written: the same turn)
                    self._renamed[memory.id] = memory.id = old
                    break

    def _conversation_held(self) -> bool:
        if self._held is None:
            where = f"{own(self._scope, self._role)} AND array_has(tags, {sql_str(self._tag)})"
            self._held = self._store.count(where) > 0
        return self._held


def own(scope: str, role: str) -> str:
    """The rows of `scope` and `role` (exactly): a role's turns are a conversation of its own,
    its sessions numbered and linked among its turns only."""
    return f"scope = {sql_str(scope)} AND role = {sql_str(role)}"


def latest_up_to(
    store: MemoryStore,
    scope: str,
    conversation: str,
    session: str,
    moment: datetime,
    since: datetime | None,
    *,
    other_than: str,
    role: str,
) -> str | None:
    """The id of the latest turn of `scope` tagged `conversation` and `session` said at
    `moment` or before (and at `since` or after), other than the turn `other_than` whose
    previous turn is looked for: of turns said at the same time, one no stored turn follows
    yet. Both tags, as neither names a conversation alone: its tag is its name
    lowercased and cut ("Standup" and "standup" have one), its sessions' tags drop the spaces
    ("team sync" and "teamsync" have one)."""
    where = [
        own(scope, role),
        f"array_has(tags, {sql_str(conversation)})",
        f"array_has(tags, {sql_str(session)})",
        f"created_at <= timestamp {sql_str(moment.isoformat())}",
        f"id != {sql_str(other_than)}",
    ]
    if since is not None:
        where.append(f"created_at >= timestamp {sql_str(since.isoformat())}")
    rows = store.scan_arrow(" AND ".join(where), columns=["id", "created_at"])
    if not rows.num_rows:
        return None
    said = dict(zip(rows["id"].to_pylist(), rows["created_at"].to_pylist(), strict=True))
    latest = max(said.values())
    tied: list[str] = sorted(i for i, t in said.items() if t == latest)
    if len(tied) > 1:
        kind = sql_str(RelationshipType.SAME_SESSION.value)
        edges = store.relationships.search().where(
            f"relationship_type = {kind} AND {sql_in('target_id', tied)}"
        )
        followed = {r["target_id"] for r in edges.select(["target_id"]).limit(None).to_list()}
        tied = [i for i in tied if i not in followed] or tied
    return tied[-1]


def continued_sessions(
    store: MemoryStore,
    scope: str,
    tag: str,
    key: str,
    spans: Mapping[str, tuple[datetime, datetime]],
    role: str,
) -> dict[str, str]:
    """The session number each of this call's sessions found by silence takes in the
    conversation `key` (tagged `tag`) as earlier calls stored it; `spans`: each session's
    number in this call → when its first and its last turn were said, in order.

    A session continues the session of a stored turn said within `SESSION_GAP` before its
    first turn, else of one said from its first turn to `SESSION_GAP` after its last (a window
    sent after the one that follows it), as one call given both would have numbered it (a
    transcript sent again finds its own turns); any other takes the lowest number no stored
    session and no session before it in this call has (after the last when none were
    forgotten). Empty when the conversation has no turn stored: this call's numbers stand.
    Only turns of its own sessions found by silence count: another conversation whose tag
    reads alike (`latest_up_to`) has sessions of its own, and so have labelled sessions."""
    rows = store.scan_arrow(
        f"{own(scope, role)} AND array_has(tags, {sql_str(tag)})",
        columns=["created_at", "tags"],
    )
    if not rows.num_rows:
        return {}
    every = [
        (when, next((t for t in tags if t.startswith(SESSION_PREFIX)), ""))
        for when, tags in zip(rows["created_at"].to_pylist(), rows["tags"].to_pylist(), strict=True)
    ]
    taken = {t for _, t in every if t}
    number_of = {session_tag(f"{key}/{n}"): str(n) for n in range(1, len(taken) + len(spans) + 2)}
    said = sorted((when, t) for when, t in every if t in number_of)
    times = [when for when, _ in said]
    # (the lowest free number only grows as numbers are taken: looked for from the last one)
    free = (n for n in itertools.count(1) if session_tag(f"{key}/{n}") not in taken)
    out: dict[str, str] = {}
    for label, (first, last) in spans.items():
        at = bisect.bisect_right(times, first)
        if at and first - times[at - 1] <= SESSION_GAP and said[at - 1][1] in number_of:
            out[label] = number_of[said[at - 1][1]]
        elif at < len(said) and times[at] - last <= SESSION_GAP and said[at][1] in number_of:
            out[label] = number_of[said[at][1]]
        else:
            out[label] = str(next(free))
        taken.add(session_tag(f"{key}/{out[label]}"))
    return out


def onward_links(
    store: MemoryStore, scope: str, tag: str, ends: Mapping[str, Memory]
) -> list[Relationship]:
    """The links from each stored turn of the conversation tagged `tag` that was said first
    after the last turn of one of this call's sessions (`ends`: session tag → that turn), in
    the same session, to that last turn: what it is linked to when it is linked to no turn
    before it (an earlier call stored it first in its session)."""
    rows = store.scan_arrow(
        f"scope = {sql_str(scope)} AND array_has(tags, {sql_str(tag)})",
        columns=["id", "created_at", "tags"],
    )
    after: dict[str, tuple[datetime, str]] = {}  # session tag → the first turn after its end
    for turn_id, when, tags in zip(
        rows["id"].to_pylist(),
        rows["created_at"].to_pylist(),
        rows["tags"].to_pylist(),
        strict=True,
    ):
        session = next((t for t in tags if t in ends), None)
        if session is not None and when > ends[session].created_at:
            after[session] = min(after.get(session, (when, turn_id)), (when, turn_id))
    return [
        Relationship(
            turn_id,
            ends[session].id,
            RelationshipType.SAME_SESSION,
            SESSION_LINK_STRENGTH,
            SAID_NEXT,
            scope,
        )
        for session, (_, turn_id) in after.items()
    ]
