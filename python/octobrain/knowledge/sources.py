"""Sources: what a `source` argument names, and reading its bytes (local file or URL).

A source is one local file (absolute, relative, `~/…`, `file://…`), one http(s) URL, or a
session note (`stored://<key>`). Directories, missing files and files over the size cap are
clear errors naming `source`. URL fetching lives in `fetch.py`.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from octobrain.errors import InvalidInput, as_json, char_named
from octobrain.files import TooLarge, named_by, read_regular
from octobrain.models import KEY_BYTES, SOURCE_BYTES
from octobrain.runtime_dir import runtime_dirs
from octobrain.safe_text import is_unicode, shows_something

STORED_PREFIX = "stored://"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class SourceKind(str, Enum):
    """Where a source's bytes come from."""

    FILE = "file"
    URL = "url"
    STORED = "stored"


@dataclass(frozen=True)
class SourceRef:
    """A normalised source: `uri` is what rows store and what results print."""

    uri: str
    kind: SourceKind
    path: Path | None = None  # FILE only: the resolved absolute path

    @property
    def key(self) -> str:
        """The note key of a `stored://` source."""
        return self.uri[len(STORED_PREFIX) :] if self.kind is SourceKind.STORED else ""


@dataclass(frozen=True)
class Fetched:
    """Raw bytes of a source and what we know of their type."""

    ref: SourceRef
    data: bytes
    content_type: str = ""  # the HTTP Content-Type (URLs only), lowercased, without parameters
    charset: str = ""  # the charset the HTTP Content-Type names, if any (URLs only)
    mtime: float = 0.0  # local files only
    stat: os.stat_result | None = None  # local files only: the status of the file read


def parse_source(source: str, *, cwd: Path | None = None) -> SourceRef:
    """Normalise a source argument; the same document always gets the same `uri`.

    Local paths become `file://<absolute path>` (symlinks resolved); URLs keep their query and
    lose a trailing slash and their fragment. Existence is checked when reading, not here.
    """
    if not isinstance(source, str) or not source.strip():
        raise InvalidInput("source", "must be a file path, a file:// URI or an http(s) URL")
    text = source.strip()
    if not is_unicode(text):
        raise InvalidInput(
            "source", "must be valid Unicode (a file name that is not UTF-8: rename the file)"
        )
    if len(text.encode()) > SOURCE_BYTES:
        raise InvalidInput("source", f"must be at most {SOURCE_BYTES} bytes")
    lower = text.lower()
    if lower.startswith(STORED_PREFIX):
        key = text[len(STORED_PREFIX) :]
        return SourceRef(STORED_PREFIX + check_key(key), SourceKind.STORED)
    if lower.startswith(("http://", "https://")):
        return SourceRef(_normalise_url(text), SourceKind.URL)
    scheme_match = _SCHEME.match(text)
    if scheme_match and not lower.startswith("file://"):
        scheme = scheme_match.group(1)
        raise InvalidInput(
            "source",
            f"unsupported scheme {as_json(scheme)}: use a file path, file:// or http(s)://",
        )
    if lower.startswith("file:"):  # file:///abs, file://localhost/abs and file:/abs (RFC 8089)
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise InvalidInput("source", "a file:// URI must name a local path (file:///abs/path)")
        if not parts.path.startswith("/"):  # (file:notes.md was read as ./file:notes.md)
            raise InvalidInput(
                "source",
                f"a file: URI names an absolute path (file:///abs/path), got {as_json(text)}; "
                "give a relative path without file:",
            )
        spelled = unquote(parts.path)
    else:
        spelled = text
    raw = Path(spelled).expanduser()
    if "\x00" in str(raw):  # no file has one in its name (also when spelled %00)
        raise InvalidInput("source", "a file path must not contain NUL characters")
    base = cwd if cwd is not None else Path.cwd()
    path = Path(os.path.realpath(raw if raw.is_absolute() else base / raw))
    if spelled.endswith(("/", "/.")) and path.exists() and not path.is_dir():
        # (Path drops the slash, and `notes.md/` was read as notes.md; open() refuses it)
        raise InvalidInput(
            "source", f"{text} is not a folder ({raw.name} is a file): give it without the final /"
        )
    return SourceRef(path.as_uri(), SourceKind.FILE, path)


