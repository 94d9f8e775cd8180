"""A team's shared store on S3: a real S3 + DynamoDB endpoint (moto in server mode) on loopback.

Each "machine" is a process with its own data directory (its own embedding cache, config and
sleep state) and no shared filesystem with the others; they meet only through the storage URI.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.config import Config, StorageConfig, load_config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput, StorageError
from octobrain.memory.brain import Brain
from octobrain.memory.sleep_startup import start_background_sleep
from octobrain.store import lease as lease_module
from octobrain.store import seen
from octobrain.store.lease import LEASE_TTL_S, StoreBusy
from octobrain.store.location import StoreLocation

SCOPE = "github.com/acme/api"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}


class S3:
    """The loopback endpoint: one bucket per test, and the environment a machine needs."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.options = {"aws_endpoint": endpoint, "region": "us-east-1", "allow_http": "true"}

    def client(self, service: str) -> object:
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1")

    def bucket(self) -> str:
        name = f"team-{uuid.uuid4().hex[:10]}"
        self.client("s3").create_bucket(Bucket=name)  # type: ignore[attr-defined]
        return name

    def commit_table(self) -> str:
        """A DynamoDB table shaped as LanceDB's `s3+ddb://` commit store expects."""
        name = f"commits-{uuid.uuid4().hex[:8]}"
        self.client("dynamodb").create_table(  # type: ignore[attr-defined]
            TableName=name,
            KeySchema=[
                {"AttributeName": "base_uri", "KeyType": "HASH"},
                {"AttributeName": "version", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "base_uri", "AttributeType": "S"},
                {"AttributeName": "version", "AttributeType": "N"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        return name

    def env(self, uri: str, data_dir: Path, **extra: str) -> dict[str, str]:
        options = ",".join(f"{k}={v}" for k, v in {**self.options, **extra}.items())
        return {
            **CREDENTIALS,
            "OCTOBRAIN_STORAGE_URI": uri,
            "OCTOBRAIN_STORAGE_OPTIONS": options,
            "OCTOBRAIN_DATA_DIR": str(data_dir),
            "OCTOBRAIN_CONFIG_PATH": str(data_dir / "config.toml"),
            "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
            "OCTOBRAIN_CONSOLIDATION_SLEEP_ENABLED": "false",
        }


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield S3(f"http://127.0.0.1:{server.get_host_and_port()[1]}")
    finally:
        server.stop()


@pytest.fixture()
def machine(s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> S3:
    """This test process as one machine of the team (credentials in its environment)."""
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "here"))
    monkeypatch.setenv("OCTOBRAIN_CONFIG_PATH", str(tmp_path / "here" / "config.toml"))
    return s3


def _brain(s3: S3, uri: str, **extra: str) -> Brain:
    options = tuple(f"{k}={v}" for k, v in {**s3.options, **extra}.items())
    config = Config(storage=StorageConfig(options=options))
    return Brain(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)


def test_history_names_the_upkeep_versions_of_a_store_on_s3(
    machine: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What made a version is read from the transaction Lance records, in the bucket too.
    from octobrain.store import upkeep

    monkeypatch.setattr(upkeep, "SCALAR_INDEX_MIN_ROWS", 1)
    laptop = _brain(machine, f"s3://{machine.bucket()}/octobrain")
    for i in (1, 2, 3):
        laptop.memorize(f"Deploy rule {i}", f"Production deploys need review {i}.")
    laptop.store.compact()
    notes = [v.note for v in laptop.store.history(10)]
    assert notes[:6] == [
        "is the store's upkeep: the table's files compacted",
        "is the store's upkeep: a compaction of the table's files begun",
        *["is the store's upkeep: a search index built, updated or dropped"] * 4,
    ]
    assert set(notes[6:]) == {""}


def test_a_second_machine_sees_the_first_ones_memories(machine: S3) -> None:
    uri = f"s3://{machine.bucket()}/octobrain"
    laptop, desktop = _brain(machine, uri), _brain(machine, uri)
    note, _ = laptop.memorize("Deploys", "Production deploys go out on Tuesdays after review.")
    assert [h.memory.id for h in laptop.remember("when do deploys go out").hits][:1] == [note.id]
    assert note.id in {h.memory.id for h in desktop.remember("production deploys").hits}

    # Consolidation across machines: near-duplicates written on one, merged on the other.
    text = "The public API rate limit is 100 requests per minute per token"
    dupes = [laptop.memorize(f"Rate limit {i}", f"{text}{'.' * i}")[0] for i in range(1, 4)]
    report = desktop.sleep_consolidate()  # under the write lease: reads the latest commit
    assert len(report.consolidations) == 1
    parent = report.consolidations[0].parent.id
    _catch_up()
    assert laptop.remember("API rate limit").hits[0].memory.id == parent
    assert {m.id for m in dupes} <= {m.id for m in report.consolidations[0].members}

    assert desktop.forget([note.id], confirm=True).deleted == 1
    _catch_up()
    assert note.id not in {h.memory.id for h in laptop.remember("production deploys").hits}
    # Found from the store's change record (one object beside the tables), not every row.
    assert laptop.retriever.corpus.last_catch_up == "changes"


def _catch_up() -> None:
    """Wait out `storage.remote_refresh_ms` (default 1 s): by then every machine reads a write."""
    time.sleep(StorageConfig().remote_refresh_ms / 1000 + 0.1)


_WRITER = textwrap.dedent(
    """
    import json, sys
    from octobrain.memory.brain import Brain
    name, shared, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    brain = Brain("github.com/acme/api")
    for i in range(count):
        memory, _ = brain.memorize(f"Note zq{name}n{i}", f"Finding zq{name}n{i} from {name}.")
        print(json.dumps({"id": memory.id, "marker": f"zq{name}n{i}"}), flush=True)
        brain.update(shared, add_files=[f"{name}-{i}"])
        print(json.dumps({"file": f"{name}-{i}"}), flush=True)
    """
)


@pytest.mark.parametrize("commit_store", ["conditional-put", "dynamodb"])
def test_writers_on_separate_machines_lose_nothing(
    machine: S3, tmp_path: Path, commit_store: str
) -> None:
    bucket = machine.bucket()
    extra: dict[str, str] = {}
    if commit_store == "dynamodb":
        uri = f"s3+ddb://{bucket}/octobrain?ddbTableName={machine.commit_table()}"
        extra["dynamodb_endpoint"] = machine.endpoint
    else:
        uri = f"s3://{bucket}/octobrain"
    shared, _ = _brain(machine, uri, **extra).memorize("Shared", "Every machine tags this one.")
    writers, count = 3, 5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, f"m{w}", shared.id, str(count)],
            env={**os.environ, **machine.env(uri, tmp_path / f"machine{w}", **extra)},
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    acknowledged: dict[str, str] = {}
    files: set[str] = set()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        for line in out.splitlines():
            record = json.loads(line)
            if "id" in record:
                acknowledged[record["id"]] = record["marker"]
            else:
                files.add(record["file"])
    assert len(acknowledged) == writers * count

    reader = _brain(machine, uri, **extra)
    rows = reader.store.scan("true", columns=["id", "title", "related_files"])
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == writers * count + 1  # nothing lost, nothing doubled
    assert set(acknowledged) <= set(ids)
    assert set(reader.get(shared.id).related_files) == files  # every concurrent edit survived
    for mid, marker in acknowledged.items():
        assert mid in {h.memory.id for h in reader.remember(marker, min_relevance=0.0).hits}
    if commit_store == "conditional-put":
        # Each writer recorded the version it committed, in turn: the last is the newest.
        location = StoreLocation(uri, machine.options)
        newest = int(location.connect().open_table("memories").version)
        assert location.high_water.recorded("memories") == newest


def test_an_edit_starts_from_the_latest_commit_even_when_reads_may_lag(machine: S3) -> None:
    uri = f"s3://{machine.bucket()}/octobrain"
    laptop, desktop = _brain(machine, uri), _brain(machine, uri)
    shared, _ = laptop.memorize("Shared note", "Both machines tag this one.")
    assert laptop.get(shared.id).related_files == []  # the laptop's view is now fresh...
    desktop.update(shared.id, add_files=["desktop.py"])
    laptop.update(shared.id, add_files=["laptop.py"])  # ...and lags the desktop's edit
    assert set(desktop.get(shared.id).related_files) >= {"desktop.py"}
    _catch_up()
    assert set(laptop.get(shared.id).related_files) == {"desktop.py", "laptop.py"}


def test_accesses_are_counted_off_the_remember_path_and_flushed_at_exit(
    machine: S3, tmp_path: Path
) -> None:
    uri = f"s3://{machine.bucket()}/octobrain"
    brain = _brain(machine, uri)
    note, _ = brain.memorize("Backups", "Nightly backups run at 02:00 UTC to the cold bucket.")
    assert brain.remember("nightly backups").hits[0].memory.id == note.id
    deadline = time.monotonic() + 30
    while brain.store.scan(f"id = '{note.id}'", columns=["access_count"])[0]["access_count"] < 1:
        assert time.monotonic() < deadline, "the queued access was never committed"
        time.sleep(0.2)

    # A CLI call exits right after answering: its queued access is committed on the way out.
    other, _ = brain.memorize("Restores", "Restore drills happen on the first Monday monthly.")
    done = subprocess.run(
        [sys.executable, "-m", "octobrain", "memory", "--scope", SCOPE, "remember", "drills"],
        env={**os.environ, **machine.env(uri, tmp_path / "cli")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and other.id in done.stdout, done.stderr
    # (this process's handle reads a bucket up to `remote_refresh_ms` late: a CLI call that
    # took less than that would otherwise be read as not there yet)
    brain.store.refresh()
    rows = brain.store.scan(f"id = '{other.id}'", columns=["access_count"])
    assert rows[0]["access_count"] == 1


def test_knowledge_indexed_on_one_machine_is_searchable_on_another(
    machine: S3, tmp_path: Path
) -> None:
    from octobrain.knowledge import Knowledge

    uri = f"s3://{machine.bucket()}/octobrain"
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\n## Failover\n\nPromote the replica in eu-west-2 first.\n")
    config = _brain(machine, uri).config

    def knowledge() -> Knowledge:
        return Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)

    report = knowledge().index(str(doc))
    assert report.embedded >= 1
    hits = knowledge().search("promote the replica").hits
    assert hits and hits[0].uri.endswith("runbook.md") and "eu-west-2" in hits[0].text


LEASE_KEY = "_octobrain/locks/write.json"


def _set_lease(location: StoreLocation, lease: dict[str, Any] | bytes) -> None:
    """Put the write lease object as another machine would (a record, or raw bytes)."""
    import obstore

    body = lease if isinstance(lease, bytes) else json.dumps(lease).encode()
    obstore.put(location.objects(), LEASE_KEY, body)


def _lease(location: StoreLocation) -> Any:
    """The write lease object's record (`FileNotFoundError` once released)."""
    import obstore

    return json.loads(bytes(obstore.get(location.objects(), LEASE_KEY).bytes()))


def test_the_write_lease_waits_for_a_live_holder_and_takes_over_a_dead_ones(
    machine: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = StoreLocation(f"s3://{machine.bucket()}/octobrain", machine.options)
    alive = {"holder": "desktop:4242:live", "expires": time.time() + LEASE_TTL_S}
    _set_lease(location, alive)
    with pytest.raises(StoreBusy, match="desktop:4242:live"), location.lock("write", 0.3):
        pass

    # Dead for longer than any clock could be wrong: taken over at once.
    dead = {
        "holder": "desktop:4242:crashed",
        "expires": time.time() - lease_module.CLOCK_TOLERANCE_S - 1,
    }
    _set_lease(location, dead)
    started = time.monotonic()
    with location.lock("write", 5), location.lock("write", 5):  # re-entrant in one process
        assert _lease(location)["holder"] != dead["holder"]
    assert time.monotonic() - started < 2
    with pytest.raises(FileNotFoundError):
        _lease(location)  # released: the next writer creates it at once

    # Expired a second ago by this machine's clock, which may be wrong: taken over only once
    # the object stayed unchanged for a whole TTL on this machine's own clock.
    monkeypatch.setattr(lease_module, "LEASE_TTL_S", 1.5)
    recent = {"holder": "desktop:4242:stopped", "expires": time.time() - 1}
    _set_lease(location, recent)
    with pytest.raises(StoreBusy, match="desktop:4242:stopped"), location.lock("write", 0.5):
        pass
    started = time.monotonic()
    with location.lock("write", 5):
        assert _lease(location)["holder"] != recent["holder"]
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
    _set_lease(location, alive)
    monkeypatch.setattr(lease_module, "time", _FastClock(90.0))
    with pytest.raises(StoreBusy, match="desktop:4242:live"), location.lock("write", 1.0):
        pass
    assert _lease(location) == alive


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
    _brain(machine, uri).memorize("First", "Something to keep.")
    location = StoreLocation(uri, machine.options)
    _set_lease(location, body)

    monkeypatch.setattr(memories, "LOCK_TIMEOUT_S", 0.5)
    with pytest.raises(StoreBusy) as busy:
        _brain(machine, uri).memorize("Second", "Written while the lease is garbage.")
    message = str(busy.value)
    assert "\n" not in message
    assert f"the lease object {LEASE_KEY} is not a valid lease" in message
    assert "unknown holder" in message or "locked by x" in message

    # Held by an unknown holder, it expires like a crashed holder's: unchanged for a TTL.
    monkeypatch.setattr(lease_module, "LEASE_TTL_S", 1.0)
    monkeypatch.setattr(memories, "LOCK_TIMEOUT_S", 10.0)
    second, _ = _brain(machine, uri).memorize("Second", "Written once it is taken over.")
    assert _brain(machine, uri).get(second.id).title == "Second"
    with pytest.raises(FileNotFoundError):
        _lease(location)  # released after the write


def test_a_commit_under_a_lease_that_may_be_lost_is_refused(
    machine: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every commit made under the lease checks it just before committing: the heartbeat saw
    # it taken over, or it was not renewed within its time (this process paused).
    uri = f"s3://{machine.bucket()}/octobrain"
    brain = _brain(machine, uri)
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
        _set_lease(location, taker)  # taken over meanwhile
        time.sleep(0.5)  # (the heartbeat's compare-and-swap is refused)
        with pytest.raises(StoreBusy, match="was taken over by another writer"):
            brain.update(brain.recent()[0].id, add_tags=["late"])
        with pytest.raises(StoreBusy, match="was taken over by another writer"):
            brain.memorize("Third", "Written under another writer's lease.")
    assert _lease(location) == taker  # left to its holder
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


def until_paused(holder: subprocess.Popen[str], marker: Path) -> None:
    """Wait until the process `holder` made `marker`, as it stops itself (SIGSTOP)."""
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert holder.poll() is None, holder.communicate()
        assert time.monotonic() < deadline, "the holder never reached its pause"
        time.sleep(0.05)


def test_a_holder_paused_past_its_lease_does_not_overwrite_the_next_writers_edit(
    machine: S3, tmp_path: Path
) -> None:
    # The holder read the row, then stopped (SIGSTOP) past the lease's TTL inside `update`;
    # another machine took the lease over and committed an edit. Resumed, the holder wrote
    # its stale row over that acknowledged edit.
    import signal

    uri = f"s3://{machine.bucket()}/octobrain"
    note, _ = _brain(machine, uri).memorize("Deploys", "Deploys go out on Tuesdays.")
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

    reader = _brain(machine, uri)
    final = reader.get(note.id)
    assert "owner-team-b" in final.tags and final.importance == pytest.approx(0.9)
    assert final.content == "Deploys go out on Tuesdays."  # the refused edit left no trace


def test_a_sleep_pass_is_shared_by_the_whole_team(machine: S3, tmp_path: Path) -> None:
    uri = f"s3://{machine.bucket()}/octobrain"
    laptop = _brain(machine, uri)
    laptop.memorize("Seed note", "Something to look at.")
    thread = start_background_sleep(laptop, marker_dir=tmp_path / "laptop")
    assert thread is not None
    thread.join(timeout=120)
    record = laptop.store.location.read_json(next(_sleep_records(laptop)))
    assert record is not None and record["scope"] == SCOPE

    # Another machine (its own local state) finds the pass already done for today.
    from octobrain.memory import sleep_startup

    sleep_startup._started.clear()
    desktop = _brain(machine, uri)
    desktop.memorize("Later note", "Written after the pass.")
    thread = start_background_sleep(desktop, marker_dir=tmp_path / "desktop")
    assert thread is not None  # the record lives in the bucket: read in the background
    thread.join(timeout=120)
    assert laptop.store.location.read_json(next(_sleep_records(laptop))) == record
    assert not (tmp_path / "desktop").exists()  # nothing about it kept on this machine


def _sleep_records(brain: Brain) -> Iterator[str]:
    import obstore

    for batch in obstore.list(brain.store.location.objects(), "_octobrain/sleep"):
        for meta in batch:
            yield str(meta["path"]).removeprefix("_octobrain/")


def test_migrate_copies_a_local_store_to_s3_and_back(machine: S3, tmp_path: Path) -> None:
    local = tmp_path / "here" / "db"
    brain = Brain(SCOPE, config=load_config(), embedder=get_embedder("hash:64"), uri=local)
    first, _ = brain.memorize("First", "The first fact.")
    second, _ = brain.memorize(
        "Second",
        "The second fact.",
        related_to=[{"target_id": first.id, "relationship_type": "extends"}],
    )
    uri = f"s3://{machine.bucket()}/octobrain"
    import obstore

    # A store deleted here but for its record of versions, far above the copy's.
    leftover = StoreLocation(uri, machine.options)
    obstore.put(leftover.objects(), MARKS, json.dumps({"memories": 99}).encode())
    env = {
        "OCTOBRAIN_STORAGE_URI": str(local),
        "OCTOBRAIN_STORAGE_OPTIONS": ",".join(f"{k}={v}" for k, v in machine.options.items()),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
    }
    runner = CliRunner()
    up = runner.invoke(main, ["memory", "migrate", "--to", uri, "--format", "json"], env=env)
    assert up.exit_code == 0, up.output
    assert json.loads(up.stdout)["tables"] == {"memories": 2, "relationships": 1}

    remote = _brain(machine, uri)
    assert {h.memory.id for h in remote.remember("fact", min_relevance=0.0).hits} == {
        first.id,
        second.id,
    }
    assert [(e.source_id, e.target_id) for e in remote.store.all_relationships()] == [
        (second.id, first.id)
    ]

    again = runner.invoke(main, ["memory", "migrate", "--to", uri], env=env)
    assert again.exit_code == 2
    assert "to: must be an empty location" in again.stderr

    back = tmp_path / "back"
    env_back = {**env, "OCTOBRAIN_STORAGE_URI": uri}
    down = runner.invoke(main, ["memory", "migrate", "--to", str(back)], env=env_back)
    assert down.exit_code == 0, down.output
    home = Brain(SCOPE, config=load_config(), embedder=get_embedder("hash:64"), uri=back)
    assert home.get(second.id).content == "The second fact."


def test_storage_settings_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCTOBRAIN_STORAGE_URI", "ftp://files.example.com/octobrain")
    with pytest.raises(InvalidInput, match="storage.uri|OCTOBRAIN_STORAGE_URI"):
        load_config(tmp_path / "none.toml")
    monkeypatch.setenv("OCTOBRAIN_STORAGE_URI", "s3://bucket/octobrain")
    monkeypatch.setenv("OCTOBRAIN_STORAGE_OPTIONS", "region=us-east-1,allow_http")
    with pytest.raises(InvalidInput, match="key=value"):
        load_config(tmp_path / "none.toml")


@pytest.mark.parametrize(
    ("uri", "typo", "like"),
    [
        ("s3://bucket/octobrain", "aws_acess_key_id", "aws_access_key_id, region, aws_endpoint"),
        ("s3+ddb://bucket/octobrain?ddbTableName=t", "regoin", "aws_access_key_id, region"),
        ("gs://bucket/octobrain", "google_service_acount", "google_service_account, google_"),
        ("az://container/octobrain", "azure_storage_acount_name", "azure_storage_account_name"),
    ],
)
def test_a_storage_option_the_object_store_does_not_take_is_named(
    uri: str, typo: str, like: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: LanceDB ignored it without a word (the bucket then refused the requests as
    # unsigned), and the lease and records failed later on "Configuration key: … is not valid".
    scheme = uri.split("://")[0].split("+")[0]
    location = StoreLocation(uri, {"allow_http": "true", typo: "x", "client_max_retries": "1"})
    with pytest.raises(InvalidInput) as refused:
        location.connect()
    assert str(refused.value).startswith(
        f"storage.options.{typo}: is not an option of {scheme}:// stores (the object_store "
        f"crate's keys, such as {like}"
    )
    assert str(refused.value).endswith("); check its spelling")
    # Keys LanceDB or the HTTP client take, and the object store's own, are not refused.
    taken = {"region": "eu-west-1", "dynamodb_endpoint": "http://x", "timeout": "5s"}
    StoreLocation("s3://bucket/octobrain", {**taken, "AWS_ENDPOINT": "http://x"}).objects()
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_STORAGE_URI", uri)
    monkeypatch.setenv("OCTOBRAIN_STORAGE_OPTIONS", f"{typo}=x")
    done = CliRunner().invoke(main, ["memory", "--scope", SCOPE, "recent"])
    assert done.exit_code == 2
    assert done.stderr.splitlines()[-1].startswith(f"error: storage.options.{typo}: is not")


@pytest.mark.parametrize(
    ("option", "rule"),
    [
        ("client_max_retries=abc", "client_max_retries must be a whole number of retries"),
        ("client_max_retries=-1", "client_max_retries must be a whole number of retries"),
        ("client_retry_timeout=20s", "client_retry_timeout must be a number of seconds"),
        # (before: read into a dict, the last one taken without a word)
        ("REGION=eu-west-1", '_OPTIONS: names "REGION" twice; give each key once'),
    ],
)
def test_the_retry_options_octobrain_reads_are_checked_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, rule: str
) -> None:
    # Taken as given, they were read with int()/float() at the first lease or record request:
    # a traceback (ValueError) in the middle of a command.
    monkeypatch.setenv("OCTOBRAIN_STORAGE_URI", "s3://bucket/octobrain")
    monkeypatch.setenv("OCTOBRAIN_STORAGE_OPTIONS", f"region=us-east-1,{option}")
    with pytest.raises(InvalidInput, match=rule):
        load_config(tmp_path / "none.toml")
    monkeypatch.setenv("OCTOBRAIN_STORAGE_OPTIONS", "client_max_retries=5,client_retry_timeout=2.5")
    assert load_config(tmp_path / "none.toml").storage.options


def _remember_in_a_process(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`octobrain memory remember` of the store `env` names, as a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "octobrain", "memory", "--scope", SCOPE, "remember", "anything"],
        env={**os.environ, **CREDENTIALS, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_unreachable_bucket_is_one_clear_error(tmp_path: Path) -> None:
    from tests.server_support import free_port

    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = S3(endpoint).env("s3://team/octobrain", tmp_path / "machine")
    done = _remember_in_a_process(env, tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == "error: store: cannot open s3://team/octobrain: Connection refused"


def test_a_migrate_cut_short_leaves_a_store_that_refuses_to_open_until_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Killed after its first table: the copy holds part of the store. Pointed at it, every
    # command must say so, never answer as a store with fewer rows (`total: 0`).
    from octobrain.errors import StorageError
    from octobrain.store import migrate as migrate_module
    from octobrain.store.doctor import diagnose

    source = tmp_path / "here" / "db"
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=source)
    first, _ = brain.memorize("First", "The first fact.")
    brain.memorize("Second", "The second fact.", related_to=[{"target_id": first.id}])
    real, checked = migrate_module._verify, []

    def cut_short(*args: object) -> None:
        checked.append(1)
        if len(checked) == 2:  # the second table copied, then the process is stopped
            raise KeyboardInterrupt
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(migrate_module, "_verify", cut_short)
    target = StoreLocation(str(tmp_path / "there"))
    with pytest.raises(KeyboardInterrupt):
        migrate_module.migrate(StoreLocation(str(source)), target)
    monkeypatch.setattr(migrate_module, "_verify", real)
    copy = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "there")
    with pytest.raises(StorageError, match="`memory migrate` from .* was cut short"):
        copy.recent()
    assert any("was cut short" in p.problem for p in diagnose(target).problems)
    other = tmp_path / "other" / "db"
    Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=other).memorize(
        "Other store", "Another fact."
    )
    with pytest.raises(InvalidInput, match="must be an empty location.*was cut short"):
        migrate_module.migrate(StoreLocation(str(other)), target)  # (another store's copy)
    # The same migrate again starts the copy over: a store that opens, its tables recorded.
    migrate_module.migrate(StoreLocation(str(source)), target)
    assert diagnose(target).ok and diagnose(target).manifest == "ok"
    whole = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "there")
    assert len(whole.recent()) == 2


def test_migrate_refuses_a_damaged_store_instead_of_copying_what_it_reads(tmp_path: Path) -> None:
    # The newest edge version lost: listed and read as they were, the tables made a copy with
    # the edges `forget` had removed (to a memory that is gone), "verified", `doctor` ok.
    from octobrain.errors import StorageError
    from octobrain.store.migrate import migrate

    source = tmp_path / "here" / "db"
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=source)
    first, _ = brain.memorize("First", "The first fact.")
    brain.memorize("Second", "The second fact.", related_to=[{"target_id": first.id}])
    brain.forget([first.id], confirm=True)
    versions = sorted((source / "relationships.lance" / "_versions").glob("*.manifest"))
    versions[0].unlink()  # (names count down: the first is the newest)
    target = StoreLocation(str(tmp_path / "there"))
    with pytest.raises(StorageError, match=r"is damaged: relationships: .*nothing was copied"):
        migrate(StoreLocation(str(source)), target)
    assert not (tmp_path / "there").exists() or not list((tmp_path / "there").glob("*.lance"))


MARKS = "_octobrain/versions.json"  # the store's record of each table's newest version


def _objects(location: StoreLocation, prefix: str) -> list[str]:
    """The keys under `prefix` of a bucket store."""
    import obstore

    return [str(m["path"]) for batch in obstore.list(location.objects(), prefix) for m in batch]


def _delete_newest_version(location: StoreLocation, table: str) -> None:
    """Delete a table's newest version manifest from the bucket (a lifecycle rule, a hand)."""
    import obstore

    keys = _objects(location, f"{table}.lance/_versions/")
    numbers = {int(k.rsplit("/", 1)[1].split(".")[0]): k for k in keys if k.endswith(".manifest")}
    # (LanceDB's names count down from 2**64 - 1: the smallest number is the newest version)
    obstore.delete(location.objects(), numbers[min(numbers)])


def _cli_env(s3: S3, uri: str) -> dict[str, str]:
    return {
        "OCTOBRAIN_STORAGE_URI": uri,
        "OCTOBRAIN_STORAGE_OPTIONS": ",".join(f"{k}={v}" for k, v in s3.options.items()),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
        "OCTOBRAIN_CONSOLIDATION_SLEEP_ENABLED": "false",
    }


def test_a_deleted_newest_version_in_a_bucket_is_refused_until_put_back_or_accepted(
    machine: S3,
) -> None:
    # Lance leaves no version hint in a bucket: the version before was served (the second
    # memory gone, `doctor` ok) and the next write buried the loss.
    from octobrain.store.manifest import TableDamaged

    uri = f"s3://{machine.bucket()}/octobrain"
    laptop = _brain(machine, uri)
    laptop.memorize("First", "The first acknowledged memory about deploys.")
    second, _ = laptop.memorize("Second", "The second acknowledged memory about rate limits.")
    location = laptop.store.location
    newest = int(laptop.store.memories.version)
    _delete_newest_version(location, "memories")

    with pytest.raises(TableDamaged) as refused:
        _brain(machine, uri).recent()
    line = str(refused.value)
    assert "\n" not in line
    assert f"table 'memories' in {uri} is damaged" in line
    assert f"version {newest} committed" in line
    assert f"the newest version that opens is {newest - 1}" in line
    assert f"delete the object {uri}/_octobrain/versions.json" in line
    runner = CliRunner()
    doctor = runner.invoke(main, ["doctor"], env=_cli_env(machine, uri))
    assert doctor.exit_code == 1
    assert f"memories: version {newest} committed" in doctor.output

    # Accepting the loss is the one step the line names; the store then opens and writes.
    import obstore

    obstore.delete(location.objects(), MARKS)
    desktop = _brain(machine, uri)
    assert second.id not in {m.id for m in desktop.recent()}
    desktop.memorize("Third", "A memory written after the loss was accepted.")
    assert runner.invoke(main, ["doctor"], env=_cli_env(machine, uri)).exit_code == 0

    # A record that is no record guards nothing (no crash), and the next write makes it whole.
    obstore.put(location.objects(), MARKS, b"\xff not json")
    _brain(machine, uri).memorize("Fourth", "Written over a garbled record.")
    assert StoreLocation(uri, machine.options).high_water.recorded("memories") == int(
        _brain(machine, uri).store.memories.version
    )


def test_team_writes_restores_reembeds_and_recreates_never_look_like_a_lost_version(
    machine: S3, tmp_path: Path
) -> None:
    import obstore

    from octobrain.knowledge import Knowledge
    from octobrain.memory.transfer import reembed

    uri = f"s3://{machine.bucket()}/octobrain"
    location = StoreLocation(uri, machine.options)
    runner = CliRunner()

    def marks() -> dict[str, int]:
        return dict(json.loads(bytes(obstore.get(location.objects(), MARKS).bytes())))

    def newest(table: str) -> int:
        return int(location.connect().open_table(table).version)

    def doctor(*args: str) -> int:
        return runner.invoke(main, ["doctor", *args], env=_cli_env(machine, uri)).exit_code

    laptop, desktop = _brain(machine, uri), _brain(machine, uri)
    first, _ = laptop.memorize("First", "Deploys go out on Tuesdays.")
    link = [{"target_id": first.id}]
    desktop.memorize("Second", "The rate limit is 100 per minute.", related_to=link)
    laptop.update(first.id, add_files=["deploy.py"])  # (its view lags the desktop's write)
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nPromote the replica in eu-west-2 first.\n")
    Knowledge(SCOPE, config=laptop.config, embedder=get_embedder("hash:64"), uri=uri).index(
        str(doc)
    )
    # Every commit under a lease is recorded, by either lease: the mark is the newest version.
    tables = ("memories", "relationships", "knowledge_sources", "knowledge_chunks")
    assert {t: marks()[t] for t in tables} == {t: newest(t) for t in tables}

    laptop.store.restore(laptop.store.history(2)[1].version)  # a new, higher version
    moved = Brain(SCOPE, config=laptop.config, embedder=get_embedder("hash:32"), uri=uri)
    assert reembed(moved) == 2  # an overwrite: a new, higher version too
    assert marks()["memories"] == newest("memories") and doctor() == 0

    # The knowledge tables started over by `doctor --recreate` count from 1 again.
    _delete_newest_version(location, "knowledge_chunks")
    assert doctor() == 1
    assert doctor("--recreate", "knowledge") == 0
    knowledge = Knowledge(SCOPE, config=laptop.config, embedder=get_embedder("hash:64"), uri=uri)
    assert knowledge.search("replica").hits == []  # made again, empty, at version 1
    assert doctor() == 0
    knowledge.index(str(doc))
    assert marks()["knowledge_chunks"] == newest("knowledge_chunks") and doctor() == 0

    # The whole prefix deleted: the store gone whole is refused (this machine used it), and
    # made again once its mark is deleted, as the error says; a version mark gone guards nothing.
    for key in _objects(location, ""):
        obstore.delete(location.objects(), key)
    with pytest.raises(StorageError, match="holds no store, yet this machine used one there"):
        Brain(SCOPE, config=laptop.config, embedder=get_embedder("hash:64"), uri=uri).stats()
    seen.forget(uri)
    again = Brain(SCOPE, config=laptop.config, embedder=get_embedder("hash:64"), uri=uri)
    again.memorize("Fresh", "A store made again at the same place.")
    assert marks()["memories"] == newest("memories") and doctor() == 0


def test_s3_ddb_keeps_no_mark_of_its_own(machine: S3) -> None:
    # Its DynamoDB table names the newest version already: a lost manifest fails the open.
    bucket = machine.bucket()
    uri = f"s3+ddb://{bucket}/octobrain?ddbTableName={machine.commit_table()}"
    brain = _brain(machine, uri, dynamodb_endpoint=machine.endpoint)
    brain.memorize("First", "Deploys go out on Tuesdays.")
    assert MARKS not in _objects(StoreLocation(f"s3://{bucket}/octobrain", machine.options), "")


def test_the_version_record_costs_one_get_per_open_and_one_put_per_write(
    machine: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import obstore

    uri = f"s3://{machine.bucket()}/octobrain"
    first, _ = _brain(machine, uri).memorize("First", "Deploys go out on Tuesdays.")
    calls: list[tuple[str, str]] = []

    def counted(method: str, real: Any) -> Any:
        def call(store: Any, path: str, *args: Any, **kwargs: Any) -> Any:
            calls.append((method, path))
            return real(store, path, *args, **kwargs)

        return call

    monkeypatch.setattr(obstore, "get", counted("GET", obstore.get))
    monkeypatch.setattr(obstore, "put", counted("PUT", obstore.put))

    def record() -> list[str]:
        return [method for method, path in calls if path == MARKS]

    brain = _brain(machine, uri)
    assert [m.id for m in brain.recent()] == [first.id]
    assert record() == ["GET"]  # both tables checked by one read
    brain.memorize("Second", "The rate limit is 100 per minute.")
    brain.update(first.id, add_files=["deploy.py"])
    assert record() == ["GET", "PUT", "PUT"]  # one per write, after its commit

    calls.clear()
    local = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "db")
    local.memorize("Local", "A store on this machine's disk.")
    assert local.recent() and calls == []


def _index_notes(knowledge: Any, folder: Path) -> None:
    """Index four notes, `note0.md`–`note3.md`, one commit each: the chunks table reaches a
    version well above that of a table made again."""
    for n in range(4):
        doc = folder / f"note{n}.md"
        doc.write_text(f"# Note {n}\n\nPromote the replica in region {n} first.\n")
        knowledge.index(str(doc))


def _age_record(location: StoreLocation, seconds: float) -> None:
    """Make every entry of the version record say it was set `seconds` earlier than it says."""
    import obstore

    from octobrain.store.highwater import MARKS, RECORDED_AT

    key = f"_octobrain/{MARKS}"
    record = json.loads(bytes(obstore.get(location.objects(), key).bytes()))
    record[RECORDED_AT] = {name: at - seconds for name, at in record[RECORDED_AT].items()}
    obstore.put(location.objects(), key, json.dumps(record).encode())


def _an_hour_ago(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries of the version record set from now on say they were set an hour ago (as if the
    writes came an hour before what the test does next)."""
    from octobrain.store import highwater

    monkeypatch.setattr(highwater, "_clock", lambda: time.time() - 3600)


def test_tables_started_over_by_a_release_that_keeps_no_record_open_and_are_recorded_again(
    machine: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A teammate on an older release ran `doctor --recreate knowledge`: the tables were made
    # again from version 1, and the record still said the old, higher versions. Every newer
    # machine refused the healthy tables as having lost versions until someone deleted it.
    from octobrain.knowledge import Knowledge
    from octobrain.store.manifest import TableDamaged

    uri = f"s3://{machine.bucket()}/octobrain"
    brain = _brain(machine, uri)
    location = StoreLocation(uri, machine.options)
    laptop = Knowledge(SCOPE, config=brain.config, embedder=get_embedder("hash:64"), uri=uri)
    with monkeypatch.context() as earlier:  # indexed an hour before the recreate
        _an_hour_ago(earlier)
        _index_notes(laptop, tmp_path)
    stale = location.high_water.recorded("knowledge_chunks") or 0

    db = location.connect()  # the older release: dropped and made again, no record touched
    for name in ("knowledge_sources", "knowledge_chunks"):
        schema = db.open_table(name).schema
        db.drop_table(name)
        db.create_table(name, schema=schema)
    brain.memorize("Later", "Written after the recreate: the record is rewritten whole.")
    assert StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks") == stale

    desktop = Knowledge(SCOPE, config=brain.config, embedder=get_embedder("hash:64"), uri=uri)
    assert desktop.search("replica").hits == []  # opens, started over and empty
    runner, env = CliRunner(), _cli_env(machine, uri)
    assert runner.invoke(main, ["doctor"], env=env).exit_code == 0
    desktop.index(str(tmp_path / "note0.md"))  # the next write records the right version
    newest = int(location.connect().open_table("knowledge_chunks").version)
    assert newest < stale
    assert StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks") == newest
    assert [h.title for h in desktop.search("replica").hits] == ["Note 0"]

    # A version lost from the table made again is still a loss: refused, `doctor` exit 1.
    _delete_newest_version(location, "knowledge_chunks")
    with pytest.raises(TableDamaged, match=r"table 'knowledge_chunks' .* is damaged"):
        Knowledge(SCOPE, config=brain.config, embedder=get_embedder("hash:64"), uri=uri).search(
            "replica"
        )
    assert runner.invoke(main, ["doctor"], env=env).exit_code == 1


def test_a_recreate_whose_record_updates_failed_leaves_a_store_that_opens(
    machine: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `doctor --recreate` clears the tables' entries best-effort: when that write and the next
    # (the tables made again) both failed on the network, the healthy store was refused as
    # having lost versions until someone deleted the record.
    from octobrain.knowledge import Knowledge
    from octobrain.store.highwater import HighWater
    from octobrain.store.manifest import TableDamaged

    uri = f"s3://{machine.bucket()}/octobrain"
    config = _brain(machine, uri).config
    laptop = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    _index_notes(laptop, tmp_path)
    location = StoreLocation(uri, machine.options)
    stale = location.high_water.recorded("knowledge_chunks")
    _delete_newest_version(location, "knowledge_chunks")

    def unreachable(self: HighWater, versions: Any) -> None:
        raise OSError("connection reset by peer")

    runner, env = CliRunner(), _cli_env(machine, uri)
    with monkeypatch.context() as offline:
        offline.setattr(HighWater, "_record", unreachable)
        fixed = runner.invoke(main, ["doctor", "--recreate", "knowledge"], env=env)
        assert fixed.exit_code == 0, fixed.output
        made = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
        assert made.search("replica").hits == []  # made again; its record failed too
    assert StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks") == stale
    # Within the clock tolerance of the stale entry the tables are still refused (a loss and a
    # table started over cannot be told apart there); past it, they open.
    with pytest.raises(TableDamaged):
        Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri).search("rota")
    _age_record(location, 3600)

    assert runner.invoke(main, ["doctor"], env=env).exit_code == 0
    desktop = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    assert desktop.search("replica").hits == []  # opens
    desktop.index(str(tmp_path / "note1.md"))
    newest = int(location.connect().open_table("knowledge_chunks").version)
    assert StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks") == newest


def test_a_table_started_over_that_reaches_its_stale_entrys_number_still_shows_a_loss(
    machine: S3,
) -> None:
    # The stale entry says 3; the table made again reaches 3 and that commit is recorded.
    # Were the entry's old time kept, a loss of that version would pass for staleness.
    import pyarrow as pa

    from octobrain.store.versions import lost_version

    location = StoreLocation(f"s3://{machine.bucket()}/octobrain", machine.options)
    db, schema = location.connect(), pa.schema([("id", pa.string())])

    def three_versions() -> None:
        table = db.create_table("notes", schema=schema)
        table.add([{"id": "a"}])
        table.add([{"id": "b"}])
        with location.lock("write", 10):
            location.high_water.record({"notes": int(table.version)})

    three_versions()
    db.drop_table("notes")  # started over by a release that keeps no record, then written on
    three_versions()
    _delete_newest_version(location, "notes")
    lost = lost_version(
        StoreLocation(location.uri, machine.options), "notes", db.open_table("notes")
    )
    assert lost is not None and "version 3 committed" in lost.reason


def test_a_loss_is_named_when_the_recording_machines_clock_runs_minutes_slow(
    machine: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lost commit was recorded by a machine whose clock runs 4 minutes slow: its entry
    # looks older than the surviving commit. Within the clock tolerance that is no sign of a
    # table started over: the loss is still named.
    import pyarrow as pa

    from octobrain.store import highwater
    from octobrain.store.versions import lost_version

    location = StoreLocation(f"s3://{machine.bucket()}/octobrain", machine.options)
    db = location.connect()
    table = db.create_table("notes", schema=pa.schema([("id", pa.string())]))
    table.add([{"id": "a"}])
    table.add([{"id": "b"}])
    monkeypatch.setattr(highwater, "_clock", lambda: time.time() - 240)
    with location.lock("write", 10):
        location.high_water.record({"notes": int(table.version)})
    _delete_newest_version(location, "notes")
    lost = lost_version(
        StoreLocation(location.uri, machine.options), "notes", db.open_table("notes")
    )
    assert lost is not None and "version 3 committed" in lost.reason


def test_a_holder_whose_lease_was_taken_over_records_no_version_above_the_table(
    machine: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The laptop committed, then paused past its lease before recording the version; the
    # desktop took the lease over and started the knowledge tables over (`doctor --recreate`,
    # versions from 1). Resumed, the laptop's record must not put its old, higher version
    # over the new tables': a healthy store would be refused as having lost versions.
    import obstore

    from octobrain.knowledge import Knowledge

    uri = f"s3://{machine.bucket()}/octobrain"
    config = _brain(machine, uri).config
    laptop = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    _index_notes(laptop, tmp_path)
    location = laptop.kstore.location
    high_water = location.high_water
    real_record, real_elapsed = high_water.record, lease_module._elapsed
    runner = CliRunner()

    def paused_then_resumed(versions: Any) -> None:
        high_water.record = real_record  # type: ignore[method-assign]
        # Paused past the lease's time: the desktop finds it long dead and takes it over.
        monkeypatch.setattr(lease_module, "_elapsed", lambda: real_elapsed() + LEASE_TTL_S + 1)
        dead = {"holder": "laptop:1:paused", "expires": time.time() - 3600}
        obstore.put(
            location.objects(), "_octobrain/locks/knowledge.json", json.dumps(dead).encode()
        )
        # The damage the desktop repairs: versions the laptop recorded before are gone.
        recorded = StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks")
        while int(location.connect().open_table("knowledge_chunks").version) >= (recorded or 0):
            _delete_newest_version(location, "knowledge_chunks")
        env = _cli_env(machine, uri)
        done = runner.invoke(main, ["doctor", "--recreate", "knowledge"], env=env)
        assert done.exit_code == 0, done.output
        desktop = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
        desktop.index(str(tmp_path / "note0.md"))
        real_record(versions)  # the laptop resumes where it paused

    high_water.record = paused_then_resumed  # type: ignore[method-assign]
    doc = tmp_path / "late.md"
    doc.write_text("# Late\n\nWritten just before the laptop's lid closed.\n")
    laptop.index(str(doc))
    monkeypatch.setattr(lease_module, "_elapsed", real_elapsed)

    doctor = runner.invoke(main, ["doctor"], env=_cli_env(machine, uri))
    assert doctor.exit_code == 0, doctor.output
    fresh = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    assert [h.title for h in fresh.search("replica").hits]  # opens, not refused as damaged


def test_a_process_open_since_before_a_version_was_deleted_does_not_bury_it(
    machine: S3, tmp_path: Path
) -> None:
    # An MCP server stays open all day. Its next write moved its handles to the newest
    # version that opens, the one before the deleted one, and committed in the lost
    # version's place: the loss was buried, and no open ever noticed it.
    from octobrain.knowledge import Knowledge
    from octobrain.store.manifest import TableDamaged

    uri = f"s3://{machine.bucket()}/octobrain"
    server = _brain(machine, uri)
    server.memorize("First", "The first acknowledged memory about deploys.")
    second, _ = server.memorize("Second", "The second acknowledged memory about rate limits.")
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nPromote the replica in eu-west-2 first.\n")
    knowledge = Knowledge(SCOPE, config=server.config, embedder=get_embedder("hash:64"), uri=uri)
    knowledge.index(str(doc))
    location = server.store.location
    _delete_newest_version(location, "memories")
    _delete_newest_version(location, "knowledge_sources")

    with pytest.raises(
        TableDamaged, match=r"table 'memories' .* is damaged or missing \(version \d+ committed"
    ):
        server.memorize("Third", "Written by the server after the loss.")
    doc.write_text("# Runbook\n\nPromote the replica in eu-west-1 first.\n")
    with pytest.raises(TableDamaged, match=r"table 'knowledge_sources' .* is damaged"):
        knowledge.index(str(doc))
    # Still there to be noticed by every open (not buried), and the way back still works.
    with pytest.raises(TableDamaged, match="table 'memories'"):
        _brain(machine, uri).recent()
    assert CliRunner().invoke(main, ["doctor"], env=_cli_env(machine, uri)).exit_code == 1
    # Once the loss is accepted, the same process writes on (its last known record is gone).
    import obstore

    obstore.delete(location.objects(), MARKS)
    third, _ = server.memorize("Third", "Written after the loss was accepted.")
    assert [m.id for m in _brain(machine, uri).recent()][:1] == [third.id]
    assert second.id not in {m.id for m in _brain(machine, uri).recent()}


def test_a_process_open_across_another_machines_recreate_of_forgotten_turns_writes_on(
    machine: S3,
) -> None:
    # An MCP server open all day held a handle to `forgotten_turns`. Another machine started
    # the damaged table over (`doctor --recreate forgotten_turns`, as `doctor` says to): the
    # server's every write then failed ("cannot write … Not found … check free space and
    # permissions"), memorize too, until it was restarted.
    from octobrain.memory.conversation import parse_text

    uri = f"s3://{machine.bucket()}/octobrain"
    server = _brain(machine, uri)
    said = ["Deploys go out on Tuesdays.", "The rate limit is 100 a minute.", "Staging is 5433."]
    chat = "\n".join(json.dumps({"speaker": "user", "text": text}) for text in said)
    assert server.ingest(parse_text(chat, "chat")).added == 3
    turns = {m.content: m.id for m in server.recent()}
    server.forget([turns[said[0]]], confirm=True)
    server.forget([turns[said[1]]], confirm=True)
    _delete_newest_version(server.store.location, "forgotten_turns")
    runner, env = CliRunner(), _cli_env(machine, uri)
    fixed = runner.invoke(main, ["doctor", "--recreate", "forgotten_turns"], env=env)
    assert fixed.exit_code == 0 and "ok: nothing is wrong" in fixed.output, fixed.output

    written, _ = server.memorize("Written after", "The server writes on after the recreate.")
    assert server.forget([turns[said[2]]], confirm=True).deleted == 1
    assert runner.invoke(main, ["doctor"], env=env).exit_code == 0
    laptop = _brain(machine, uri)
    assert written.id in {m.id for m in laptop.recent()}
    # The turn forgotten after the recreate stays forgotten (the two before went with it).
    again = laptop.ingest(parse_text(chat, "chat"))
    assert (again.forgotten, again.added) == (1, 2)


def test_a_process_open_across_another_machines_recreate_of_knowledge_searches_and_indexes(
    machine: S3, tmp_path: Path
) -> None:
    # An MCP server open all day held handles to the knowledge tables. Another machine started
    # them over (`doctor --recreate knowledge`, as `doctor` says to): the server's every
    # search and index failed ("lance error: … Not found: …knowledge_sources.lance/data/…"),
    # until it was restarted or another process indexed something.
    from octobrain.knowledge import Knowledge

    uri = f"s3://{machine.bucket()}/octobrain"
    config = _brain(machine, uri).config
    server = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    doc = tmp_path / "runbook.md"
    for region in ("eu-west-1", "eu-west-2"):
        doc.write_text(f"# Runbook\n\nPromote the replica in {region} first.\n")
        server.index(str(doc))
    _delete_newest_version(StoreLocation(uri, machine.options), "knowledge_chunks")
    runner, env = CliRunner(), _cli_env(machine, uri)
    fixed = runner.invoke(main, ["doctor", "--recreate", "knowledge"], env=env)
    assert fixed.exit_code == 0 and "ok: nothing is wrong" in fixed.output, fixed.output

    assert server.search("replica").hits == []  # started over, empty
    server.index(str(doc))
    assert [h.title for h in server.search("replica").hits] == ["Runbook"]
    assert runner.invoke(main, ["doctor"], env=env).exit_code == 0


class _Silent:
    """An endpoint that accepts connections and never answers (a hung proxy or server)."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            while True:
                self.held.append(self.sock.accept()[0])
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_an_endpoint_that_never_answers_is_one_clear_error_after_few_tries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client retried each request for 3 minutes and LanceDB tried its open 6 times: a
    # `remember` against a hung endpoint waited 20 minutes, then printed a Rust error dump.
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    silent = _Silent()
    try:
        options = {**S3(silent.endpoint).options, "timeout": "1s"}
        location = StoreLocation("s3://team/octobrain", options)
        with pytest.raises(StorageError, match="no answer from the endpoint within the"):
            location.read_json("versions.json")  # the lease and records: 4 tries
        assert len(silent.held) == 4

        env = S3(silent.endpoint).env(
            "s3://team/octobrain", tmp_path / "machine", timeout="1s", client_max_retries="0"
        )
        done = _remember_in_a_process(env, tmp_path)
    finally:
        silent.close()
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "error: store: cannot open s3://team/octobrain: no answer from the endpoint within "
        "the request timeout (storage option timeout)"
    )
