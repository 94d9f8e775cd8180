"""Lifecycle hooks for Claude Code (and any client that runs a command with JSON on stdin).

- SessionStart: the briefing, printed as `{"hookSpecificOutput": {"hookEventName":
  "SessionStart", "additionalContext": ...}}` — what Claude Code adds to the model's context.
- PreCompact / SessionEnd: the hook input names the session's JSONL transcript; an extractive
  digest of it (decisions stated, errors fixed, files edited) is stored as one low-importance
  `agent_inferred` memory per session: each hook reads on from where the session's last one
  stopped, a bounded part (`transcript_file`), and adds what it finds to the points held.
- `hook install`: merges the three hook entries into a Claude Code settings file
  (`hook_settings`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from octobrain.errors import InvalidInput, json_printable, json_type
from octobrain.json_values import UnreadableJSON, read_json
from octobrain.memory.summary import split_sentences
from octobrain.models import FILE_BYTES, MAX_FILES, Memory
from octobrain.safe_text import check_one_line, printable, shows_something
from octobrain.secrets import find_secrets

__all__ = [
    "Digest",
    "HookInput",
    "digest_transcript",
    "hook_text",
    "parse_hook_input",
    "session_start_output",
]

DIGEST_IMPORTANCE = 0.3
MAX_POINTS = 5
POINT_CHARS = 200
_EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
_DECISION = re.compile(
    r"\b(decided|decide to|decision|we'll use|we will use|going with|settled on|chose|"
    r"instead of|switch(ed)? to|agreed|prefer)\b",
    re.IGNORECASE,
)
# A digest is written with nobody choosing what goes in, so it leaves out every sentence that
# names a credential, not only the shapes `find_secrets` knows ("my sudo password is …").
# ("DB_PASSWORD=…" too: a name's parts are words here, so no `\b`).
_CREDENTIAL = re.compile(
    r"(?<![a-z])(passwords?|passwd|passphrases?|pass ?codes?|secrets?|credentials?|"
    r"api[ _-]?keys?|private[ _-]?keys?|access[ _-]?keys?|webhooks?|bearer|"
    r"auth(?:entication)?[ _-]?tokens?|(?:access|refresh|api|session)[ _-]?tokens?|"
    r"token\s*(?:[:=]|is\b|was\b))(?![a-z])",
    re.IGNORECASE,
)
_FIX = re.compile(
    r"\b(fixed|the fix|fixes|root cause|was caused by|resolved|the bug was|now passes)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class HookInput:
    """The fields of a Claude Code hook's stdin JSON that octobrain uses."""

    event: str
    session_id: str
    transcript_path: str
    cwd: str
    raw: dict[str, Any]

    @property
    def tag(self) -> str:
        """The tag of the session's digest and of its record of how far it was read. A hook
        JSON without a session id (Claude Code always gives one) is known by its transcript,
        `session:file-` and a hash of the file's real path: without one, each hook read the
        transcript from its start and stored a digest of its own."""
        from octobrain.memory.temporal import session_tag

        tag = session_tag(self.session_id)
        if tag or not self.transcript_path:
            return tag
        where = os.fsencode(os.path.realpath(self.transcript_path))
        return session_tag("file-" + hashlib.sha256(where).hexdigest()[:16])


def hook_text(raw: bytes) -> str:
    """A hook's stdin as text: JSON is UTF-8, whatever the process's stdin would decode (a
    byte order mark is skipped); a byte that is not UTF-8 is kept as a path keeps one
    (`surrogateescape`), as a C locale reads it."""
    return raw.decode("utf-8", "surrogateescape").removeprefix("\ufeff")


def parse_hook_input(text: str) -> HookInput:
    """Validate a hook's stdin (a JSON object; every field optional but typed)."""
    try:
        data = read_json(text) if text.strip() else {}
    except UnreadableJSON as exc:
        raise InvalidInput("stdin", f"must be the hook's JSON object ({exc.detail})") from None
    if not isinstance(data, dict):
        raise InvalidInput("stdin", "must be a JSON object")
    values = {}
    for key in ("hook_event_name", "session_id", "transcript_path", "cwd"):
        value = data.get(key, "")
        if not isinstance(value, str):
            raise InvalidInput(f"stdin.{key}", f"must be a string, got {json_type(value)}")
        if "\x00" in value:  # (a path holding one was refused as "directory: …", unnamed)
            raise InvalidInput(f"stdin.{key}", "must not contain NUL characters")
        values[key] = value
    return HookInput(
        values["hook_event_name"],
        values["session_id"],
        values["transcript_path"],
        values["cwd"],
        data,
    )