IS_A_DIRECTORY = "is a directory"
ONE_FILE = "give one file (index each file separately)"  # what to give instead of a directory


def refuse_directory(source: str, instead: str = ONE_FILE, cwd: Path | None = None) -> None:
    """Refuse `source` when it names a local directory, before anything is read or embedded
    (`InvalidInput`: "source: <source> is a directory; <instead>"), as reading it would: a
    command given several sources refuses a folder among them before it indexes any. A source
    that does not parse is left to the reading of it, which says why."""
    try:
        ref = parse_source(source, cwd=cwd)
    except InvalidInput:
        return
    if ref.path is not None and ref.path.is_dir():
        raise InvalidInput("source", f"{source} {IS_A_DIRECTORY}; {instead}")


def confine(ref: SourceRef, roots: tuple[Path, ...] | None, store: Path | None = None) -> SourceRef:
    """Refuse a local file outside `roots` (None: no confinement, as for the CLI), and one of
    octobrain's own: its data directory, config file, `store` (a local store's directory) and
    runtime directory (the resident service's logs, of every session).

    `ref.path` is already resolved (symlinks and `..`), so a link inside a root that points
    outside it is outside; `roots` come resolved too (`Workspace.local_roots`, on each call),
    and are not resolved again here: a root swapped for a link in between is not followed.
    """
    if roots is None or ref.kind is not SourceKind.FILE:
        return ref
    assert ref.path is not None
    for private in _own_files(store):
        if ref.path == private or ref.path.is_relative_to(private):
            raise InvalidInput(
                "source",
                f"{ref.path} is octobrain's own (its data directory, config file, store or "
                "runtime directory, which may hold tokens, credentials, every project's "
                "memories and other sessions' logs): an MCP session never reads it",
            )
    for root in roots:
        if ref.path.is_relative_to(root):
            return ref
    where = ", ".join(str(r) for r in roots) if roots else "no local directory"
    raise InvalidInput(
        "source",
        f"{ref.path} is outside the directories this MCP session may read ({where}); "
        "add it to knowledge.allow_paths in the config to allow it",
    )


def refuse_own(fetched: Fetched) -> None:
    """Refuse, for a confined session, a file read that is octobrain's config file under
    another name: a hard link to it in the project, which `confine`, comparing paths, let
    through. Compared by the opened file's identity (device, inode), not by a path.

    Any other hard link is read as the file it is: once made, a link is that file, as much
    the project's as a copy would be, and making one takes a process that can reach the
    file already (pnpm's `node_modules` are hard links into its store, outside the project)."""
    from octobrain.config.loader import config_path

    status = fetched.stat
    try:
        own = os.stat(config_path())
    except OSError:
        return
    if status is not None and (own.st_dev, own.st_ino) == (status.st_dev, status.st_ino):
        raise InvalidInput(
            "source",
            f"{fetched.ref.path} is octobrain's config file under another name (a hard link; "
            "it may hold tokens and credentials): an MCP session never reads it",
        )


def _own_files(store: Path | None = None) -> list[Path]:
    """Octobrain's data directory and config file, `store` (which `storage.uri` may put
    elsewhere, a team's under `/srv`) and its runtime directories (`/tmp/octobrain-<uid>`
    without `XDG_RUNTIME_DIR`), resolved: a client's roots may hold them (a root of `/srv`,
    `/tmp` or of the data directory itself), a session reads none of them."""
    from octobrain.config.loader import config_path, data_dir

    own = [data_dir(), config_path(), *([store] if store is not None else [])]
    return [Path(os.path.realpath(path)) for path in [*own, *map(Path, runtime_dirs())]]


