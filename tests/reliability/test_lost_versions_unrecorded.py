"""A running server whose store lost the newest `memories` version together with everything on
disk that names it (the manifest, Lance's hint, `_octobrain/`) refuses the table, naming the
versions, from what the process itself committed or opened (`store.sighted`); a table started
over since the process saw it is no loss."""

from __future__ import annotations

import shutil
from pathlib import Path

from mcp import Client
from mcp.client.stdio import stdio_client

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.store import sighted
from octobrain.store.location import StoreLocation
from octobrain.store.versions import HINT, lost_version, version_of
from tests.server_support import call, memory_id, run, stdio_params

SCOPE = "a/b"  # (the server's directory is no repository: each call names its scope)


def _lose_newest_and_every_record_of_it(db: Path) -> None:
    versions = db / "memories.lance" / "_versions"
    max(versions.glob("*.manifest"), key=lambda f: version_of(f.name)).unlink()
    (versions / HINT).unlink()
    shutil.rmtree(db / "_octobrain")


def test_a_server_refuses_a_table_that_lost_its_newest_version_and_every_record_of_it(
    tmp_path: Path,
) -> None:
    # Before: `remember` answered from the version before ("No relevant memories found" for
    # the second memory), and the next `memorize` buried the loss under a new version 3.
    db = tmp_path / "data" / "db"
    deploys = {"query": "deploys Tuesday", "scope": SCOPE}

    async def body() -> None:
        async with Client(stdio_client(stdio_params(tmp_path))) as client:
            _, said = await call(
                client, "memorize", title="Auth uses JWT tokens", scope=SCOPE,
                content="The API signs 15 minute JWT access tokens.",
            )  # fmt: skip
            _, said = await call(
                client, "memorize", title="Deploys run on Tuesdays", scope=SCOPE,
                content="Production deploys run every Tuesday at noon.",
            )  # fmt: skip
            second = memory_id(said)
            failed, said = await call(client, "remember", **deploys)
            assert not failed and second in said, said
            _lose_newest_and_every_record_of_it(db)
            for tool, arguments in (
                ("remember", deploys),
                ("remember", {"query": "JWT tokens", "scope": SCOPE}),
                ("memorize", {"title": "After the loss", "content": "A new fact written here.",
                              "scope": SCOPE}),
            ):  # fmt: skip
                failed, said = await call(client, tool, **arguments)
                assert failed and "table 'memories'" in said, (tool, said)
                assert "version 3 committed (this process saw it)" in said, said
                assert "the newest version that opens is 2" in said, said
                assert "restart this process" in said, said
                assert "octobrain doctor" not in said, said  # (a new process sees no loss)

        # The repair it names, to keep the table as it opens: a new process serves version 2.
        async with Client(stdio_client(stdio_params(tmp_path))) as client:
            failed, said = await call(client, "remember", query="JWT tokens", scope=SCOPE)
            assert not failed and "Auth uses JWT tokens" in said, said

    run(body)


def test_a_table_started_over_since_this_process_saw_it_is_no_loss(tmp_path: Path) -> None:
    db = tmp_path / "db"
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=db)
    brain.memorize("Auth uses JWT tokens", "The API signs 15 minute JWT access tokens.")
    location = StoreLocation(db)
    # Version 9 seen before the table was made again (by another process) from version 1:
    # what opens now was committed after that, so it is no loss.
    sighted.sight(location, "memories", 9)
    brain.memorize("Deploys run on Tuesdays", "Production deploys run every Tuesday at noon.")
    (db / "memories.lance" / "_versions" / HINT).unlink()
    shutil.rmtree(db / "_octobrain")
    table = location.connect().open_table("memories")
    assert lost_version(location, "memories", table) is None
    # The same mark taken after the version that opens was committed: that is a loss.
    sighted.sight(location, "memories", 9)
    lost = lost_version(location, "memories", table)
    assert lost is not None and "versions 4–9 committed (this process saw it)" in lost.reason
    assert "the newest version that opens is 3" in lost.reason, lost.reason


def test_a_server_that_named_a_loss_from_the_hint_takes_the_loss_accepted_as_its_line_says(
    tmp_path: Path,
) -> None:
    # Before: the server refused the newest version lost (Lance's hint names it), and once the
    # user deleted the hint and `_octobrain/versions.json` as that line says, it refused every
    # call again ("this process saw it"), now asking for a restart.
    db = tmp_path / "data" / "db"

    async def body() -> None:
        async with Client(stdio_client(stdio_params(tmp_path))) as client:
            for title in ("Auth uses JWT tokens", "Deploys run on Tuesdays"):
                failed, said = await call(
                    client, "memorize", title=title, scope=SCOPE,
                    content=f"{title}: a fact the team relies on.",
                )  # fmt: skip
                assert not failed, said
            versions = db / "memories.lance" / "_versions"
            max(versions.glob("*.manifest"), key=lambda f: version_of(f.name)).unlink()
            failed, said = await call(client, "remember", query="JWT tokens", scope=SCOPE)
            assert failed and "version 3 committed, but" in said, said
            (versions / HINT).unlink()  # the loss accepted, as the line says
            (db / "_octobrain" / "versions.json").unlink()
            failed, said = await call(client, "remember", query="JWT tokens", scope=SCOPE)
            assert not failed and "Auth uses JWT tokens" in said, said
            failed, said = await call(
                client, "memorize", title="After the loss", scope=SCOPE,
                content="A new fact written after the loss was accepted.",
            )  # fmt: skip
            assert not failed, said

    run(body)
