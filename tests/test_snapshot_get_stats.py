"""`memory get`, `recent` and `stats` in a new process are answered from a current snapshot without
importing LanceDB (nor asyncio, the loop its calls run on), byte for byte as the store answers
them (read with the snapshot off), and from the store whenever the snapshot is not current."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import pytest

from octobrain.config import Config, SearchConfig
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.models import Memory, MemoryType, Source, State
from octobrain.store.schema import DAMAGED_TITLE
from octobrain.times import utcnow
from tests.server_support import server_env

SCOPE = "github.com/acme/api"
SHARED = "abcdef12"  # the first 8 hex digits of two memories' ids
# Runs the CLI in this process and writes in the file $IMPORTED which of LanceDB and the event
# loop its calls run on (asyncio: ~13 ms of a new process) it imported.
_RUN = (
    "import os, sys\n"
    "from octobrain.cli.main import main\n"
    "try:\n    main(sys.argv[1:])\n"
    "finally:\n"
    "    heavy = [m for m in ('lancedb', 'asyncio') if m in sys.modules]\n"
    "    open(os.environ['IMPORTED'], 'w').write(' '.join(heavy))\n"
)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text("[search]\nsnapshot_min_rows = 1\n")
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(data))  # (where this process's snapshots go)
    return server_env(
        data,
        OCTOBRAIN_SERVICE_ENABLED="0",
        OCTOBRAIN_CONSOLIDATION_SLEEP_ENABLED="false",
        IMPORTED=str(tmp_path / "imported"),
    )


def _brain(env: dict[str, str], scope: str = SCOPE) -> Brain:
    """A Brain as a new process opens the CLI's store (nothing connected yet)."""
    config = Config(search=SearchConfig(snapshot_min_rows=1))
    uri = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    return Brain(scope, config=config, embedder=get_embedder("hash:64"), uri=uri)


def _snapshot(env: dict[str, str]) -> None:
    """A process catches up with the store and leaves its snapshot (or tail) current."""
    corpus = _brain(env).retriever.corpus
    corpus.refresh()
    corpus.wait_for_snapshot()


Answer = tuple[int, str, str]  # exit code, stdout, stderr


def _run(env: dict[str, str], *args: str, snapshot: bool = True) -> tuple[Answer, list[str]]:
    """What `octobrain memory --scope SCOPE ARGS` prints (exit code, stdout, stderr), and
    which of LanceDB and asyncio it imported; with `snapshot` off, as the store answers it."""
    run_env = {**env} if snapshot else {**env, "OCTOBRAIN_SEARCH_SNAPSHOT_MIN_ROWS": "0"}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, "memory", "--scope", SCOPE, *args],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    imported = Path(env["IMPORTED"]).read_text().split()
    return (done.returncode, done.stdout, done.stderr), imported


def _same_as_the_store(env: dict[str, str], *args: str) -> Answer:
    """`args`' answer, from the snapshot without LanceDB, asserted equal to the store's."""
    served, imported = _run(env, *args)
    assert not imported, f"{args}: {imported} imported"
    assert served == _run(env, *args, snapshot=False)[0], args
    return served


def _memory(i: int, **fields: Any) -> Memory:
    fields.setdefault("scope", SCOPE)
    return Memory(title=f"Note {i}", content=f"The service uses setting zq{i}.", **fields)