def _normalise_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # a bracketed host that is no IPv6 address ("http://[zz]/")
        raise InvalidInput("source", f"{as_json(url)} is not a valid URL ({exc})") from None
    if not parts.hostname:
        raise InvalidInput("source", f"URL {as_json(url)} has no host")
    if ":" not in parts.hostname and (bad := not_in_a_host(parts.hostname)):
        # (sent on, percent-encoded, to the name servers: "no such host "exa%20mple.com"")
        raise InvalidInput(
            "source",
            f"URL {as_json(url)} has no valid host: a host name holds letters, digits, "
            f'"-", "." and "_" only (found {", ".join(map(char_named, bad))})',
        )
    path = parts.path.rstrip("/")
    netloc = parts.netloc.lower()
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{netloc}{path}{query}"


def not_in_a_host(host: str) -> list[str]:
    """The characters of a host name (not an IPv6 literal) that no host name holds: ASCII
    other than letters, digits and `-._`, and spaces or invisible characters in any script
    (other letters and marks are an IDN's, left to its encoding when fetched)."""
    return sorted(
        {
            ch
            for ch in host
            if (ch.isascii() and not (ch.isalnum() or ch in "-._"))
            or ch.isspace()
            or not ch.isprintable()
        }
    )


def check_key(key: str) -> str:
    """A note key: 1–200 bytes, no whitespace or invisible characters, one character that
    shows (not only combining marks), in NFC: an accent composed or not ("plán" typed, or
    from a macOS file name) is one key, as a scope is."""
    if not isinstance(key, str) or not key:
        raise InvalidInput("key", "must be a non-empty string")
    if not is_unicode(key):
        raise InvalidInput("key", "must be valid Unicode")
    key = unicodedata.normalize("NFC", key)  # (then measured: a few characters grow in NFC)
    if len(key.encode()) > KEY_BYTES:
        raise InvalidInput("key", f"must be at most {KEY_BYTES} bytes")
    bad = sorted({ch for ch in key if ch.isspace() or not ch.isprintable()})
    if bad:  # (none is changed by NFC: each is named as given)
        raise InvalidInput(
            "key",
            "must not contain whitespace or invisible characters (control, format, private-use "
            f"or unassigned; found {', '.join(map(char_named, bad))})",
        )
    if not shows_something(key):  # ("\u0301" was a key: a note named by no character)
        found = ", ".join(map(char_named, sorted(set(key))))
        raise InvalidInput(
            "key",
            f"must hold a visible character, not only combining marks or fillers (found {found})",
        )
    return key


def read_file(ref: SourceRef, max_bytes: int) -> Fetched:
    """Read a local file, refusing directories, missing files, anything not a regular file
    (checked on the opened file: a FIFO is not waited on) and files over `max_bytes`.

    The file read is the file at `ref.path`, the resolved path `confine` checked: a symlink
    put in its place, or in place of a directory above it, after that check is refused."""
    assert ref.path is not None
    path = ref.path
    with named_by("source", path, f"{IS_A_DIRECTORY}; {ONE_FILE}"):
        try:
            data, st = read_regular(path, max_bytes, resolved=True)
        except TooLarge as exc:
            size = f"is {exc.size} bytes, over" if exc.size is not None else "is over"  # or grew
            raise InvalidInput(
                "source", f"{path} {size} the {max_bytes}-byte cap (knowledge.max_source_bytes)"
            ) from None
    return Fetched(ref, data, mtime=st.st_mtime, stat=st)


def file_version(ref: SourceRef) -> tuple[float, int] | None:
    """The modification time and size of a local source, or None when it cannot be read. The
    size too: a write landing in the clock tick of the one before leaves the time as it was
    (a file appended to as it was indexed read as fresh, the index holding part of it)."""
    if ref.path is None:
        return None
    try:
        status = ref.path.stat()
    except OSError:
        return None
    return status.st_mtime, status.st_size


def indexed_version(row: Mapping[str, Any]) -> tuple[float, int]:
    """What `file_version` was for the bytes a source row was made from."""
    return float(row["mtime"]), int(row["size_bytes"])
