"""The MCP `ingest` tool: turns stored once, bad fields named, embedding that holds up no other
call and never runs under the pool lock."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from octobrain.times import utcnow
from tests.server_support import PROJECT_A, call, hash_pool, run, server_for


def test_mcp_ingest_stores_turns_once_and_names_bad_fields(tmp_path: Path) -> None:
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)
    turns = [
        {"speaker": "user", "text": "Which queue do we use for billing events?"},
        {"speaker": "assistant", "text": "Billing events go through the SQS FIFO queue."},
    ]

    async def body() -> None:
        async with Client(server) as client:
            error, reply = await call(client, "ingest", conversation="chat-1", turns=turns)
            assert not error and "2 turns added, 0 already present, 1 link" in reply, reply
            error, reply = await call(client, "ingest", conversation="chat-1", turns=turns)
            assert not error and "0 turns added, 2 already present" in reply, reply
            blank = [*turns, {"speaker": "user", "text": "  "}, {"speaker": "user", "text": ""}]
            error, reply = await call(client, "ingest", conversation="chat-1", turns=blank)
            assert not error and "2 with blank text skipped" in reply, reply
            error, reply = await call(client, "remember", query="billing queue")
            assert "SQS FIFO" in reply
            # An id a later call gives to another turn was taken for the stored one, unsaid.
            said = [{"speaker": "user", "text": "First version of the turn.", "id": "T1"}]
            other = [{"speaker": "user", "text": "A completely different turn.", "id": "T1"}]
            error, reply = await call(client, "ingest", conversation="chat-2", turns=said)
            assert not error and "1 turn added" in reply, reply
            error, reply = await call(client, "ingest", conversation="chat-2", turns=other)
            assert not error and "0 turns added, 0 already present, 1 not stored" in reply, reply
            assert "their id names a stored turn with other words" in reply, reply
            error, reply = await call(
                client, "ingest", conversation="chat-1", turns=[{"speaker": "u", "text": 5}]
            )
            assert error and reply.startswith("turns[0].text"), reply
            error, reply = await call(
                client,
                "ingest",
                conversation="c",
                turns=[{"speaker": "u", "text": "x" * 10_000}] * 101,
            )
            assert error and reply.startswith("turns: must hold at most"), reply
            for turn, rule in (
                ({"text": "x" * 10_001}, "turns[0].text: must be at most 10000 bytes"),
                ({"text": "a\x00b"}, "turns[0].text: must not contain NUL"),
                ({"speaker": "u\x00"}, "turns[0].speaker: must not contain NUL"),
                ({"id": "i" * 101}, "turns[0].id: must be 1–100 characters"),
                ({"session": {"a": 1}}, "turns[0].session: must be a string or an integer"),
                ({"time": "9999-12-31T23:59:59-05:00"}, "turns[0].time: must fall within"),
                # Dated 9999, a turn headed every later briefing's recent memories until then.
                ({"time": "9999-12-31T23:59:59Z"}, "turns[0].time: must not be more than a day"),
                ({"time": (utcnow() + timedelta(days=2)).timestamp()}, "turns[0].time: must not"),
            ):
                error, reply = await call(
                    client,
                    "ingest",
                    conversation="c",
                    turns=[{"speaker": "u", "text": "hi", **turn}],
                )
                assert error and reply.startswith(rule), reply

    run(body)


def test_mcp_ingest_embeds_without_holding_up_other_calls(tmp_path: Path) -> None:
    # A long conversation's embedding takes seconds; other sessions' calls on the same pool
    # (HTTP clients, the service's CLI commands and hooks) answer meanwhile, and the ingest
    # still stores every turn once.
    pool = hash_pool(tmp_path / "db")
    server = server_for(pool, tmp_path, PROJECT_A)
    entered, release = threading.Event(), threading.Event()
    turns = [{"speaker": "u", "text": f"slow turn {i} about the deploy window"} for i in range(3)]

    async def body() -> None:
        async with Client(server) as other, Client(server) as ingesting:
            error, reply = await call(
                other, "memorize", title="Deploy day", content="Deploys go out on Tuesdays."
            )
            assert not error, reply
            embedder = pool.shared_root().embedder
            plain = embedder.embed_documents

            def held(texts: Any) -> Any:
                if any("slow turn" in t for t in texts):
                    entered.set()
                    assert release.wait(30)
                return plain(texts)

            embedder.embed_documents = held  # type: ignore[method-assign]
            replies: list[str] = []

            async def ingest() -> None:
                error, reply = await call(ingesting, "ingest", conversation="c", turns=turns)
                assert not error, reply
                replies.append(reply)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ingest)
                assert await anyio.to_thread.run_sync(entered.wait, 30)
                with anyio.fail_after(10):  # the ingest is embedding: the pool is free
                    error, reply = await call(other, "remember", query="when do deploys go out")
                assert not error and "Tuesdays" in reply, reply
                release.set()
            assert "3 turns added, 0 already present, 2 links" in replies[0], replies

    try:
        run(body)
    finally:
        release.set()


def test_concurrent_mcp_ingests_embed_one_at_a_time_and_never_under_the_pool_lock(
    tmp_path: Path,
) -> None:
    # Nothing bounded how many ingests embedded at once (40 HTTP clients: 8.6 GB, a `remember`
    # waiting up to 146 s for a thread); and turns forgotten between an ingest's plan and its
    # write were embedded at the write, under the pool lock (another client waited 14 s): they
    # are now not stored again at all.
    pool = hash_pool(tmp_path / "db")
    server = server_for(pool, tmp_path, PROJECT_A)
    entered, release = threading.Event(), threading.Event()
    running = {"now": 0, "most": 0, "locked": 0}
    count = threading.Lock()
    inside = threading.local()  # whether this thread runs inside the pool lock

    def turns(name: str, n: int) -> list[dict[str, str]]:
        return [{"speaker": "u", "text": f"{name} turn {i} on the release train"} for i in range(n)]

    async def body() -> None:
        async with Client(server) as first:
            assert not (await call(first, "ingest", conversation="old", turns=turns("old", 2)))[0]
        embedder = pool.shared_root().embedder
        plain = embedder.embed_documents
        in_pool = pool.call

        def call_noting(*args: Any, **kwargs: Any) -> Any:
            inside.pool = True
            try:
                return in_pool(*args, **kwargs)
            finally:
                inside.pool = False

        pool.call = call_noting  # type: ignore[method-assign]

        def held(texts: Any) -> Any:
            if not any(" turn " in t for t in texts):
                return plain(texts)  # the question of a `remember`
            with count:
                running["now"] += 1
                running["most"] = max(running["most"], running["now"])
                running["locked"] += getattr(inside, "pool", False)
            entered.set()
            assert release.wait(30)
            with count:
                running["now"] -= 1
            return plain(texts)

        embedder.embed_documents = held  # type: ignore[method-assign]
        async with (
            Client(server) as other,
            Client(server) as a,
            Client(server) as b,
            Client(server) as c,
        ):
            replies: list[str] = []

            async def ingest(client: Client, name: str, sent: list[dict[str, str]]) -> None:
                error, reply = await call(client, "ingest", conversation=name, turns=sent)
                assert not error, reply
                replies.append(reply)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ingest, a, "old", turns("old", 4))  # 2 stored, 2 new
                assert await anyio.to_thread.run_sync(entered.wait, 30)
                tg.start_soon(ingest, b, "second", turns("second", 3))
                tg.start_soon(ingest, c, "third", turns("third", 3))
                await anyio.sleep(0.5)
                with anyio.fail_after(10):  # three ingests in flight: the pool still answers
                    error, reply = await call(other, "remember", query="old turn 0")
                assert not error, reply
                stored = [m for m in pool.shared_root().recent(50) if m.content.startswith("old")]
                ids = [
                    m.id
                    for m in stored
                    if m.content
                    in ("old turn 0 on the release train", "old turn 1 on the release train")
                ]
                assert len(ids) == 2
                for mid in ids:
                    error, reply = await call(other, "forget", memory_id=mid, confirm=True)
                    assert not error, reply
                release.set()
            assert sorted(r.split(":")[1].split(",")[0] for r in replies) == [
                " 2 turns added",  # the two forgotten meanwhile stay forgotten
                " 3 turns added",
                " 3 turns added",
            ], replies
            assert any("2 forgotten earlier" in r for r in replies), replies
        assert running["most"] == 1 and running["locked"] == 0, running

    try:
        run(body)
    finally:
        release.set()
