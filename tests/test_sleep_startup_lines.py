"""What the background sleep pass says on the command's stderr: a failure once, not again at
every command while it fails the same way (a read-only store failed every command's pass)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from octobrain import Brain, Config, StorageError, get_embedder
from octobrain.memory import sleep_startup

READ_ONLY = "store: cannot write to /srv/team: Read-only file system; nothing was changed"


def test_a_sleep_pass_failing_the_same_way_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    brain = Brain(
        "github.com/acme/api",
        config=Config(),
        embedder=get_embedder("hash:64"),
        uri=tmp_path / "db",
    )
    brain.memorize("Deploy day", "Deploys happen on Tuesday afternoons after standup.")
    reasons = iter([READ_ONLY, READ_ONLY, READ_ONLY, "store: disk on fire", None, READ_ONLY])

    def sleep_consolidate(self: Brain, **_: Any) -> object:
        reason = next(reasons)
        if reason is None:
            return brain_pass(self)
        raise StorageError(reason)

    brain_pass = Brain.sleep_consolidate
    monkeypatch.setattr(Brain, "sleep_consolidate", sleep_consolidate)
    said = []
    for _ in range(6):  # six commands, each a process of its own starting a due pass
        monkeypatch.setattr(sleep_startup, "_started", set())
        for marker in (tmp_path / "m").glob("*.json"):  # (due again at once)
            marker.unlink()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            thread = sleep_startup.start_background_sleep(brain, marker_dir=tmp_path / "m")
            assert thread is not None
            thread.join(timeout=60)
        said.append([r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING])
    line = "sleep pass for 'github.com/acme/api' failed, retried next start: "
    assert said == [
        [line + READ_ONLY],
        [],  # (the same reason: said once)
        [],
        [line + "store: disk on fire"],  # another reason is said
        [],  # a pass that worked
        [line + READ_ONLY],  # failing again after it is news again
    ]
