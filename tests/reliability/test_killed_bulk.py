"""Bulk commands killed part-way. Any command killed while it replaces one of its small
records: the file it was writing is removed by the next write of that record."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from tests.reliability.test_damage import run_cli

SCOPE = "github.com/acme/api"

# `octobrain ARGS…`, killed by SIGKILL at the first call of MODULE:ATTRIBUTE whose arguments'
# text holds WORD: `python -c CHILD MODULE:ATTRIBUTE WORD ARGS…`.
CHILD = textwrap.dedent(
    """
    import importlib, os, signal, sys
    from octobrain.cli.launch import main

    where, word, *args = sys.argv[1:]
    module, name = where.split(":")
    owner = importlib.import_module(module)
    *path, name = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    real = getattr(owner, name)

    def killed(*a, **k):
        if word in repr((a, k)):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **k)

    setattr(owner, name, killed)
    main(args)
    """
)


def killed_at(env: dict[str, str], where: str, word: str, *args: str) -> None:
    """Run `octobrain ARGS` killed at the first call of `where` holding `word` (`CHILD`)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, where, word, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def brain_at(store: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=store)


def test_a_record_write_killed_before_its_move_leaves_nothing_once_written_again(
    env: dict[str, str],
) -> None:
    # `.manifest.json.<pid>.tmp` (and the lock holders', the sleep records') stayed for good.
    data = Path(env["OCTOBRAIN_DATA_DIR"])
    brain = brain_at(data / "db")
    brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    version = brain.history(1)[0].version
    brain.memorize("Key storage", "Signing keys live in the vault.")
    # (just before the restore's mark, beside the store's manifest, is moved in place)
    killed_at(env, "os:replace", "manifest.json'", "memory", "restore", str(version), "--yes")
    (left,) = data.rglob("*.tmp")
    assert re.fullmatch(r"\.manifest\.json\.\d+\.tmp", left.name), left

    rc, _, err = run_cli(env, "memory", "restore", str(version), "--yes")
    assert rc == 0, err
    assert list(data.rglob("*.tmp")) == []
    assert [m.title for m in brain_at(data / "db").recent(10)] == ["Auth uses JWT"]
