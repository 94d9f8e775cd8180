"""A team's store on S3 whose endpoint goes down in the middle of a command and comes back:
every failure is one line naming the store and what to do, nothing needs repairing after, and
a write lease the failed command could not let go does not hold up the next command. And a
writer paused past its lease between its last check and its commit.

The loopback S3 endpoint of `test_object_store`, reached through a relay that can go down
(`tests.relay`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from octobrain.errors import StorageError
from octobrain.store import lease as lease_module
from octobrain.store import memories
from octobrain.store.doctor import diagnose
from octobrain.store.lease import LeaseLost, StoreBusy
from octobrain.store.location import StoreLocation
from tests.object_store_support import (  # noqa: F401 (fixtures)
    LEASE_KEY,
    S3,
    SCOPE,
    machine,
    read_lease,
    s3,
    s3_brain,
    set_lease,
    until_paused,
)
from tests.relay import Relay

DOWN = "the endpoint closed the connection without answering"
MEMORIZE = (sys.executable, "-m", "octobrain", "memory", "--scope", SCOPE, "memorize")


@pytest.fixture()
def relayed(machine: S3) -> tuple[Relay, S3, str]:  # noqa: F811
    """(the relay, the endpoint through it, a fresh bucket's URI)."""
    relay = Relay(int(machine.endpoint.rsplit(":", 1)[1]))
    return relay, S3(f"http://127.0.0.1:{relay.start()}"), f"s3://{machine.bucket()}/octobrain"


@pytest.mark.parametrize(
    ("down_at", "said"),
    [
        # Before: obstore's GenericError, a Python traceback and a 40-line Rust dump.
        (
            r"^PUT .*_octobrain/locks/",
            "store: {uri}: cannot take the write lease {lease} ({down}); nothing was changed: "
            "check that the endpoint is up and reachable (storage.uri, storage.options), then "
            "run it again",
        ),
        # The memory's data upload, before any commit. Before: every object-store error's text
        # holds `retry_timeout: …`, which the check for a lost answer took for a timeout: "the
        # answer to a commit was lost …: the write may have landed".
        (
            r"^PUT .*memories\.lance/data/",
            "store: cannot write to {uri}: error sending request; nothing was changed (check "
            "that the endpoint is up and reachable: storage.uri, storage.options)",
        ),
    ],
    ids=["lease", "upload"],
)
def test_the_endpoint_down_before_a_write_commits_is_one_line_and_nothing_to_repair(
    relayed: tuple[Relay, S3, str], down_at: str, said: str
) -> None:
    relay, via, uri = relayed
    brain = s3_brain(via, uri)
    brain.memorize("First", "Something to keep about deploys.")
    relay.down_at = down_at
    with pytest.raises(StorageError) as down:
        brain.memorize("Second", "Written while the endpoint is down.")
    assert str(down.value) == said.format(uri=uri, lease=LEASE_KEY, down=DOWN)
    relay.down = False  # back: nothing stored, the same command works, nothing to repair
    assert [m.title for m in s3_brain(via, uri).recent()] == ["First"]
    brain.memorize("Second", "Written while the endpoint is down.")
    assert [m.title for m in s3_brain(via, uri).recent()] == ["Second", "First"]


def test_a_record_the_endpoint_cannot_take_is_one_line(
    relayed: tuple[Relay, S3, str], caplog: pytest.LogCaptureFixture
) -> None:
    relay, via, uri = relayed
    brain = s3_brain(via, uri)
    brain.memorize("First", "Something to keep about deploys.")
    # The commit landed; recording its version did not: acknowledged, and said in one line
    # (before: the client's Rust error dump, 40 lines, in the warning).
    relay.down_at = r"^PUT .*_octobrain/versions\.json"
    with caplog.at_level(logging.WARNING):
        second, _ = brain.memorize("Second", "Committed while the record cannot be written.")
    relay.down = False
    said = [r.getMessage() for r in caplog.records if "versions.json" in r.getMessage()]
    assert said == [f"could not record the committed versions in _octobrain/versions.json: {DOWN}"]
    assert s3_brain(via, uri).get(second.id).title == "Second"

    # Reading a record with the endpoint down (before: a raw GenericError).
    relay.down = True
    with pytest.raises(
        StorageError, match=rf"^store: {uri}: cannot read _octobrain/\S+ \({DOWN}\)"
    ):
        brain.store.location.read_json("versions.json")


def test_a_lease_a_finished_command_could_not_let_go_does_not_hold_up_the_next(
    relayed: tuple[Relay, S3, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The endpoint went down as `memorize` let go of the lease: the memory was stored, the
    # lease object stayed. Back up, every write on this machine waited 60 s for it.
    relay, via, uri = relayed
    brain = s3_brain(via, uri)
    brain.memorize("First", "Something to keep about deploys.")
    relay.down_at = r"^HEAD .*_octobrain/locks/write\.json"
    done = subprocess.run(
        [*MEMORIZE, "-t", "Second", "-c", "Stored as the endpoint went down."],
        env={**os.environ, **via.env(uri, tmp_path / "cli")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "could not release the write lease" in done.stderr
    relay.down = False
    left = read_lease(brain.store.location)
    monkeypatch.setattr(memories, "LOCK_TIMEOUT_S", 2.0)  # (read as a store opens)
    later = s3_brain(via, uri)
    later.memorize("Third", "Written as soon as the endpoint is back.")
    assert [m.title for m in later.recent()] == ["Third", "Second", "First"]

    # Only a holder known ended is: one alive (this process), or on another machine, waits.
    for holder in ({**left, "pid": os.getpid()}, {**left, "kernel": "another-machine:1"}):
        set_lease(later.store.location, holder)
        with pytest.raises(StoreBusy, match="is locked by"):
            later.memorize("Fourth", "Written while a live holder has the lease.")
        assert read_lease(later.store.location) == holder


def test_a_lease_this_process_could_not_let_go_is_written_again_before_it_is_held(
    relayed: tuple[Relay, S3, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long-running process (an MCP server) could not let go of the lease (the endpoint was
    # down). Its next write found its own name in the object and held it without writing it
    # again: a machine that had seen the object unchanged for 60 s took it over, and both held
    # it until the server's next renewal (up to 15 s).
    import obstore

    relay, via, uri = relayed
    clock = [1000.0]  # both machines' boot-time clocks (`_elapsed`), moved by hand
    monkeypatch.setattr(lease_module, "_elapsed", lambda: clock[0])
    server, other = StoreLocation(uri, via.options), StoreLocation(uri, via.options)
    relay.down_at = r"^HEAD .*_octobrain/locks/write\.json"
    with server.lock("write", 5):
        pass
    relay.down = False
    left = read_lease(server)
    with pytest.raises(StoreBusy), other.lock("write", 0.1):
        pass  # the other machine reads the object left behind, and waits
    clock[0] += lease_module.LEASE_TTL_S - 1
    with server.lock("write", 5):
        clock[0] += 2  # the object the other machine first read is 61 s old by now
        with pytest.raises(StoreBusy, match=left["holder"]), other.lock("write", 0.1):
            pass
        server.check_held()  # (the server still holds it)
    with other.lock("write", 0.1):  # let go: the other machine takes it at once
        assert read_lease(other)["holder"] != left["holder"]

    # Taken over between the server's read of its own object and its write: it waits.
    relay.down_at = r"^HEAD .*_octobrain/locks/write\.json"
    with server.lock("write", 5):
        pass
    relay.down = False
    taker = {"holder": "desktop:7:taker", "expires": time.time() + 60}
    read = obstore.get

    def taken_after(store: object, key: str) -> object:
        got = read(store, key)  # type: ignore[arg-type]
        set_lease(other, taker)
        return got

    monkeypatch.setattr(obstore, "get", taken_after)
    with pytest.raises(StoreBusy, match=taker["holder"]), server.lock("write", 0.3):
        pass
    monkeypatch.setattr(obstore, "get", read)
    assert read_lease(server) == taker


def test_a_lease_that_lapsed_while_held_is_left_to_expire_not_deleted(
    relayed: tuple[Relay, S3, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Letting go is a read of the object then a delete (obstore has no conditional delete): a
    # holder past its time (paused, or cut off from the endpoint) whose lease was taken over in
    # between deleted the taker's lease, and a third machine could then take it too.
    import obstore

    _, via, uri = relayed
    clock = [1000.0]
    monkeypatch.setattr(lease_module, "_elapsed", lambda: clock[0])
    server, other = StoreLocation(uri, via.options), StoreLocation(uri, via.options)
    taker = {"holder": "desktop:7:taker", "expires": time.time() + 60}
    read = obstore.head

    def taken_after(store: object, key: str) -> object:
        seen = read(store, key)  # type: ignore[arg-type]
        set_lease(other, taker)  # the takeover lands between the read and the delete
        return seen

    held = server.lock("write", 5)
    held.__enter__()
    ours = read_lease(server)["holder"]
    clock[0] += lease_module.LEASE_TTL_S  # past what its last renewal held it for
    monkeypatch.setattr(obstore, "head", taken_after)
    with contextlib.suppress(LeaseLost):
        held.__exit__(None, None, None)
    monkeypatch.setattr(obstore, "head", read)
    # Not deleted (before: FileNotFoundError, the taker's lease gone): it expires, or the
    # taker's stands.
    assert read_lease(other)["holder"] in (taker["holder"], ours)


_PAUSED_LINK = textwrap.dedent(
    """
    import os, signal, sys
    import octobrain.store.lease as lease
    lease.LEASE_TTL_S = float(sys.argv[1])  # the product's 60 s, shortened for the test
    from octobrain.errors import OctobrainError
    from octobrain.memory.brain import Brain
    from octobrain.store.memories import MemoryStore
    how, source, target, marker = sys.argv[2:6]
    checked, calls = MemoryStore.check_commit, []
    def paused(self):
        checked(self)
        calls.append(1)
        if len(calls) == (1 if how == "relate" else 2):  # (a memorize first looks for a copy)
            # its last check passed: stopped before the commit
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGSTOP)
    MemoryStore.check_commit = paused
    brain = Brain("github.com/acme/api")
    try:
        if how == "relate":
            brain.relate(source, target, "depends_on")
        else:
            text = "Rollouts follow the deploy checklist."
            brain.memorize("Rollout", text, related_to=[{"target_id": target}])
    except OctobrainError as exc:
        print(exc, flush=True)
        sys.exit(3)
    print("acknowledged", flush=True)
    """
)


@pytest.mark.parametrize("how", ["relate", "memorize"])
def test_a_link_to_a_memory_forgotten_while_its_writer_was_paused_is_taken_back(
    machine: S3,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    # Stopped (SIGSTOP) past its lease after its last check, the writer committed its link
    # when resumed, though the machine that took the lease over had forgotten the target:
    # acknowledged, an edge to nothing, `doctor` exit 1.
    uri = f"s3://{machine.bucket()}/octobrain"
    brain = s3_brain(machine, uri)
    source, _ = brain.memorize("Checklist", "The deploy checklist lives in the wiki.")
    target, _ = brain.memorize("Old runbook", "The old runbook covers manual deploys.")
    marker = tmp_path / "paused"
    holder = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_LINK, "2", how, source.id, target.id, str(marker)],
        env={**os.environ, **machine.env(uri, tmp_path / "holder")},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until_paused(holder, marker)
        monkeypatch.setattr(lease_module, "LEASE_TTL_S", 2.0)
        assert s3_brain(machine, uri).forget([target.id], confirm=True).deleted == 1
    finally:
        holder.send_signal(signal.SIGCONT)
    out, err = holder.communicate(timeout=120)
    assert holder.returncode == 3, (out, err[-2000:])
    assert out == (
        f"related_to: memory {target.id} was deleted by another writer while this write was "
        "paused past its lease; nothing was stored\n"
    )
    reader = s3_brain(machine, uri)
    assert reader.store.relationships.count_rows() == 0
    assert [m.title for m in reader.recent()] == ["Checklist"]
    assert diagnose(StoreLocation(uri, machine.options)).ok
