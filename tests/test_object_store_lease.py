"""The write lease of a store on S3: a live holder is waited for, a dead one's lease taken over,
and a holder that may have lost its lease commits nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from octobrain.store import lease as lease_module
from octobrain.store.lease import LEASE_TTL_S, StoreBusy
from octobrain.store.location import StoreLocation
from tests.object_store_support import LEASE_KEY, S3, read_lease, s3_brain, set_lease, until_paused
from tests.object_store_support import machine as machine  # the fixture, shared
from tests.object_store_support import s3 as s3  # the fixture, shared


def test_the_write_lease_waits_for_a_live_holder_and_takes_over_a_dead_ones(
    machine: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = StoreLocation(f"s3://{machine.bucket()}/octobrain", machine.options)
    alive = {"holder": "desktop:4242:live", "expires": time.time() + LEASE_TTL_S}
    set_lease(location, alive)
    with pytest.raises(StoreBusy, match="desktop:4242:live"), location.lock("write", 0.3):
        pass

    # Dead for longer than any clock could be wrong: taken over at once.
    dead = {
        "holder": "desktop:4242:crashed",
        "expires": time.time() - lease_module.CLOCK_TOLERANCE_S - 1,
    }
    set_lease(location, dead)
    started = time.monotonic()
    with location.lock("write", 5), location.lock("write", 5):  # re-entrant in one process
        assert read_lease(location)["holder"] != dead["holder"]
    assert time.monotonic() - started < 2
    with pytest.raises(FileNotFoundError):
        read_lease(location)  # released: the next writer creates it at once

    # Expired a second ago by this machine's clock, which may be wrong: taken over only once
    # the object stayed unchanged for a whole TTL on this machine's own clock.
    monkeypatch.setattr(lease_module, "LEASE_TTL_S", 1.5)
    recent = {"holder": "desktop:4242:stopped", "expires": time.time() - 1}
    set_lease(location, recent)
    with pytest.raises(StoreBusy, match="desktop:4242:stopped"), location.lock("write", 0.5):
        pass
    started = time.monotonic()
    with location.lock("write", 5):
        assert read_lease(location)["holder"] != recent["holder"]
    assert 0.9 <= time.monotonic() - started < 4  # (1.5 s since it was first read, above)


class _FastClock:
    """The `time` module of a machine whose wall clock runs `ahead` seconds fast."""

    def __init__(self, ahead: float) -> None:
        self.ahead = ahead

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)

    def time(self) -> float:
        return time.time() + self.ahead


def test_a_machine_whose_clock_runs_fast_waits_for_a_live_holder(
    machine: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A live holder's lease, renewed a moment ago; this machine's clock is 90 s ahead (NTP
    # broken, a VM resumed). It compared the lease's expiry with its own clock and took the
    # live lease over at once; the holder then committed over this machine's edit.
    location = StoreLocation(f"s3://{machine.bucket()}/octobrain", machine.options)
    alive = {"holder": "desktop:4242:live", "expires": time.time() + LEASE_TTL_S}
    set_lease(location, alive)
    monkeypatch.setattr(lease_module, "time", _FastClock(90.0))
    with pytest.raises(StoreBusy, match="desktop:4242:live"), location.lock("write", 1.0):
        pass
    assert read_lease(location) == alive


@pytest.mark.parametrize(
    "body",
    [
        b'{"holder": "laptop:1:ab", "expi',
        b"[]",
        b'{"holder": "x", "expires": "soon"}',
        b'{"expires": null}',
        b'{"holder": "x", "expires": 1e999}',
        b"\xff\xfe",
    ],
    ids=["truncated", "list", "string-expiry", "null-expiry", "infinite-expiry", "not-utf8"],
)
def test_a_lease_object_that_is_no_lease_is_one_line_then_taken_over(
    machine: S3, monkeypatch: pytest.MonkeyPatch, body: bytes
) -> None:
    from octobrain.store import memories

    uri = f"s3://{machine.bucket()}/octobrain"
    s3_brain(machine, uri).memorize("First", "Something to keep.")
    location = StoreLocation(uri, machine.options)
    set_lease(location, body)

    monkeypatch.setattr(memories, "LOCK_TIMEOUT_S", 0.5)
    with pytest.raises(StoreBusy) as busy:
        s3_brain(machine, uri).memorize("Second", "Written while the lease is garbage.")
    message = str(busy.value)
    assert "\n" not in message
    assert f"the lease object {LEASE_KEY} is not a valid lease" in message
    assert "unknown holder" in message or "locked by x" in message

    # Held by an unknown holder, it expires like a crashed holder's: unchanged for a TTL.
    monkeypatch.setattr(lease_module, "LEASE_TTL_S", 1.0)
    monkeypatch.setattr(memories, "LOCK_TIMEOUT_S", 10.0)
    second, _ = s3_brain(machine, uri).memorize("Second", "Written once it is taken over.")
    assert s3_brain(machine, uri).get(second.id).title == "Second"
    with pytest.raises(FileNotFoundError):
        read_lease(location)  # released after the write


def test_a_commit_under_a_lease_that_may_be_lost_is_refused(
    machine: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every commit made under the lease checks it just before committing: the heartbeat saw
    # it taken over, or it was not renewed within its time (this process paused).
    uri = f"s3://{machine.bucket()}/octobrain"
    brain = s3_brain(machine, uri)
    brain.memorize("First", "Something to keep.")
    location = brain.store.location

    real = lease_module._elapsed
    with brain.store.write_lock():
        # Paused for 61 s, the heartbeat not yet run: another writer may hold it by now.
        monkeypatch.setattr(lease_module, "_elapsed", lambda: real() + LEASE_TTL_S + 1)
        with pytest.raises(StoreBusy, match="was not renewed for 61 s") as lost:
            brain.memorize("Second", "Written under a lease that ran out.")
        assert "nothing was changed" in str(lost.value) and "\n" not in str(lost.value)
    monkeypatch.setattr(lease_module, "_elapsed", real)

    monkeypatch.setattr(lease_module, "LEASE_TTL_S", 0.4)  # a heartbeat every 0.1 s
    with brain.store.write_lock():
        taker = {"holder": "desktop:7:taker", "expires": time.time() + 60}
        set_lease(location, taker)  # taken over meanwhile
        time.sleep(0.5)  # (the heartbeat's compare-and-swap is refused)
        with pytest.raises(StoreBusy, match="was taken over by another writer"):
            brain.update(brain.recent()[0].id, add_tags=["late"])
        with pytest.raises(StoreBusy, match="was taken over by another writer"):
            brain.memorize("Third", "Written under another writer's lease.")
    assert read_lease(location) == taker  # left to its holder
    assert [m.title for m in brain.recent()] == ["First"]
    assert brain.get(brain.recent()[0].id).tags == []


_PAUSED = textwrap.dedent(
    """
    import os, signal, sys
    import octobrain.store.lease as lease
    lease.LEASE_TTL_S = float(sys.argv[1])  # the product's 60 s, shortened for the test
    from octobrain.errors import StorageError
    from octobrain.memory.brain import Brain
    role, memory_id, marker = sys.argv[2:5]
    brain = Brain("github.com/acme/api")
    if role == "holder":
        embed = brain.embedder.embed_documents
        def paused(texts):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGSTOP)  # a laptop lid closed, a VM paused
            return embed(texts)
        brain.embedder.embed_documents = paused
        try:
            brain.update(memory_id, content="Deploys go out on Tuesdays and Thursdays.")
        except StorageError as exc:
            print(exc, flush=True)
            sys.exit(3)
    else:
        brain.update(memory_id, add_tags=["owner-team-b"], importance=0.9)
    print("acknowledged", flush=True)
    """
)


def test_a_holder_paused_past_its_lease_does_not_overwrite_the_next_writers_edit(
    machine: S3, tmp_path: Path
) -> None:
    # The holder read the row, then stopped (SIGSTOP) past the lease's TTL inside `update`;
    # another machine took the lease over and committed an edit. Resumed, the holder wrote
    # its stale row over that acknowledged edit.
    import signal

    uri = f"s3://{machine.bucket()}/octobrain"
    note, _ = s3_brain(machine, uri).memorize("Deploys", "Deploys go out on Tuesdays.")
    marker = tmp_path / "paused"
    ttl = "3"

    def run(role: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", _PAUSED, ttl, role, note.id, str(marker)],
            env={**os.environ, **machine.env(uri, tmp_path / role)},
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    holder = run("holder")
    try:
        until_paused(holder, marker)
        time.sleep(0.3)
        taker = run("taker")
        out, err = taker.communicate(timeout=120)
        assert taker.returncode == 0 and "acknowledged" in out, err[-2000:]
    finally:
        holder.send_signal(signal.SIGCONT)
    out, err = holder.communicate(timeout=120)
    assert holder.returncode == 3, (out, err[-2000:])
    assert "lease" in out and "nothing was changed" in out and len(out.splitlines()) == 1, out

    reader = s3_brain(machine, uri)
    final = reader.get(note.id)
    assert "owner-team-b" in final.tags and final.importance == pytest.approx(0.9)
    assert final.content == "Deploys go out on Tuesdays."  # the refused edit left no trace
