"""Scopes: which project a memory belongs to.

A scope is derived from the git remote `origin` of a directory (`host/owner/repo`, whatever the
URL form: scp-like, ssh://, https:// with user or token, git://; user, port, `.git` and slashes
stripped, lowercased), else `local/<parent>/<dir>` of the repository (or directory). The global
scope is `""`. Scopes go into store filters, so they are restricted to a safe character set.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import subprocess
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import idna

from octobrain.errors import InvalidInput, as_json, char_named
from octobrain.files import check_path

log = logging.getLogger(__name__)

__all__ = [
    "GLOBAL_SCOPE",
    "MAX_SCOPE_LENGTH",
    "ProjectScope",
    "derive_scope",
    "find_project_scopes",
    "normalize_remote_url",
    "validate_scope",
]

GLOBAL_SCOPE = ""
MAX_SCOPE_LENGTH = 200
GIT_TIMEOUT_SECS = 5.0
_MAX_SUBDIRS = 500  # bounds the scan of a huge directory (e.g. a home dir)
SCAN_SECONDS = 10.0  # bounds the time that scan takes, git included
_SAFE_PUNCT = "._-~/"
_URL_SCHEMES = {"ssh", "git", "http", "https", "git+ssh", "ssh+git", "ftp", "ftps"}
# scp-like: [user@]host:path, where host has no slash and path does not start with "//"
_SCP = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^@/:\[\]]+|\[[^\]]+\]):(?P<path>(?!//).+)$")


def _clean(text: str) -> str:
    """Lowercase; map characters outside the scope alphabet to '-'; tidy slashes. Composed
    first (NFC): a name macOS stores decomposed (`cafe` + U+0301) is the `café` it shows, not
    `cafe-`, which `cafe` + U+0300 became too (two projects, one scope)."""
    text = unicodedata.normalize("NFC", text)
    out = "".join(c if c.isalnum() or c in _SAFE_PUNCT else "-" for c in text.lower())
    out = re.sub(r"/{2,}", "/", out).strip("/")
    return out


def _remote_form(text: str) -> str:
    """A remote's `host/owner/repo` in one spelling: compatibility forms folded (NFKC: the
    fullwidth `ｇｉｔｈｕｂ.com` an input method types is the github.com git's resolver reads;
    hosts and repository paths are ASCII), the host's final dot dropped (`github.com.` is
    the same name in DNS) and its punycode labels shown as Unicode. Not a local folder's name,
    which is its own."""
    host, slash, path = unicodedata.normalize("NFKC", text).lower().partition("/")
    if slash and host.rstrip(".") and not host.endswith(".."):
        host = host.removesuffix(".")
    if "xn--" in host:
        host = ".".join(_label_shown(label) for label in host.split("."))
    return host + slash + path


def _label_shown(label: str) -> str:
    """A host's label as it shows: an A-label (`xn--bcher-kva`, the punycode DNS carries) as
    its Unicode (`bücher`, what git and curl send as that same name), so the two spellings
    are one project; kept as written when it is no valid A-label, or would not fit a scope."""
    if not label.startswith("xn--"):
        return label
    try:
        shown = idna.decode(label)
    except (idna.IDNAError, UnicodeError):
        return label
    return shown if shown and all(_allowed(c) for c in shown) else label


def _strip_git(path: str) -> str:
    path = path.strip().rstrip("/")
    if path.lower().endswith(".git"):
        path = path[:-4]
    return path.strip("/")


def normalize_remote_url(url: str) -> str | None:
    """`host/owner/repo` for a git remote URL; None for a local path or an unusable URL."""
    text = url.strip()
    if not text:
        return None
    if "://" in text:
        try:
            parts = urlsplit(text)
            host = parts.hostname  # drops user:password@ and :port, lowercases
        except ValueError:
            return None
        if parts.scheme.lower() not in _URL_SCHEMES or not host:
            return None  # file:// and friends: a path on this machine, not a project identity
        path = parts.path
    else:
        m = _SCP.match(text)
        if not m or re.match(r"^[A-Za-z]$", m.group("host")):  # C:\repo is a Windows path
            return None
        host, path = m.group("host").strip("[]"), m.group("path")
    path = _strip_git(path)
    if path.startswith("~"):  # ssh://host/~user/repo names a home dir; keep the user part
        path = path[1:]
    scope = _clean(_remote_form(f"{host}/{path}" if path else host))
    return scope or None


def _git(directory: Path, *args: str, deadline: float | None = None) -> str | None:
    """Run git against `directory` (never chdir); None on any failure, or once `deadline`
    (a `time.monotonic()` instant) has passed."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    timeout = GIT_TIMEOUT_SECS
    if deadline is not None:
        timeout = min(timeout, deadline - time.monotonic())
        if timeout <= 0:
            return None
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def local_scope(path: Path) -> str:
    """`local/<parent>/<dir>`: the scope of a checkout without a remote, read from its path
    alone."""
    names = [_clean(p)[:90] for p in path.parts[1:]]
    names = [n for n in names if n not in ("", ".", "..")][-2:]  # (a folder `...` is a name)
    return "local/" + ("/".join(names) if names else "unknown")


