"""SIGKILL a writer at a random moment and check what it leaves behind.

Shared by the fast CI tests (`test_kills.py`, a few seeds) and the soak (many seeds). Each
scenario starts a child that prints `ready` once its store is open, then one line per
acknowledged write; the parent kills it at a random moment and inspects the store.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.knowledge import Knowledge
from octobrain.memory.brain import Brain
from octobrain.store.failures import ModelMismatch

SCOPE = "github.com/acme/api"

_PRELUDE = """
import sys
from octobrain.memory.brain import Brain
from octobrain.config import Config
from octobrain.embed.factory import get_embedder
uri, model = sys.argv[1], sys.argv[2]
brain = Brain({scope!r}, config=Config(), embedder=get_embedder(model), uri=uri)
brain.store.open_memories_unchecked()
print("ready", flush=True)
"""

CHILDREN = {
    "memorize": """
for i in range(100000):
    m, _ = brain.memorize(f"Killed writer note {{i}}", f"Fact zqk{{i}} recorded by the writer.")
    print(m.id, flush=True)
""",
    "sleep": """
brain.sleep_consolidate()
print("done", flush=True)
""",
    "reindex": """
from octobrain.knowledge import Knowledge
k = Knowledge({scope!r}, config=Config(), embedder=brain.embedder, uri=uri)
k.index(sys.argv[3])
print("done", flush=True)
""",
    "reembed": """
from octobrain.memory.transfer import reembed
reembed(brain)
print("done", flush=True)
""",
}


def brain_at(uri: Path, model: str = "hash:64") -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder(model), uri=uri)


def kill_randomly(
    uri: Path,
    op: str,
    rng: random.Random,
    *,
    model: str = "hash:64",
    window_s: float = 1.0,
    extra: tuple[str, ...] = (),
) -> tuple[list[str], bool]:
    """Run `op` in a child, SIGKILL it at a random moment (after a random number of acks for
    `memorize`). Returns (acknowledged lines, whether the child finished before the kill)."""
    script = textwrap.dedent(_PRELUDE + CHILDREN[op]).format(scope=SCOPE)
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(uri), model, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "ready"
        acks: list[str] = []
        wanted = rng.randint(0, 4) if op == "memorize" else 0
        while len(acks) < wanted:
            acks.append(child.stdout.readline().strip())
        time.sleep(rng.uniform(0, window_s))
        os.kill(child.pid, signal.SIGKILL)
        rest, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    acks += [line for line in rest.split() if line]
    finished = "done" in acks
    return [a for a in acks if a != "done"], finished


def check_memorize(uri: Path, acked: list[str], before: set[str]) -> list[str]:
    """Every acknowledged id present once; no partial row (title without content)."""
    brain = brain_at(uri)
    rows = brain.store.scan("true", columns=["id", "title", "content"])
    ids = [r["id"] for r in rows]
    problems = []
    if len(ids) != len(set(ids)):
        problems.append("duplicate ids")
    missing = [a for a in acked if a not in set(ids)]
    if missing:
        problems.append(f"acknowledged writes lost: {missing}")
    if not before <= set(ids):
        problems.append("earlier rows lost")
    for r in rows:
        if not r["content"] or not r["title"]:
            problems.append(f"half-written row {r['id']}")
    brain.remember("recorded by the writer", record_access=False)  # the index loads
    return problems


def check_reembed(uri: Path, ids: set[str]) -> tuple[str, list[str]]:
    """The store opens with exactly one of the two models and holds every row."""
    problems: list[str] = []
    for model in ("hash:64", "hash:32"):
        try:
            brain = brain_at(uri, model)
            got = {r["id"] for r in brain.store.scan("true", columns=["id"])}
        except ModelMismatch:
            continue
        if got != ids:
            problems.append(f"rows changed under {model}: {len(got)} vs {len(ids)}")
        brain.remember("reembedded fact", record_access=False)
        return model, problems
    return "", ["the store opens with neither model"]


def guide(path: Path, word: str, sections: int = 60) -> Path:
    """A markdown document whose every section mentions `word` (one generation's marker)."""
    body = "\n\n".join(
        f"## Section {i}\n\nThe {word} pipeline step {i} deploys release {i} behind a canary."
        for i in range(sections)
    )
    path.write_text(f"# Guide\n\n{body}\n")
    return path


def knowledge_at(uri: Path) -> Knowledge:
    return Knowledge(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=uri)


def check_reindex(uri: Path, sections: int) -> tuple[str, list[str]]:
    """Exactly one whole generation (old or new) of the document is visible."""
    k = knowledge_at(uri)
    old = len(k.match("bluegreen", max_matches=1000).hits)
    new = len(k.match("rainbow", max_matches=1000).hits)
    if (old, new) == (sections, 0):
        return "old", []
    if (old, new) == (0, sections):
        return "new", []
    return "", [f"mixed generations visible: {old} old lines, {new} new lines"]
