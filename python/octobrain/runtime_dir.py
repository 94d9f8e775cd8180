"""Where octobrain keeps its per-user runtime files: the resident service's sockets, locks and
logs (a log carries every session's lines). The service creates and checks the directory
(`cli.service_settings.runtime_dir`); an MCP session never reads in it
(`knowledge.sources.confine`). Standard library only: the service's client imports it."""

from __future__ import annotations

import os


def runtime_dir_path() -> str:
    """`$XDG_RUNTIME_DIR/octobrain` when that directory is this user's, else
    `/tmp/octobrain-<uid>`. Not created here."""
    base = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    try:
        own = bool(base) and os.stat(base).st_uid == os.getuid() and os.path.isdir(base)
    except OSError:
        own = False
    return os.path.join(base, "octobrain") if own else _fallback()


def runtime_dirs() -> list[str]:
    """This process's runtime directory and `/tmp/octobrain-<uid>`, where a process of this
    user started without `XDG_RUNTIME_DIR` (cron, ssh, a container) keeps its service; none on
    a system without uids (no service runs there)."""
    if not hasattr(os, "getuid"):
        return []
    return list(dict.fromkeys((runtime_dir_path(), _fallback())))


def _fallback() -> str:
    return f"/tmp/octobrain-{os.getuid()}"