def derive_scope(
    directory: str | os.PathLike[str] | None = None, *, deadline: float | None = None
) -> str:
    """The scope of a working directory (default: the cwd). Never returns the global scope.

    `host/owner/repo` from `origin`; without one, `local/<parent>/<dir>` of the repository root
    (or of the directory itself when it is not in a git repository, or when git has not
    answered by `deadline`). A path that is not a directory (a file, or a directory since
    removed: a hook's `cwd` at the end of a session) is in the repository of the nearest
    directory above it.
    """
    given = os.getcwd() if directory is None else check_path("directory", directory)
    path = Path(given).expanduser().resolve()
    at = path
    while not at.is_dir() and at != at.parent:
        at = at.parent
    url = _git(at, "remote", "get-url", "origin", deadline=deadline)
    scope = normalize_remote_url(url) if url else None
    if scope:
        try:
            return validate_scope(scope)
        except InvalidInput:
            pass  # an exotic remote (too long, dot segments): identify the checkout instead
    top = _git(at, "rev-parse", "--show-toplevel", deadline=deadline)
    return local_scope(Path(top).resolve() if top else path)


@dataclass(frozen=True)
class ProjectScope:
    """A git repository found on disk and its scope."""

    path: Path
    scope: str


def _is_repo(path: Path) -> bool:
    """Whether `path` holds a `.git`: a directory, or a file for worktrees and submodules (a
    FIFO named `.git` held git for its whole timeout, twice)."""
    try:
        mode = (path / ".git").stat().st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode)


def find_project_scopes(directory: str | os.PathLike[str] | None = None) -> list[ProjectScope]:
    """Scopes of `directory` (if it is in a git repository) and of its immediate subdirectories
    that are git repositories, sorted by path; hidden subdirectories are skipped. The scan of
    subdirectories stops after `SCAN_SECONDS` (git is slow on some, e.g. on a network mount):
    the server starts with what was found by then.
    """
    root = Path(directory if directory is not None else os.getcwd()).expanduser().resolve()
    found: list[ProjectScope] = []
    if _is_repo(root) or _git(root, "rev-parse", "--show-toplevel"):
        found.append(ProjectScope(root, derive_scope(root)))
    try:
        children = sorted(p for p in root.iterdir() if not p.name.startswith("."))
    except OSError:
        children = []
    deadline = time.monotonic() + SCAN_SECONDS
    for child in children[:_MAX_SUBDIRS]:
        if time.monotonic() >= deadline:
            log.warning("stopped looking for projects under %s after %g s", root, SCAN_SECONDS)
            break
        if child.is_dir() and _is_repo(child):
            found.append(ProjectScope(child, derive_scope(child, deadline=deadline)))
    return found