def session_start_output(briefing_markdown: str) -> str:
    """The SessionStart hook's stdout: JSON whose additionalContext Claude Code injects."""
    payload = {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": briefing_markdown,
        }
    }
    return json_printable(payload)


# ---- transcript digest -----------------------------------------------------------------------


@dataclass
class Digest:
    """What a session's transcript shows, extractively."""

    decisions: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.decisions or self.fixes or self.files)

    def full_for(self, room: int = 1) -> bool:
        """Nothing more would be added to a digest keeping `room` times the usual points."""
        return min(len(self.decisions), len(self.fixes)) >= MAX_POINTS * room and (
            len(self.files) >= MAX_FILES * room
        )

    def merged(self, other: Digest) -> Digest:
        """These points, then `other`'s that are new, as far as a digest keeps them: what a
        later hook read is added to what an earlier one stored, never put in its place."""
        out = Digest(list(self.decisions), list(self.fixes), list(self.files))
        seen = {p.lower() for p in out.decisions + out.fixes}
        for mine, theirs in ((out.decisions, other.decisions), (out.fixes, other.fixes)):
            for point in theirs:
                if point.lower() not in seen and len(mine) < MAX_POINTS:
                    mine.append(point)
                    seen.add(point.lower())
        out.files += [f for f in other.files if f not in out.files][: MAX_FILES - len(out.files)]
        return out

    @classmethod
    def of(cls, memory: Memory) -> Digest | None:
        """The points a stored digest holds (its bulleted decisions and fixes, its files), or
        None when its content is not all in the form a hook writes: someone edited words of
        their own into it, which a hook must not write over (`session_digest`)."""
        out = cls(files=list(memory.related_files))
        sections = {"Decisions:": out.decisions, "Errors fixed:": out.fixes}
        for block in memory.content.removesuffix(" (digest)").split("\n\n"):
            if block.startswith("Files touched: ") and "\n" not in block:
                continue
            head, _, rest = block.partition("\n")
            lines = rest.split("\n")
            section = sections.get(head)
            if section is None or not all(line.startswith("- ") for line in lines):
                return None
            section.extend(line[2:] for line in lines)
        return out

    def text(self) -> str:
        """The digest as the memory's content."""
        parts = []
        for name, points in (("Decisions", self.decisions), ("Errors fixed", self.fixes)):
            if points:
                parts.append(f"{name}:\n" + "\n".join(f"- {p}" for p in points))
        if self.files:
            parts.append("Files touched: " + ", ".join(self.files))
        return "\n\n".join(parts)


def _blocks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if entry.get("type") == "attachment":
        queued = _queued_prompt(entry)
        content = queued.get("prompt") if queued is not None else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


# What Claude Code writes into a conversation that nobody there said: reminders of its own,
# CLAUDE.md included (`<system-reminder>`), a slash command and its output, a shell's. Known by
# the element's name: a pasted `<div>`, `<?php` or JSX is said and kept (a text starting with
# `<` was once dropped whole). An element never closed runs to the end of its text. (Its
# attributes are bounded: 20,000 `<command-name ` without a `>` took 3.2 s, each scanning on.)
_INJECTED = re.compile(
    r"<(system-reminder|command-(?:name|message|args|contents)|"
    r"local-command-(?:stdout|stderr|caveat)|bash-(?:input|stdout|stderr)|"
    r"user-prompt-submit-hook|user-memory-input|task-notification|"
    r"ide_(?:opened_file|selection|diagnostics))\b[^>]{0,200}>.*?(?:</\1\s*>|\Z)",
    re.DOTALL,
)


# What Claude Code writes as the user's words when a turn is stopped (Esc, a tool refused).
_INTERRUPTED = re.compile(r"\[Request interrupted by user(?: for tool use)?\]")


