"""Which project a session works in: the scope lock, and the server instructions.

A session is locked to one scope, first source that answers wins:
(a) the client's `experimental.session` capability (`scope`, `role`, `session_id`, `git`),
(b) the client's MCP roots (the first `file://` root → its derived scope),
(c) the server's working directory, when it is inside a git repository.
A locked session sees its scope plus global memories and nothing else, whatever it passes.
Unlocked, every tool takes `scope`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from octobrain.errors import InvalidInput, as_json, json_type
from octobrain.safe_text import check_label, client_text
from octobrain.scope import (
    ProjectScope,
    derive_scope,
    find_project_scopes,
    local_scope,
    scope_named,
    validate_scope,
)
from octobrain.server.quiet import QuietWarning

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScopeLock:
    """A session's locked scope and where it came from."""

    scope: str
    origin: str  # "session capability" | "client roots" | "server working directory"
    workdir: Path | None = None  # where git metadata (the commit) is read
    role: str = ""
    session_id: str = ""
    roots: tuple[Path, ...] = ()  # every local root the client named (file access)


def lock_from_capability(experimental: dict[str, Any] | None) -> ScopeLock | None:
    """(a) `experimental.session = {scope, role, session_id, git}` as upstream reads it.

    A non-empty `scope` locks the session. `git: true` without a scope only says "derive it
    from git", which the roots / working-directory steps do; a `role` or `session_id`
    without a scope holds for whichever of them locks it (`session_labels`). A malformed
    field is an error rather than a silent fall-back to another project.
    """
    session = _session(experimental)
    if session is None:
        return None
    role, session_id = _label(session, "role"), _label(session, "session_id")
    scope = session.get("scope")
    if scope is None or not scope.strip():
        return None
    return ScopeLock(
        validate_scope(scope, "experimental.session.scope"),
        "session capability",
        role=role,
        session_id=session_id,
    )


def session_labels(experimental: dict[str, Any] | None) -> tuple[str, str]:
    """The `(role, session_id)` of the `experimental.session` capability, "" each it does not
    name: upstream keeps them without a `scope` too (they were dropped, and a session's notes
    kept under the connection's id, not the one its client asked for)."""
    session = _session(experimental)
    if session is None:
        return "", ""
    return _label(session, "role"), _label(session, "session_id")


def _session(experimental: dict[str, Any] | None) -> dict[str, Any] | None:
    """`experimental.session`, its `scope` and `git` checked; None when not sent."""
    session = (experimental or {}).get("session")
    if session is None:
        return None
    if not isinstance(session, dict):  # (a scope sent as the value fell back to the cwd's)
        raise InvalidInput(
            "experimental.session",
            f"must be an object ({{scope, role, session_id, git}}), got {json_type(session)}",
        )
    scope = session.get("scope")
    if scope is not None and not isinstance(scope, str):  # (it fell back to the cwd's project)
        raise InvalidInput(
            "experimental.session.scope", f"must be a string, got {json_type(scope)}"
        )
    git = session.get("git")
    if git is not None and not isinstance(git, bool):  # ("false" was taken as nothing said)
        raise InvalidInput("experimental.session.git", f"must be a boolean, got {json_type(git)}")
    return session


def _label(session: dict[str, Any], key: str) -> str:
    """`experimental.session.<key>`: absent, or a label (`check_label`). Both are stored (a
    memory's role, a note's session) and printed back; a 900 kB id with NUL and ESC in it was
    taken as it came."""
    value = session.get(key)
    if value is None:
        return ""
    return check_label(f"experimental.session.{key}", value)


