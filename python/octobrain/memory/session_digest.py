"""A session's digest memory, kept by the PreCompact and SessionEnd hooks (`hooks`): each adds
what its part of the transcript shows to the points the digest holds, then records how far the
transcript was read (`transcript_file.Progress`).

A digest someone edited into words of their own (`memory update -c`) is theirs: a hook never
writes over it. What later hooks find goes into a digest of its own, which `extends` the edited
one and leaves out the points that one already says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from octobrain.memory.gist import DIGEST_TAG
from octobrain.memory.hooks import DIGEST_IMPORTANCE, Digest, HookInput
from octobrain.models import MAX_FILES, Memory

if TYPE_CHECKING:
    from octobrain.memory.brain import Brain
    from octobrain.memory.transcript_parts import Part

__all__ = ["store_digest"]


def store_digest(brain: Brain, hook: HookInput, part: Part) -> Memory | None:
    """Add what `part` of the session's transcript shows to the session's digest memory
    (stored the first time; points it holds are kept, even when the transcript no longer
    shows them), then record how far the transcript was read. The digest, or None when the
    session has none."""
    if part.digest:
        brain.embedder.prepare()  # it may be stored or updated: loads while the store opens
    tag = hook.tag
    # Looked up and written under the write lock: a PreCompact and a SessionEnd of one session
    # fired together each found no digest and stored one, and later hooks refreshed only one.
    with brain.store.write_lock():
        found = _session_digests(brain, tag) if tag else []
        own = [(m, held) for m in found if (held := Digest.of(m)) is not None]
        edited = [m for m in found if Digest.of(m) is None]
        existing, held = own[-1] if own else (None, Digest())
        digest = held.merged(_not_said_in(part.digest, edited))
        memory = existing
        if digest and digest != held:
            memory = _write(brain, tag, existing, digest, after_edit=bool(edited))
            if existing is None and edited:
                brain.relate(memory.id, edited[-1].id, "extends")
        if tag and part.check:  # after the digest: a kill between reads the part again
            _record(brain, tag, hook.transcript_path, part)
    return memory


def _not_said_in(found: Digest, edited: list[Memory]) -> Digest:
    """The points of `found` that no edited digest of the session already says (a transcript
    read again from its start finds them again) nor names as a file."""
    said = " ".join(" ".join(m.content.split()) for m in edited).lower()
    files = {f for m in edited for f in m.related_files}
    return Digest(
        [p for p in found.decisions if p.lower() not in said],
        [p for p in found.fixes if p.lower() not in said],
        [f for f in found.files if f not in files],
    )


def _write(
    brain: Brain, tag: str, existing: Memory | None, digest: Digest, *, after_edit: bool
) -> Memory:
    content = digest.text()[:9_000]
    if existing is not None:
        return brain.update(
            existing.id,
            content=content,
            add_files=[f for f in digest.files if f not in existing.related_files][
                : MAX_FILES - len(existing.related_files)
            ],
        )
    from octobrain.memory.temporal import SESSION_PREFIX, session_tag
    from octobrain.times import utcnow

    sid = "".join(filter(str.isalnum, tag.removeprefix(SESSION_PREFIX)))[:8] or "unknown"
    memory, _ = brain.memorize(
        f"Session digest {utcnow():%Y-%m-%d} ({sid}){', continued' if after_edit else ''}",
        content if len(content) >= 10 else content + " (digest)",
        memory_type="workflow",
        importance=DIGEST_IMPORTANCE,
        # (the Brain tags it with its session; a session known by its transcript, here)
        tags=[DIGEST_TAG] + ([tag] if tag and tag != session_tag(brain.session_id) else []),
        related_files=digest.files,
        source="agent_inferred",
    )
    return memory


def _record(brain: Brain, tag: str, path: str, part: Part) -> None:
    """Where the session's next hook reads on: the end of `part`, unless a hook that ran
    meanwhile read this transcript further."""
    from octobrain.memory.transcript_file import Progress

    now = Progress.load(tag)
    mine = (brain.uri, brain.scope)
    if (
        now is not None
        and (now.uri, now.scope) == mine
        and now.offset > part.end
        and now.holds(path)
    ):
        return
    Progress(brain.uri, brain.scope, part.end, part.check).save(tag)


def _session_digests(brain: Brain, tag: str) -> list[Memory]:
    """The session's digests, oldest first."""
    import numpy as np

    corpus = brain.retriever.corpus
    corpus.refresh()
    if not len(corpus):
        return []
    # The session's rows by the mirror's tag mask, not a loop over every memory.
    rows = np.flatnonzero(corpus.allowed(brain.sight, tags=[tag], include_archived=True))
    found = [corpus.memory(int(pos)) for pos in rows]
    return sorted((m for m in found if DIGEST_TAG in m.tags), key=lambda m: m.created_at)
