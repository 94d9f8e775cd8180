"""Lazy sleep: the first CLI command or MCP server start of the day runs a sleep pass for its
scope in the background — no daemon, never blocking or failing the user's call."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from octobrain.config import data_dir
from octobrain.models import utcnow

if TYPE_CHECKING:
    from octobrain.brain import Brain

__all__ = ["sleep_marker", "start_background_sleep"]

log = logging.getLogger(__name__)

_started: set[tuple[str, str]] = set()
_started_lock = threading.Lock()


def sleep_marker(uri: str, scope: str, marker_dir: Path | None = None) -> Path:
    """The marker file recording the last successful pass for one store and scope."""
    key = hashlib.sha256(f"{uri}\0{scope}".encode()).hexdigest()[:20]
    return (marker_dir or data_dir() / "sleep") / f"{key}.json"


def _due(marker: Path, interval_hours: float, now: datetime) -> bool:
    try:
        finished = datetime.fromisoformat(json.loads(marker.read_text())["finished_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return True  # no marker (or a damaged one): never ran successfully
    return now - finished >= timedelta(hours=interval_hours)


def start_background_sleep(
    brain: Brain, *, marker_dir: Path | None = None
) -> threading.Thread | None:
    """Start a sleep pass (consolidation, then archiving) for `brain`'s scope in a background
    thread, if enabled and `interval_hours` have passed since the last successful one.

    Called once at startup by the CLI and the MCP server; later calls in the same process are
    no-ops. It never raises and never blocks: the pass runs under a per-scope cross-process lock
    (another process already on it → skip), on its own store connection, logs failures, and
    writes the marker only after success. Returns the thread (tests join it), or None.
    """
    try:
        cfg = brain.config.consolidation
        key = (brain.uri, brain.scope)
        with _started_lock:
            if not cfg.sleep_enabled or key in _started:
                return None
            _started.add(key)
        marker = sleep_marker(brain.uri, brain.scope, marker_dir)
        if not _due(marker, cfg.interval_hours, utcnow()):
            return None
        thread = threading.Thread(
            target=_lazy_pass, args=(brain, marker), name="octobrain-sleep", daemon=False
        )
        thread.start()
        return thread
    except Exception:
        log.warning("could not start the sleep pass", exc_info=True)
        return None


def _lazy_pass(brain: Brain, marker: Path) -> None:
    from filelock import FileLock, Timeout

    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(marker.with_suffix(".lock")), timeout=0):
            cfg = brain.config.consolidation
            if not _due(marker, cfg.interval_hours, utcnow()):
                return  # another process finished a pass while we waited to start
            # Our own Brain: its own store connection and mirror, nothing shared with callers.
            own = type(brain)(
                brain.scope, config=brain.config, embedder=brain.embedder, uri=brain.uri
            )
            report = own.sleep_consolidate()
            tmp = marker.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(
                json.dumps(
                    {
                        "scope": brain.scope,
                        "store": brain.uri,
                        "finished_at": utcnow().isoformat(),
                        "consolidated": len(report.consolidations),
                        "archived": len(report.archived),
                    }
                )
            )
            os.replace(tmp, marker)  # atomic: a marker is whole or absent
    except Timeout:
        log.info("sleep pass for %r already running in another process", brain.scope)
    except Exception:
        log.warning("sleep pass for %r failed; it will be retried", brain.scope, exc_info=True)
