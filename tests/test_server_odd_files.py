"""A FIFO that appears in a store's table folders under a long-lived process (the resident
service `octobrain mcp` relays to): the next call names it, as a new process's open does,
instead of the process waiting on it for good."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.server_support import call, octobrain_cmd, run
from tests.service_support import SCOPE, memorize
from tests.service_support import env as service_env  # noqa: F401 (a fixture)

FACT = {
    "title": "Release process",
    "content": "Releases are cut from main by tagging vX.Y.Z; CI publishes the wheels.",
}
OTHER = {"title": "Deploys", "content": "Deploys run on Fridays from the release branch."}


def _files(folder: Path) -> set[str]:
    return set(os.listdir(folder)) if folder.is_dir() else set()


@pytest.mark.parametrize("folder", ["data", "_versions"])
def test_a_fifo_in_place_of_a_new_file_under_the_resident_service_is_named(
    service_env: dict[str, str],  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
    folder: str,
) -> None:
    # `octobrain mcp` relaying to the service: the service read the FIFO and waited on it for
    # a writer, and every call after it (CLI commands too) queued behind that one for good.
    env = service_env
    where = Path(env["OCTOBRAIN_DATA_DIR"]) / "db" / "memories.lance" / folder
    cmd = octobrain_cmd("mcp")
    relayed = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env, cwd=tmp_path)

    async def body() -> None:
        async with Client(relayed) as client:
            error, reply = await call(client, "memorize", scope=SCOPE, **FACT)
            assert not error, reply
            before = _files(where)
            memorize(env, OTHER["title"], OTHER["content"], service=False)  # another process
            new = sorted(n for n in _files(where) - before if not n.startswith("_latest"))
            assert new, f"the other process's commit left no new file in {folder}/"
            for name in new:
                os.remove(where / name)
                os.mkfifo(where / name)
            with anyio.fail_after(60):
                error, reply = await call(client, "remember", scope=SCOPE, query="deploys")
            assert error and "is not a regular file" in reply, reply
            assert any(f"memories.lance/{folder}/{name} " in reply for name in new), reply

    run(body)