def scope_named(scope: str) -> str:
    """A scope as a message names it: `(global)` for the global scope, any other quoted as
    JSON, as a client wrote it."""
    return as_json(scope) if scope else "(global)"


def _allowed(char: str) -> bool:
    return char.isalnum() or char in _SAFE_PUNCT


def _refused(given: str, text: str, *, folded: bool) -> str:
    """The characters of `given` that made `text` (its canonical form) refused, each as the
    user typed it, and what a scope read it as when that differs: `"İ"` lowercases to `i` and
    a combining dot, which was quoted alone, a character never typed."""
    bad = {c for c in text if not _allowed(c)}
    shown: list[str] = []
    for char in sorted(set(unicodedata.normalize("NFC", given))):
        read = unicodedata.normalize("NFC", char.lower())
        if folded:  # (as `_remote_form` reads it)
            read = unicodedata.normalize("NFKC", read).lower()
        if not bad.intersection(read):
            continue
        bad.difference_update(read)
        parts = " + ".join(as_json(c) if _allowed(c) else char_named(c) for c in read)
        shown.append(char_named(char) + ("" if read == char else f", read as {parts}"))
    # (one made only by two typed together, decomposed: named as it came out)
    return "; ".join([*shown, *(char_named(c) for c in sorted(bad))])


def validate_scope(scope: str, field: str = "scope") -> str:
    """Check and normalise a user-supplied scope; return its canonical form.

    `""` is the global scope. A remote URL (`git@github.com:Acme/Billing.git`) is accepted and
    normalised; otherwise the scope is lowercased, outer slashes and a remote's `.git` stripped
    (`github.com/acme/billing.git`), compatibility forms folded and a host's final dot dropped
    (`ｇｉｔｈｕｂ.com./acme/api`; neither from a `local/…` scope), and must consist of
    letters, digits and `._-~/`, with no empty, `.` or `..` segment, at most 200 characters.
    """
    if not isinstance(scope, str):
        raise InvalidInput(field, "must be a string")
    text = scope.strip()
    if ":" in text:
        url_scope = normalize_remote_url(text)
        if url_scope is None:
            raise InvalidInput(field, f"{as_json(scope)} is neither a scope nor a git remote URL")
        text = url_scope
    text = unicodedata.normalize("NFC", text.strip("/").lower())  # (as a derived scope is)
    if not text:
        return GLOBAL_SCOPE
    if not text.startswith("local/"):
        text = _remote_form(text)
    if "/" in text and not text.startswith("local/"):
        # `github.com/acme/api.git` is the remote's spelling: its derived scope never ends in
        # .git, so kept it named an empty project (a local folder's name is kept whole).
        text = _strip_git(text)
    if len(text) > MAX_SCOPE_LENGTH:
        raise InvalidInput(field, f"must be at most {MAX_SCOPE_LENGTH} characters")
    if text == "global":  # (stored as a project called "global", which no project reads)
        raise InvalidInput(
            field,
            '"global" names no project; the global scope is "" (--global on the command line)',
        )
    if not all(_allowed(c) for c in text):
        shown = _refused(scope, text, folded=not text.startswith("local/"))
        raise InvalidInput(field, f"may contain only letters, digits and . _ - ~ / (found {shown})")
    if any(seg in ("", ".", "..") for seg in text.split("/")):
        raise InvalidInput(field, "must not contain empty, '.' or '..' path segments")
    return text


def read_now(stored: str) -> str:
    """The scope a stored spelling is read as now (`validate_scope`): an earlier version kept
    a remote's host as written (`github.com./acme/api`, `ｇｉｔｈｕｂ.com/…`, `xn--bcher-kva.…`),
    since derived as `github.com/acme/api` and `bücher.…`; a spelling no longer accepted is kept
    as it is."""
    try:
        return validate_scope(stored)
    except InvalidInput:
        return stored


def git_head(directory: Path | None = None) -> str:
    """The current commit of `directory`'s repository (default: the cwd), or ""."""
    return _git(directory or Path.cwd(), "rev-parse", "HEAD") or ""
