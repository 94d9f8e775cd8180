"""A memory row carries a checksum of what a user wrote (`schema.checksum`): Lance keeps no
checksum of its data pages, so a bit flipped on disk inside ASCII text or a timestamp read back
as another, valid value. Every write path stamps the rows it writes; every row a command shows
or hands out is checked; `doctor` checks every row."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import lancedb
import pyarrow as pa
import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.memory.conversation import Conversation, Turn
from octobrain.memory.export import export_jsonl
from octobrain.memory.transfer import import_jsonl, reembed
from octobrain.store import schema
from octobrain.times import utcnow
from tests.consolidation_support import TWINS, add_at, twins
from tests.reliability.damage_support import run_cli, store_dir
from tests.reliability.row_checksums_support import _flip
from tests.reliability.test_storage_faults import memorize, octobrain, one_clear_line

SCOPE = "github.com/acme/api"


def _micros(env: dict[str, str], memory_id: str, column: str) -> bytes:
    table = lancedb.connect(str(store_dir(env))).open_table("memories")
    row = table.search().where(f"id = '{memory_id}'").select([column]).limit(1).to_arrow()
    value = row.column(column).cast(pa.int64())[0].as_py()
    return int(value).to_bytes(8, "little", signed=True)


@pytest.mark.parametrize("field", ["title", "content", "created_at"])
def test_a_bit_flipped_on_disk_is_named_not_shown_as_other_text(
    env: dict[str, str], field: str
) -> None:
    # One bit of "Fact number 50" flipped reads "Fact number 51": valid UTF-8, no error, and
    # `get`, `remember` and `export` answered it as written; `doctor` said ok.
    ids = [
        memorize(env, f"Fact number {i}", f"Durable fact number {i} about the API.")
        for i in (50, 70)
    ]
    target = ids[0]
    if field == "created_at":
        # Bit 40 of the microseconds: the memory 12.7 days older or younger.
        assert _flip(env, _micros(env, target, "created_at"), 40) >= 1
        garbled = None
    else:
        text = b"Fact number 50" if field == "title" else b"Durable fact number 50"
        assert _flip(env, text, 8 * (len(text) - 1)) >= 1  # "0" -> "1"
        garbled = text[:-1].decode() + "1"

    for args in (
        ("get", target),
        ("remember", "durable fact number", "--format", "json"),
        ("export", str(store_dir(env).parent / "out.jsonl")),
    ):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert "'memories' is damaged" in line and target in line, line
        assert "no longer matches the checksum" in line and "octobrain doctor" in line, line
        assert garbled is None or garbled not in done.stdout
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and not report["ok"]
    [problem] = [p for p in report["problems"] if "checksum" in p["problem"]]
    assert problem["table"] == "memories" and target in problem["problem"], problem
    assert "memory forget" in problem["repair"], problem
    [memories] = [t for t in report["tables"] if t["name"] == "memories"]
    assert memories["garbled_rows"] == 1 and memories["garbled"] == [target]

    # The repair doctor names: forget it (its text not shown), then the store is whole.
    done = octobrain(env, "forget", target, "--yes")
    assert done.returncode == 0, done.stderr
    assert "damaged" in done.stdout and (garbled is None or garbled not in done.stdout)
    assert run_cli(env, "doctor")[0] == 0
    assert octobrain(env, "get", ids[1]).returncode == 0


def test_an_old_store_gains_checksums_of_its_rows_with_its_first_write(
    env: dict[str, str],
) -> None:
    # A store made before the column: readers take its rows unchecked; the first write adds
    # the column and stamps every row as it is then, after which a flipped bit is named.
    old = memorize(env, "Fact number 50", "Durable fact number 50 about the API.")
    other = memorize(env, "Fact number 60", "Durable fact number 60 about the API.")
    assert octobrain(env, "relate", old, other).returncode == 0
    db = lancedb.connect(store_dir(env))
    for name in ("memories", "relationships"):
        db.open_table(name).drop_columns([schema.CHECKSUM])
    found = octobrain(env, "get", old)
    assert found.returncode == 0 and "Fact number 50" in found.stdout, found.stderr
    memorize(env, "Fact number 70", "Durable fact number 70 about the API.")
    table = lancedb.connect(store_dir(env)).open_table("memories")
    rows = table.to_arrow().select([*schema.CHECKED, schema.CHECKSUM]).to_pylist()
    assert len(rows) == 3 and all(schema.verified(r) is True for r in rows)
    [edge] = lancedb.connect(store_dir(env)).open_table("relationships").to_arrow().to_pylist()
    assert schema.edge_verified(edge) is True
    assert _flip(env, b"Fact number 50", 8 * 13) >= 1
    done = octobrain(env, "get", old)
    assert done.returncode == 1 and "no longer matches the checksum" in done.stderr
    assert run_cli(env, "doctor")[0] == 1


def test_a_bit_flipped_in_a_link_is_named_not_shown(env: dict[str, str]) -> None:
    # A link's description (or type, ends) flipped on disk read back as other valid text:
    # `remember` showed it beside its memory, `doctor` said ok.
    ids = [
        memorize(env, f"Fact number {i}", f"Durable fact number {i} about the API.")
        for i in (50, 60)
    ]
    relate = ("relate", ids[0], ids[1], "-t", "depends_on", "-d", "Fifty rests on sixty")
    assert octobrain(env, *relate).returncode == 0
    [data] = (store_dir(env) / "relationships.lance" / "data").glob("*.lance")
    raw = bytearray(data.read_bytes())
    raw[raw.index(b"sixty")] ^= 0x02  # "sixty" -> "qixty"
    data.write_bytes(bytes(raw))
    done = octobrain(env, "remember", "durable fact number 50")
    assert done.returncode == 1 and "qixty" not in done.stdout
    line = one_clear_line(done.stderr)
    assert "'relationships' is damaged" in line and "octobrain doctor" in line, line
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    [problem] = json.loads(out)["problems"]
    assert rc == 1 and problem["table"] == "relationships" and "link" in problem["problem"]
    assert octobrain(env, "forget", ids[1], "--yes").returncode == 0  # the link goes with it
    assert run_cli(env, "doctor")[0] == 0


def test_a_row_an_older_octobrain_rewrote_reads_unchecked_and_is_stamped_again(
    tmp_path: Path,
) -> None:
    # An older release knows no checksum: its update keeps the column as it was (Lance keeps
    # a column a write does not name). The row is taken as it is (no false damage), and the
    # maintenance pass stamps it again.
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path)
    memory, _ = brain.memorize("Primary database", "Postgres 16 is the primary database.")
    later = utcnow() + timedelta(seconds=1)
    rows = pa.table({"id": [memory.id], "content": ["Postgres 17 is the primary database."]})
    rows = rows.append_column(pa.field("updated_at", pa.timestamp("us", tz="UTC")), [[later]])
    brain.store.memories.merge_insert("id").when_matched_update_all().execute(rows)
    assert "Postgres 17" in brain.get(memory.id).content
    assert brain.store.scan("true")[0][schema.CHECKSUM] is not None
    assert schema.verified(brain.store.scan("true")[0]) is None
    brain.store.compact()
    assert schema.verified(brain.store.scan("true")[0]) is True


def _every_row_verified(brain: Brain) -> int:
    rows = brain.store.scan("true")
    unverified = [(r["id"], r["title"]) for r in rows if schema.verified(r) is not True]
    assert not unverified, unverified
    edges = brain.store.relationships.to_arrow().to_pylist()
    assert all(schema.edge_verified(e) is True for e in edges), edges
    return len(rows)


def test_every_write_path_stamps_the_rows_it_writes(tmp_path: Path) -> None:
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path)
    counts: list[int] = []

    def walk(_step: str) -> None:
        counts.append(_every_row_verified(brain))

    memory, _ = brain.memorize("Primary database", "Postgres 16 is the primary database.")
    walk("memorize")
    brain.update(memory.id, content="Postgres 17 is the primary database.", add_tags=["db"])
    walk("update")
    assert brain.remember("primary database", limit=3).hits  # an access bump
    walk("access")
    twins(brain)
    brain.sleep_consolidate()  # a sleep consolidation: a parent, members flipped
    walk("sleep")
    old = add_at(
        brain, "Old cache note", "The cache TTL was 5 minutes.", utcnow() - timedelta(days=500)
    )
    brain.sleep_consolidate()  # archives the long-faded note
    assert brain.store.scan(f"id = '{old.id}'")[0]["state"] == "archived"
    walk("archive")
    goal, _ = brain.memorize(
        "Goal: rate limiting", "Ship per-key rate limiting for the API.", memory_type="goal"
    )
    for text in ("Token bucket chosen for rate limiting.", "Limits live in config/limits.toml."):
        brain.memorize(
            "Rate limiting finding",
            text,
            related_to=[{"target_id": goal.id, "relationship_type": "achieves"}],
        )
    closing, _ = brain.memorize(
        "Rate limiting shipped",
        "Rate limiting is live.",
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    walk("goal")
    brain.unconsolidate(closing.id)
    walk("unconsolidate")
    turns = [
        Turn("Ana", "We move the API to Postgres 17 next week.", "1", "t1", utcnow()),
        Turn("Ben", "Then the migration scripts need a dry run first.", "1", "t2", utcnow()),
    ]
    assert brain.ingest([Conversation("standup", turns)]).added == 2
    walk("ingest")
    exported = io.StringIO()
    export_jsonl(brain, exported, embeddings=True)
    other = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "b")
    assert import_jsonl(other, exported.getvalue().splitlines()).imported == counts[-1]
    counts.append(_every_row_verified(other))
    version = brain.store.version()
    reembed(brain)
    walk("reembed")
    brain.restore(version, confirm=True)
    walk("restore")
    brain.store.compact()
    walk("maintenance")
    assert counts[0] == 1 and counts[-1] == counts[-2] > 10, counts


def test_a_damaged_row_is_not_written_back_stamped_sound(tmp_path: Path) -> None:
    # A sleep pass reads rows and writes them back changed (members flipped to consolidated):
    # a garbled one must stop it, not come out with a fresh checksum vouching for it.
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path)
    ids = twins(brain)
    text = TWINS[0].encode()
    flipped = 0
    for path in (tmp_path / "memories.lance" / "data").glob("*.lance"):
        raw = bytearray(path.read_bytes())
        if (at := raw.find(text)) >= 0:
            raw[at + text.index(b"pipeline")] ^= 1  # "pipeline" -> "qipeline"
            path.write_bytes(bytes(raw))
            flipped += 1
    assert flipped
    fresh = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path)
    with pytest.raises(schema.RowDamaged):
        fresh.sleep_consolidate()
    rows = fresh.store.scan("true")
    assert len(rows) == len(ids) and {r["state"] for r in rows} == {"working"}
    assert [schema.verified(r) for r in rows].count(False) == 1


def test_a_damaged_memory_is_forgotten_over_mcp_its_text_not_shown(env: dict[str, str]) -> None:
    # Over MCP, `forget` of a damaged memory answered the damage itself: the agent could not
    # remove what `doctor` names, and the repair needed a terminal.
    from tests.server_support import PROJECT_A, call, hash_pool, run, server_for

    ids = [
        memorize(env, f"Fact number {i}", f"Durable fact number {i} about the API.")
        for i in (50, 70)
    ]
    text = b"Durable fact number 50"
    assert _flip(env, text, 8 * (len(text) - 1)) >= 1
    server = server_for(hash_pool(store_dir(env)), store_dir(env).parent, PROJECT_A)

    async def body() -> None:
        from mcp import Client

        async with Client(server) as client:
            error, reply = await call(client, "remember", query="durable fact number")
            assert error and "no longer matches the checksum" in reply, reply
            error, reply = await call(client, "forget", memory_id=ids[0][:8], confirm=False)
            assert error and ids[0] in reply and "damaged" in reply, reply
            error, reply = await call(client, "forget", memory_id=ids[0], confirm=True)
            assert not error and "Deleted 1 memory" in reply and "damaged" in reply, reply
            assert "number 51" not in reply and "Fact number 50" not in reply, reply
            error, reply = await call(client, "remember", query="durable fact number")
            assert not error and "Fact number 70" in reply and ids[0] not in reply, reply

    run(body)
    assert run_cli(env, "doctor")[0] == 0


def test_an_ambiguous_id_prefix_never_lists_a_damaged_memory_s_text(
    env: dict[str, str], tmp_path: Path
) -> None:
    # An id prefix two memories share is refused with both listed by title: the damaged one's
    # title was listed as it read back, "Fact number 51" where it says 50 (CLI and MCP).
    from octobrain.store.schema import DAMAGED_TITLE
    from tests.server_support import PROJECT_A, call, hash_pool, run, server_for

    export = tmp_path / "twins.jsonl"
    header = {"kind": "header", "format": "octobrain-export", "version": 1, "count": 2}
    lines = [json.dumps(header)]
    for n, number in enumerate((50, 70), 1):
        at = "2026-01-05T07:46:03.229180Z"
        memory = {"kind": "memory", "title": f"Fact number {number}", "scope": SCOPE,
                  "content": f"Durable fact number {number} about the API.",
                  "id": f"abcdef12-0000-4000-8000-00000000000{n}", "created_at": at,
                  "updated_at": at, "last_accessed": at}  # fmt: skip
        lines.append(json.dumps(memory))
    export.write_text("\n".join(lines) + "\n")
    assert octobrain(env, "import", str(export)).returncode == 0
    assert _flip(env, b"Fact number 50", 8 * 13) >= 1
    done = octobrain(env, "forget", "abcdef12")
    line = one_clear_line(done.stderr)
    assert done.returncode == 2 and "is ambiguous" in line, done.stderr
    assert "Fact number 51" not in line and DAMAGED_TITLE in line and "number 70" in line, line
    server = server_for(hash_pool(store_dir(env)), store_dir(env).parent, PROJECT_A)

    async def body() -> None:
        from mcp import Client

        async with Client(server) as client:
            error, reply = await call(client, "forget", memory_id="abcdef12", confirm=False)
            assert error and "is ambiguous" in reply and "number 51" not in reply, reply
            assert DAMAGED_TITLE in reply and "Fact number 70" in reply, reply

    run(body)


def test_a_memory_whose_scope_is_damaged_is_forgotten_by_doctor(env: dict[str, str]) -> None:
    # A bit flipped in a memory's scope hid it from `memory forget` in its own scope, the
    # repair doctor named ("no memory … is visible from scope"), and doctor kept failing.
    damaged = memorize(env, "Fact number 50", "Durable fact number 50 about the API.")
    web = ("--scope", "github.com/acme/web")
    kept = octobrain(env, *web, "memorize", "-t", "Web fact", "-c", "A web fact.", scoped=False)
    assert kept.returncode == 0, kept.stderr
    scope = SCOPE.encode()
    assert _flip(env, scope, 8 * (len(scope) - 1)) == 1  # "…/api" reads "…/apj"
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    assert rc == 1 and "--forget-damaged" in json.dumps(json.loads(out)["problems"])
    assert octobrain(env, "forget", damaged, "--yes").returncode != 0  # not visible: its scope
    rc, _, err = run_cli(env, "doctor", "--forget-damaged")
    assert rc == 0, err
    assert f"memories: forgot {damaged} (damaged, not shown)" in err and "apj" not in err, err
    recent = octobrain(
        env, "--scope", "github.com/acme/web", "recent", "--format", "json", scoped=False
    )
    assert [m["title"] for m in json.loads(recent.stdout)] == ["Web fact"]