def _store(env: dict[str, str]) -> dict[str, str]:
    """A store of every case (ids by name), its snapshot current: memories of this scope, of
    the global one and of another project, archived, forgotten and damaged ones, two ids
    sharing their first 8 digits, and types whose counts tie (a decision read first)."""
    brain = _brain(env)
    memories = {
        "first": _memory(0, memory_type=MemoryType.DECISION),
        "twin1": _memory(1, id=f"{SHARED}-1111-4111-8111-111111111111"),
        "twin2": _memory(2, id=f"{SHARED}-2222-4222-8222-222222222222"),
        "global": _memory(3, scope="", source=Source.USER_CONFIRMED),
        "archived": _memory(4, state=State.ARCHIVED, memory_type=MemoryType.DECISION),
        "other": _memory(5, scope="github.com/acme/web"),
        "forgotten": _memory(6),
        "damaged": _memory(7, memory_type=MemoryType.BUG_FIX),
        "fix": _memory(8, memory_type=MemoryType.BUG_FIX),
        "fix2": _memory(9, memory_type=MemoryType.BUG_FIX),
    }
    brain.store.add(
        list(memories.values()),
        brain.embedder.embed_documents([m.content for m in memories.values()]),
    )
    brain.forget([memories["forgotten"].id], confirm=True)
    # A row that no longer matches its checksum (as a bit flipped on disk reads back).
    table = lancedb.connect(str(brain.store.location.path)).open_table("memories")
    table.update(where=f"id = '{memories['damaged'].id}'", values={"title": "Note 7, garbled"})
    _snapshot(env)
    return {name: m.id for name, m in memories.items()}


def test_get_recent_and_stats_are_served_by_the_snapshot_as_the_store_answers_them(
    env: dict[str, str],
) -> None:
    ids = _store(env)
    answers = {
        args: _same_as_the_store(env, *args)
        for args in [
            ("stats",),
            ("stats", "--format", "json"),
            ("get", ids["first"]),
            ("get", ids["first"][:13], "--format", "json"),  # a prefix, hyphen kept
            ("get", ids["global"].replace("-", "")[:10]),
            ("get", ids["archived"], "--format", "json"),
            ("get", ids["other"]),  # another project's: not visible
            ("get", ids["forgotten"]),
            ("get", ids["damaged"]),
            ("get", ids["damaged"][:8]),
            ("get", SHARED),  # ambiguous
            ("get", f"{SHARED}-1"),
            ("get", "0123456789"),  # no such prefix
            ("get", "abc"),  # too short: refused before any read
            ("recent", "--format", "json"),  # the damaged one among them: named, not shown
            ("recent", "-l", "3"),
            ("recent", "-m", "decision", "--format", "json"),
            ("recent", "-m", "goal"),
        ]
    }
    done, out, err = answers["stats", "--format", "json"]
    counted = json.loads(out)
    assert counted["total"] == 8
    # Tied counts by name: the store reads a decision first, and printed "decision 2, bug_fix 2".
    # The damaged memory is counted as damaged, not as the bug fix it reads as, and said.
    assert list(counted["by_type"].items()) == [
        ("code", 3),
        ("bug_fix", 2),
        ("decision", 2),
        (DAMAGED_TITLE, 1),
    ]
    assert counted["damaged"] == 1 and counted["damaged_ids"] == [ids["damaged"]]
    assert done == 1 and ids["damaged"] in err and "octobrain doctor" in err
    assert "by_type: code 3, bug_fix 2, decision 2" in answers["stats",][1]
    assert "is ambiguous, 2 memories start with it" in answers["get", SHARED][2]
    assert "no longer matches the checksum" in answers["get", ids["damaged"]][2]
    assert "garbled" not in str(answers["get", ids["damaged"][:8]])
    assert "no longer matches the checksum" in answers["recent", "--format", "json"][2]
    [decision] = json.loads(answers["recent", "-m", "decision", "--format", "json"][1])
    assert decision["id"] == ids["first"]  # (not the archived one)
    forgotten = answers["get", ids["forgotten"]]
    assert forgotten[0] != 0 and f"no memory {ids['forgotten']} is visible" in forgotten[2]


def test_tied_counts_come_by_name_after_rows_moved(env: dict[str, str]) -> None:
    # An access commit rewrites its rows at the end of the table; a mirror that caught up
    # with it keeps them where they were: the two read the rows in other orders, and the
    # counts come in one, ties by name.
    ids = _store(env)
    brain = _brain(env)
    brain.count_access([ids["first"], ids["archived"]], utcnow() - timedelta(hours=1))
    brain.flush()  # committed: both decisions now after both bug fixes
    _snapshot(env)  # (the next process replays the tail this one leaves)
    stats = _same_as_the_store(env, "stats")[1]
    assert "by_type: code 3, bug_fix 2, decision 2" in stats, stats
    shown = _same_as_the_store(env, "get", ids["first"], "--format", "json")
    assert json.loads(shown[1])["access_count"] == 1