def root_path(uri: str) -> Path | None:
    """The local directory of a `file://` root URI, else None."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    if not path.startswith("/") or "\x00" in path:  # a NUL made every call of the session fail
        return None
    normal = os.path.normpath(path)  # `/repo/../../etc` is `/etc`
    if not _nameable(normal):  # as a NUL did: every call failed, quoting the whole path
        _roots_refused.warn(
            "client root %s is not read from: longer than the system opens (a path of %d "
            "bytes, a name of %d)",
            client_text(normal),
            *_LIMITS,
        )
        return None
    return Path(normal)


def _nameable(path: str) -> bool:
    """Whether the system can open a path this long, each name in it too (`PATH_MAX`,
    `NAME_MAX`): a longer one fails any look-up with ENAMETOOLONG."""
    most_path, most_name = _LIMITS
    data = path.encode(errors="surrogatepass")
    return len(data) < most_path and all(len(name) <= most_name for name in data.split(b"/"))


def _path_limits() -> tuple[int, int]:
    try:
        return os.pathconf("/", "PC_PATH_MAX"), os.pathconf("/", "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):  # (no pathconf: Windows)
        return 4096, 255


_LIMITS = _path_limits()
# Roots refused, logged a few times a minute, the rest counted: a roots answer of 1 MiB names
# thousands, and a 2026-07-28 client sends its roots with every call.
_roots_refused = QuietWarning(log, 4, 60.0, "", "%d more warnings on client roots were not logged")


# Top-level directories of the system, never a project: a root naming one (or `/`, or the home
# directory or a directory holding it) is not read from, whatever the client declares.
_SYSTEM_DIRS = frozenset(
    [
        "bin",
        "boot",
        "dev",
        "etc",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "proc",
        "root",
        "run",
        "sbin",
        "snap",
        "sys",
        "usr",
        "var",
    ]
)


# Never a project's directory, even as the one a server was started in: the kernel's, the
# boot files', runtime state and the system's configuration (its keys and password hashes).
_NEVER_DIRS = frozenset(["boot", "dev", "etc", "proc", "run", "sys"])


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def readable_root(path: Path, *, workdir: bool = False) -> bool:
    """Whether a client's root may be read from: a directory of a project, not `/`, a system
    directory, the home directory or one holding it (`~/.ssh` is in there), nor a hidden
    directory of the home or anything in one (`~/.ssh`, `~/.aws`, `~/.config/gcloud`: where
    credentials are kept; `knowledge.allow_paths` still opens one on purpose). A directory in
    the home is a project's wherever the home is (root's, `/root`, is a system directory).
    `workdir`: `path` is the directory the server was started in, which its user chose, not a
    client: one inside a system directory (a container's `/usr/src/app`, `/var/www/site`) is a
    project's too, the system directory itself and those of `_NEVER_DIRS` are not."""
    real = _real(path)
    home = _real(Path.home())
    if real == home or real in home.parents:
        return False
    if len(home.parts) > 1 and real.is_relative_to(home):
        return not real.relative_to(home).parts[0].startswith(".")
    if len(real.parts) < 2:
        return False
    top = real.parts[1]
    if top not in _SYSTEM_DIRS:
        return True
    return workdir and len(real.parts) > 2 and top not in _NEVER_DIRS


MAX_ROOTS = 64  # local roots a session reads from: each is resolved again on every file read
# The scope of a root is git's answer (`derive_scope`: one or two `git` runs, 3-10 ms) kept for
# this long: under 2026-07-28 a client sends its roots with every call, and each call ran git
# again. A remote changed meanwhile is seen within the time, as a new session would see it.
ROOT_SCOPE_SECS = 60.0
_ROOT_SCOPES_KEPT = 256
_root_scopes: OrderedDict[Path, tuple[float, str]] = OrderedDict()
_root_scopes_lock = threading.Lock()
_clock = time.monotonic


def _root_scope(path: Path) -> str:
    """`derive_scope(path)`, asked of git at most once per `ROOT_SCOPE_SECS` for a path."""
    now = _clock()
    with _root_scopes_lock:
        kept = _root_scopes.get(path)
        if kept is not None and now - kept[0] < ROOT_SCOPE_SECS:
            _root_scopes.move_to_end(path)
            return kept[1]
    scope = derive_scope(path)
    with _root_scopes_lock:
        _root_scopes[path] = (now, scope)
        _root_scopes.move_to_end(path)
        while len(_root_scopes) > _ROOT_SCOPES_KEPT:
            _root_scopes.popitem(last=False)
    return scope


def lock_from_roots(uris: list[str], *, here: bool = True) -> ScopeLock | None:
    """(b) The first `file://` root decides the scope; every local root that is not the
    whole system or home (`readable_root`) may be read from, the first `MAX_ROOTS` of them
    (a client naming 15,000 made each call of its session cost 1.4 s resolving them).
    `here`: the client is on this machine; else its roots are paths on its own, and the
    scope is read from the first one's path alone (`local_scope`), this machine's disk not
    looked at (git there told a client the remote of any repository it named)."""
    paths = list(islice((p for p in map(root_path, uris) if p is not None), MAX_ROOTS + 1))
    if not paths:
        return None
    if len(paths) > MAX_ROOTS:
        _roots_refused.warn(
            "the client names over %d roots; only the first are read from", MAX_ROOTS
        )
        paths = paths[:MAX_ROOTS]
    if not here:  # (nor its commit read there, nor files: an HTTP session reads none)
        return ScopeLock(local_scope(paths[0]), "client roots")
    readable = tuple(path for path in paths if readable_root(path))
    for refused in set(paths) - set(readable):
        _roots_refused.warn(
            "client root %s is not read from: not a project's directory", client_text(str(refused))
        )
    return ScopeLock(_root_scope(paths[0]), "client roots", workdir=paths[0], roots=readable)


@dataclass(frozen=True)
class Workspace:
    """What the server found in its working directory at start."""

    cwd: Path
    cwd_lock: ScopeLock | None  # (c): the cwd is inside a git repository
    projects: list[ProjectScope]
    http: bool = False  # served over HTTP: clients may be elsewhere, so no local files by default
    remote: bool = False  # served on a non-loopback address: its clients' roots are theirs

    def local_roots(self, lock: ScopeLock | None, allow_paths: tuple[str, ...]) -> tuple[Path, ...]:
        """Where this session's `knowledge` calls may read local files: the client's roots, else
        the working directory (stdio only) when it may be a project's (`readable_root`: a
        desktop client may start its servers in `/` or the home directory), plus
        `knowledge.allow_paths`. Resolved and checked on every call, not once: a root the
        client names may be a directory it writes in, swapped later for a link to `~/.ssh`;
        `knowledge.sources.confine` compares with these paths as they are."""
        base: tuple[Path, ...] = ()
        if not self.http:  # roots the client named replace the cwd, even when none is readable
            by_roots = lock is not None and lock.origin == "client roots"
            if by_roots and lock is not None:
                base = tuple(filter(readable_root, map(_real, lock.roots)))
            elif readable_root(self.cwd, workdir=True):
                base = (_real(self.cwd),)
        return base + tuple(_real(Path(p).expanduser()) for p in allow_paths)

    @classmethod
    def scan(cls, cwd: str | os.PathLike[str] | None = None) -> Workspace:
        """Look at the cwd and its immediate subdirectories for git repositories."""
        root = Path(cwd if cwd is not None else os.getcwd()).resolve()
        projects = find_project_scopes(root)
        lock = None
        if projects and projects[0].path == root:
            lock = ScopeLock(projects[0].scope, "server working directory", workdir=root)
        return cls(root, lock, projects)


def _names_scope(value: object, scope: str) -> bool:
    try:
        return isinstance(value, str) and validate_scope(value) == scope
    except InvalidInput:
        return False


def global_argument(arguments: dict[str, Any], lock: ScopeLock | None, stores: bool) -> None:
    """Bring the two ways a tool that `stores` (it takes `global`) can name the global scope to
    the one this session uses: `global: true` when locked, `scope: ''` when not. A client
    that cannot know beforehand whether its calls are locked (roots sent with each call) is
    shown both, and either works."""
    if not stores:
        return
    scope, flag = arguments.get("scope"), arguments.get("global")
    if flag is True and scope not in (None, ""):
        raise InvalidInput("global", f"true contradicts scope {as_json(scope)}")
    if flag is False and scope == "":
        raise InvalidInput("global", 'false contradicts scope "" (the global scope)')
    if lock is not None and scope == "":
        del arguments["scope"]
        arguments["global"] = True
    elif lock is None and "global" in arguments:
        if not isinstance(flag, bool):
            raise InvalidInput("global", "must be a boolean")
        if flag:
            arguments["scope"] = ""
        del arguments["global"]


def scope_argument(arguments: dict[str, Any], lock: ScopeLock | None) -> tuple[str, Path | None]:
    """The scope a call works in: the lock's, or (unlocked) the `scope` argument. A locked
    session may still pass its own scope (in any spelling `validate_scope` accepts)."""
    if lock is not None:
        if "scope" in arguments and not _names_scope(arguments["scope"], lock.scope):
            raise InvalidInput(
                "scope",
                f"this session is locked to {scope_named(lock.scope)} "
                f"({lock.origin}); "
                "other projects' memories are not reachable from it",
            )
        return lock.scope, lock.workdir
    if "scope" not in arguments:
        raise InvalidInput(
            "scope",
            "required: this session is not locked to a project; pass a project scope "
            "(see the server instructions) or '' for global",
        )
    scope = validate_scope(arguments["scope"])
    if not scope and arguments["scope"] != "":  # "/" or "  ": the global scope by another name
        raise InvalidInput("scope", "must name a project, or be '' for the global scope")
    return scope, None


INSTRUCTIONS = (
    "octobrain is your long-term memory across sessions. Call `remember` at the start of a "
    "task and before every `memorize`; store only durable insights (decisions, preferences, "
    "conventions, non-obvious fixes), never transient state; mark facts the user stated as "
    "source 'user_confirmed'. `forget` needs confirm: true and is for wrong memories, not old "
    "ones. `knowledge` indexes and searches what you read (one file or URL per source); "
    "what you conclude from it goes to `memorize`."
)


def instructions(workspace: Workspace) -> str:
    """Server instructions: the discipline, plus the scopes an unlocked session can use."""
    text = INSTRUCTIONS
    if workspace.cwd_lock is not None:
        # Sent before the client's roots are known, so it must hold whichever project wins.
        return (
            f"{text}\n\nThis session works in one project scope: the client's own project when "
            "it names one (its MCP roots or a session capability), otherwise "
            f"{scope_named(workspace.cwd_lock.scope)} (the server's working directory). Tools "
            "take no `scope`; every `memorize` reply shows the scope it wrote to."
        )
    text += (
        "\n\nWhen a session is locked to a project (the client sent a session capability or "
        "roots), tools need no `scope`, and one given must be that project's. Otherwise pass "
        "`scope` on every call: a project scope, or '' for global memories shared by all "
        "projects."
    )
    if workspace.projects:
        listed = "\n".join(f"- {p.scope}  ({p.path})" for p in workspace.projects)
        text += f"\n\nAvailable project scopes (pass as the 'scope' parameter):\n{listed}"
    return text
