"""Which entries of a Claude Code transcript are off the conversation Claude Code shows.

A user who edits an earlier prompt (or rewinds) starts a new branch: the transcript keeps both,
each entry naming the one before it (`uuid`, `parentUuid`). Claude Code resumes the branch
that ends at the last message written, read back to its root; the abandoned one stays in the
file. Read in file order, both were stored as one conversation, abandoned turns recalled as if
said in order. A compaction's boundary starts again at no parent and names the entry before it
as `logicalParentUuid`: followed, so turns before a compaction stay in.

When the chain cannot be followed to its root (a transcript older than `parentUuid`, a parent
Claude Code named but never wrote, a loop), only what provably branched off the chain that was
followed is left out: nothing else is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["Branch", "is_off", "off_branch"]

_MESSAGES = ("user", "assistant", "attachment", "system")  # what can end the live branch
_UNLINKED = ""  # an entry that names no parent field at all (a transcript of before them)
_T = TypeVar("_T")


class Branch:
    """The links of a transcript's entries, noted as a reader parses them (`noted`): which
    entries are off the branch is known once every entry is noted (`off`). A reader that
    needs the entries anyway parses each line once, not once for the branch and again."""

    def __init__(self) -> None:
        self._parents: dict[str, str | None] = {}
        self._leaf = ""

    def note(self, entry: Any) -> None:
        """`entry` read, in file order."""
        uuid = entry.get("uuid") if isinstance(entry, dict) else None
        if not isinstance(uuid, str) or not uuid or uuid in self._parents:
            return
        self._parents[uuid] = _parent(entry)
        if entry.get("type") in _MESSAGES and not entry.get("isSidechain"):
            self._leaf = uuid

    def noted(self, read: Iterable[tuple[_T, Any]]) -> Iterator[tuple[_T, Any]]:
        """`read`'s (place, entry) pairs, passed on unchanged, each entry noted."""
        for place, entry in read:
            self.note(entry)
            yield place, entry

    def off(self) -> frozenset[str]:
        """The `uuid`s of the entries noted that are not on the branch Claude Code resumes:
        the chain of parents from the last message noted that is not a subagent's
        (`isSidechain`). Empty when there is nothing to leave out."""
        parents = self._parents
        chain: set[str] = set()
        at: str | None = self._leaf
        while at is not None and at in parents and at not in chain:
            chain.add(at)
            at = parents[at]
        if not chain:
            return frozenset()
        if at is None:  # the root reached: Claude Code shows this chain and nothing else
            return frozenset(parents.keys() - chain)
        children: dict[str, list[str]] = {}
        for uuid, parent in parents.items():
            if parent:
                children.setdefault(parent, []).append(uuid)
        off: set[str] = set()
        todo = [c for member in chain for c in children.get(member, ()) if c not in chain]
        while todo:
            uuid = todo.pop()
            if uuid not in off and uuid not in chain:
                off.add(uuid)
                todo.extend(children.get(uuid, ()))
        return frozenset(off)


def off_branch(entries: Iterable[Any]) -> frozenset[str]:
    """`Branch.off` of `entries`, read through here."""
    branch = Branch()
    for entry in entries:
        branch.note(entry)
    return branch.off()


def is_off(entry: dict[str, Any], off: frozenset[str]) -> bool:
    """Whether `entry` is one of `off` (`off_branch`'s): its `uuid` is one of them."""
    uuid = entry.get("uuid")
    return isinstance(uuid, str) and uuid in off


def _parent(entry: dict[str, Any]) -> str | None:
    """The entry before `entry` on its branch: its `parentUuid`, else (a compaction's boundary)
    its `logicalParentUuid`; None at a root; `_UNLINKED` when it names neither field."""
    if "parentUuid" not in entry:
        return _UNLINKED
    for name in ("parentUuid", "logicalParentUuid"):
        value = entry.get(name)
        if isinstance(value, str) and value:
            return value
    return None