def test_a_write_since_the_snapshot_is_read_from_the_store(env: dict[str, str]) -> None:
    ids = _store(env)
    added, _ = _brain(env).memorize("Fresh note", "The cache uses setting zqnew.")
    for args in (("get", added.id[:8]), ("get", ids["first"]), ("recent",), ("stats",)):
        served, imported = _run(env, *args)
        assert "lancedb" in imported, args  # (a snapshot not current is not read)
        assert served == _run(env, *args, snapshot=False)[0], args
    assert "Fresh note" in _run(env, "get", added.id[:8])[0][1]


def test_an_access_kept_by_remember_shows_in_get_as_the_store_commits_it(
    env: dict[str, str],
) -> None:
    ids = _store(env)
    done = subprocess.run(
        [sys.executable, "-m", "octobrain", "memory", "--scope", SCOPE, "remember", "zq0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "Note 0" in done.stdout
    served = _same_as_the_store(env, "get", ids["first"], "--format", "json")
    assert json.loads(served[1])["access_count"] == 1


def test_recent_cut_through_memories_made_at_one_moment_is_the_store_s(
    env: dict[str, str],
) -> None:
    # `recent` takes and sorts only the rows as new as its `limit`-th newest: the ties on that
    # moment must all be there for the ids to order them as the store's sort does.
    brain = _brain(env)
    moment = utcnow() - timedelta(days=1)
    tied = [_memory(i, created_at=moment) for i in range(6)]
    older = [_memory(10 + i, created_at=moment - timedelta(hours=i + 1)) for i in range(4)]
    newest = _memory(20)
    made = [*older, *tied, newest]
    brain.store.add(made, brain.embedder.embed_documents([m.content for m in made]))
    _snapshot(env)
    listed = _same_as_the_store(env, "recent", "-l", "4", "--format", "json")[1]
    expected = [newest.id, *sorted((m.id for m in tied), reverse=True)[:3]]
    assert [m["id"] for m in json.loads(listed)] == expected
    assert (
        len(json.loads(_same_as_the_store(env, "recent", "-l", "50", "--format", "json")[1])) == 11
    )


def test_a_damaged_block_of_the_rows_is_named_and_only_the_rows_in_it_are_refused(
    env: dict[str, str],
) -> None:
    # Only the blocks of `rows.arrow` a read takes are checked: a memory whose bytes lie in
    # sound blocks is served from the snapshot while another block is damaged; reading a
    # memory in the damaged block names it, and the answer is the store's.
    brain = _brain(env)
    made = [
        Memory(title=f"Note {i}", content=f"zqmark{i:03d} " + "x" * 3000, scope=SCOPE)
        for i in range(80)
    ]
    brain.store.add(made, brain.embedder.embed_documents([m.content for m in made]))
    _snapshot(env)
    rows = next(Path(env["OCTOBRAIN_DATA_DIR"]).glob("cache/snapshots/*/v*/rows.arrow"))
    data = bytearray(rows.read_bytes())
    at = {i: data.index(f"zqmark{i:03d}".encode()) for i in (0, 40)}
    damaged_block = at[40] // (1 << 16)
    assert len(data) > 3 << 16 and at[0] // (1 << 16) != damaged_block
    data[at[40] + 100] ^= 0xFF
    rows.write_bytes(bytes(data))
    sound = _same_as_the_store(env, "get", made[0].id)  # (from the snapshot: no LanceDB)
    assert "zqmark000" in sound[1]
    (done, out, err), imported = _run(env, "get", made[40].id)
    assert "lancedb" in imported
    assert (done, out) == _run(env, "get", made[40].id, snapshot=False)[0][:2]
    assert "x" * 200 in out and "zqmark040" in out  # the store's content, not the flipped one
    assert f"rows.arrow fails its checksum at block {damaged_block}" in err


def test_stats_names_a_damaged_link_from_the_snapshot_as_from_the_store(
    env: dict[str, str],
) -> None:
    # `stats` checked the memories alone: a link that no longer matched its checksum, which
    # `remember`, `export` and `doctor` name, was counted as sound, exit 0, nothing said.
    brain = _brain(env)
    made = [_memory(i) for i in range(2)]
    brain.store.add(made, brain.embedder.embed_documents([m.content for m in made]))
    edge = brain.relate(made[0].id, made[1].id, description="Zero rests on one")
    # A row that no longer matches its checksum (as a bit flipped on disk reads back).
    table = lancedb.connect(str(brain.store.location.path)).open_table("relationships")
    table.update(where=f"id = '{edge.id}'", values={"description": "Zero rests on oqe"})
    _snapshot(env)
    done, out, err = _same_as_the_store(env, "stats", "--format", "json")
    counted = json.loads(out)
    assert counted["damaged"] == 0 and counted["total"] == 2, counted
    assert counted["damaged_links"] == 1 and counted["damaged_link_ids"] == [edge.id], counted
    assert done == 1 and f"table 'relationships' is damaged: link {edge.id} no longer" in err
    assert "octobrain doctor" in err
    assert "damaged_links: 1" in _same_as_the_store(env, "stats")[1]


def _answer(read: Callable[[], object]) -> object:
    """What `read` returns, or the error it raises (a damaged row: named as the store names it;
    the CLI's exit code and line follow from its type and text)."""
    try:
        return read()
    except Exception as exc:
        return type(exc).__name__, str(exc)


def _reads_of_the_store(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The LanceDB reads `get`, `recent` and `stats` make, by name, from now on."""
    from octobrain.store import MemoryStore

    reads: list[str] = []
    for name in ("scan", "scan_arrow", "ids_with_prefix", "damaged_links"):
        real = getattr(MemoryStore, name)

        def counted(
            self: MemoryStore, *a: Any, _name: str = name, _real: Any = real, **k: Any
        ) -> Any:
            reads.append(_name)
            return _real(self, *a, **k)

        monkeypatch.setattr(MemoryStore, name, counted)
    return reads


def _warm(env: dict[str, str], scope: str = SCOPE) -> Brain:
    """A Brain as the resident service loads it (`service_daemon`): the mirror built and
    LanceDB open (a current snapshot opens without it; the service opens it after)."""
    brain = _brain(env, scope)
    brain.warm_up()
    brain.store.open()  # (as the service's load opens it)
    brain.remember("warm up", record_access=False)
    assert brain.store.connected
    return brain


def _the_store(warm: Brain) -> Brain:
    """A Brain of `warm`'s scope and store that reads the store (no snapshot)."""
    return Brain(
        warm.scope,
        config=Config(search=SearchConfig(snapshot_min_rows=0)),
        embedder=warm.embedder,
        uri=warm.store.location.path,
    )


def test_recent_in_a_process_holding_the_mirror_lists_it_as_the_store_without_a_scan(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The resident service holds the mirror and has LanceDB open: its `recent` scanned the
    # store (38 ms at 10,000 memories) for rows the mirror held. Now listed from the mirror,
    # caught up first: the same memories in the same order, ties on a moment by id, the same
    # refusal of a damaged row, and a write by another process seen.
    from octobrain.memory.render import memory_to_dict

    ids = _store(env)
    brain, moment = _brain(env), utcnow() - timedelta(days=1)
    tied = [_memory(30 + i, created_at=moment, memory_type=MemoryType.DECISION) for i in range(4)]
    brain.store.add(tied, brain.embedder.embed_documents([m.content for m in tied]))
    warm = _warm(env)
    scans = _reads_of_the_store(monkeypatch)

    def listed(b: Brain, *args: Any) -> object:
        return _answer(lambda: [memory_to_dict(m) for m in b.recent(*args)])

    cases = [(20,), (3,), (3, "decision"), (5, "goal"), (10_000,)]
    from_mirror = [listed(warm, *case) for case in cases]
    assert not scans
    assert from_mirror == [listed(_the_store(warm), *case) for case in cases]
    assert from_mirror[0][0] == "RowDamaged" and ids["damaged"] in from_mirror[0][1]
    newest = [ids["first"], *sorted((m.id for m in tied), reverse=True)[:2]]
    assert [m["id"] for m in from_mirror[2]] == newest
    added, _ = _brain(env).memorize("Fresh note", "The cache uses setting zqnew.")
    assert listed(warm, 1) == [memory_to_dict(added)]


def test_get_and_stats_in_a_process_holding_the_mirror_answer_as_the_store_without_a_read(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The resident service's `get` and `stats` read LanceDB for rows its mirror held. Now
    # answered from the mirror, caught up first, as the store answers them, in the project's
    # scope and the global one: prefixes, an ambiguous one, another project's id refused,
    # archived, forgotten and damaged memories, the counts and the damage named.
    from octobrain.memory.render import memory_to_dict

    ids = _store(env)
    refs = [
        *(ids[name] for name in ("first", "global", "archived", "other", "forgotten")),
        *(ids[name] for name in ("damaged", "fix")),
        ids["first"][:13],  # a prefix, hyphen kept
        ids["global"].replace("-", "")[:10],
        ids["damaged"][:8],
        SHARED,  # ambiguous
        f"{SHARED}-1",
        "0123456789",  # no such prefix
        "abc",  # too short: refused before any read
    ]

    def answers(b: Brain) -> list[object]:
        shown = [_answer(lambda ref=ref: memory_to_dict(b.show(ref))) for ref in refs]
        return [*shown, _answer(b.stats)]

    reads = _reads_of_the_store(monkeypatch)
    found, warm = {}, {scope: _warm(env, scope) for scope in (SCOPE, "")}
    for scope, brain in warm.items():
        reads.clear()
        found[scope] = answers(brain)
        assert not reads, scope
        assert found[scope] == answers(_the_store(brain)), scope
    assert [type(a).__name__ for a in found[SCOPE][:4]] == ["dict", "dict", "dict", "tuple"]
    assert found[SCOPE][-1]["total"] == 8 and found[SCOPE][-1]["damaged_ids"] == [ids["damaged"]]
    assert found[SCOPE][5][0] == "RowDamaged" and "ambiguous" in found[SCOPE][10][1]
    assert found[""][0][0] == "NotFound" and found[""][1]["id"] == ids["global"]
    assert found[""][-1]["total"] == 1 and found[""][-1]["damaged"] == 0
    added, _ = _brain(env).memorize("Fresh note", "The cache uses setting zqnew.")
    assert memory_to_dict(warm[SCOPE].show(added.id[:8])) == memory_to_dict(added)
    assert warm[SCOPE].stats()["total"] == 9 and warm[""].stats()["total"] == 1


def test_get_in_a_process_holding_the_mirror_shows_each_access_once(
    env: dict[str, str],
) -> None:
    # `get` counts no access; it shows the count the store holds. The service's own (queued,
    # then committed and applied to its mirror) and one another process kept for the next
    # opener (applied as the mirror catches up, then committed by that opener) each count once.
    ids = _store(env)
    warm, first = _warm(env), ids["first"]

    def counts() -> tuple[int, int]:
        return warm.show(first).access_count, _the_store(warm).show(first).access_count

    warm.count_access([first], utcnow() - timedelta(hours=1))
    assert counts() == (0, 0)  # queued: not committed
    warm.flush()
    assert counts() == (1, 1) and warm.show(first).access_count == 1  # (a get is no access)
    other = _brain(env)  # a process of its own keeps its access for the next opener
    other.count_access([first], utcnow())
    other.flush(keep=True)
    assert warm.show(first).access_count == 2  # shown at once, as a search ranks it
    assert counts() == (2, 2)  # the store's opener committed it; the mirror read it once
    assert warm.show(first).access_count == 2