def _queued_prompt(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The attachment of a prompt the user typed while the assistant worked: Claude Code keeps
    it as `{"type": "attachment", "attachment": {"type": "queued_command", "prompt": …}}`,
    never as a user entry. A queued task notification or shell command is no prompt."""
    queued = entry.get("attachment")
    if not isinstance(queued, dict) or queued.get("type") != "queued_command":
        return None
    origin = queued.get("origin")
    kind = origin.get("kind", "human") if isinstance(origin, dict) else "human"
    return queued if queued.get("commandMode", "prompt") == "prompt" and kind == "human" else None


def speaker_of(entry: dict[str, Any]) -> str:
    """Who said a transcript entry: "user" or "assistant" ("" for an entry nobody said)."""
    kind = entry.get("type")
    if kind == "attachment":
        return "user" if _queued_prompt(entry) is not None else ""
    return str(kind) if kind in ("user", "assistant") else ""


def said_in(entry: dict[str, Any]) -> bool:
    """Whether a transcript entry is the conversation's own: the user's (a prompt queued while
    the assistant worked too) or the assistant's, not a subagent's (`isSidechain`), a
    compaction's summary (`isCompactSummary`), a message the client adds (`isMeta`) nor one
    it wrote in the assistant's place (`isApiErrorMessage`, a `<synthetic>` model's "No
    response requested.")."""
    message = entry.get("message")
    synthetic = isinstance(message, dict) and message.get("model") == "<synthetic>"
    return (
        bool(speaker_of(entry))
        and not synthetic
        and not any(
            entry.get(flag)
            for flag in ("isMeta", "isSidechain", "isCompactSummary", "isApiErrorMessage")
        )
    )


def said_texts(entry: dict[str, Any]) -> list[str]:
    """The words of an entry's text blocks, each without the text the client injected; a
    block that shows nothing (only spaces or zero-width characters) or only marks a turn
    interrupted says nothing."""
    texts = []
    for block in _blocks(entry):
        text = block.get("text") if block.get("type") == "text" else None
        if not isinstance(text, str):
            continue
        text = _INJECTED.sub("", text).strip()
        if shows_something(text) and not _INTERRUPTED.fullmatch(text):
            texts.append(text)
    return texts


def transcript_text(entry: dict[str, Any]) -> str:
    """What a user or assistant entry of a transcript says in words: its text blocks, without
    tool calls, tool results and the command and system text the client injects."""
    return "\n\n".join(said_texts(entry))


def _short(sentence: str) -> str:
    sentence = " ".join(sentence.split())
    return sentence if len(sentence) <= POINT_CHARS else sentence[: POINT_CHARS - 1] + "…"


def digest_transcript(entries: Iterable[dict[str, Any]], cwd: str = "", *, room: int = 1) -> Digest:
    """Decisions and fixes the conversation states (sentences matching the vocabulary, first
    occurrences, at most 5 each) and the files edit tools changed (relative to `cwd`, else to
    the entry's own `cwd`, where the session was then; a path that could not be stored as a
    related file is left out); `room` times as many for a part of a transcript, to be merged
    with the points already held. Reading stops once all three are full. Control characters
    are dropped: the digest is printed back in briefings. A sentence or path holding a
    credential is left out: `memorize` would refuse the digest."""
    points, files = MAX_POINTS * room, MAX_FILES * room
    digest = Digest()
    seen: set[str] = set()
    for entry in entries:
        if not said_in(entry):
            continue
        for sentence in (s for text in said_texts(entry) for s in split_sentences(printable(text))):
            key = _short(sentence).lower()  # as a stored point is compared
            if key in seen or len(sentence) < 12 or sentence.startswith("<"):
                continue
            fix = _FIX.search(sentence) is not None
            decision = _DECISION.search(sentence) is not None
            # A sentence holding a credential, or naming one, is left out: one pasted key cost
            # the whole digest (`memorize` refused it), and nobody chose to keep this one.
            if not (fix or decision) or find_secrets(sentence) or _CREDENTIAL.search(sentence):
                continue
            if fix and len(digest.fixes) < points:
                digest.fixes.append(_short(sentence))
                seen.add(key)
            elif decision and len(digest.decisions) < points:
                digest.decisions.append(_short(sentence))
                seen.add(key)
        for block in _blocks(entry):
            name = block.get("name")  # (any JSON value: a list or object is no tool's name)
            if block.get("type") == "tool_use" and isinstance(name, str) and name in _EDIT_TOOLS:
                raw = block.get("input")
                args: dict[str, Any] = raw if isinstance(raw, dict) else {}
                path = args.get("file_path") or args.get("notebook_path")
                if isinstance(path, str) and path:
                    rel = _relative(path, cwd, entry.get("cwd")).strip()
                    fits = len(digest.files) < files and _storable(rel) and not find_secrets(rel)
                    if rel and rel not in digest.files and fits:
                        digest.files.append(rel)
        if digest.full_for(room):
            break
    return digest


def _relative(path: str, *roots: object) -> str:
    """`path` relative to the first of `roots` (the hook's cwd, then the transcript entry's
    own) it is under: a repository moved since the edit (same remote, same scope) named the
    file by its old absolute path, a second entry beside the relative one."""
    for root in roots:
        if isinstance(root, str) and root:
            prefix = root.rstrip("/") + "/"
            if path.startswith(prefix):
                return path[len(prefix) :]
    return path


def _storable(path: str) -> bool:
    """A related file as `memorize` takes one: no control character (NUL included) nor
    bidirectional override (`check_one_line`), valid Unicode, at most `FILE_BYTES` bytes."""
    try:
        check_one_line("path", path)
    except InvalidInput:
        return False
    return path == printable(path) and len(path.encode("utf-8")) <= FILE_BYTES
