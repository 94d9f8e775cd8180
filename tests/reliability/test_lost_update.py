"""Read-modify-write edits from several processes at once lose nothing.

`update` reads a row, edits it and writes the whole row back. Without the store's write lock
around all three steps, a concurrent edit (another process's update, a consolidation marking
the row consolidated) landing in between is silently overwritten.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain

SCOPE = "github.com/acme/api"
WORKERS = 4
EDITS = 5  # 4 x 5 = 20 files, the per-memory cap

SCRIPT = textwrap.dedent(
    """
    import sys
    from octobrain.memory.brain import Brain
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder

    uri, scope, memory_id, worker, edits = sys.argv[1:6]
    brain = Brain(scope, config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    for i in range(int(edits)):
        brain.update(memory_id, add_files=[f"src/w{worker}/f{i}.py"])
    """
)


def brain_at(path: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=path)


def test_concurrent_updates_from_processes_keep_every_edit(tmp_path: Path) -> None:
    memory, _ = brain_at(tmp_path).memorize("Shared notes", "Edited by every worker at once.")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(tmp_path), SCOPE, memory.id, str(w), str(EDITS)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    files = brain_at(tmp_path).get(memory.id).related_files
    expected = {f"src/w{w}/f{i}.py" for w in range(WORKERS) for i in range(EDITS)}
    assert set(files) == expected, f"lost edits: {sorted(expected - set(files))}"
    assert len(files) == len(expected)
