"""A bucket that commits a write but whose answer never reaches octobrain (a timeout, a reset
connection): the writer reads back whether the commit landed instead of saying "nothing was
changed", which a caller would answer by sending the write again.

A real S3 endpoint (moto in server mode) on loopback, behind a small HTTP relay that forwards
each request and, when told, drops the connection instead of relaying the answer.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pytest

from octobrain.config import Config, StorageConfig
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from tests.relay import Relay

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
MANIFEST_PUT = r"memories\.lance/_versions/.*\.manifest"


@pytest.fixture()
def bucket_behind_relay(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Relay, str, str]]:
    """(the relay, its endpoint, a fresh bucket's URI)."""
    import boto3
    from moto.server import ThreadedMotoServer

    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        port = int(server.get_host_and_port()[1])
        name = f"team-{uuid.uuid4().hex[:10]}"
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1")
        s3.create_bucket(Bucket=name)
        relay = Relay(port)
        yield relay, f"http://127.0.0.1:{relay.start()}", f"s3://{name}/octobrain"
    finally:
        server.stop()


def _brain(endpoint: str, uri: str) -> Brain:
    options = (f"aws_endpoint={endpoint}", "region=us-east-1", "allow_http=true")
    config = Config(storage=StorageConfig(options=options))
    return Brain("github.com/acme/api", config=config, embedder=get_embedder("hash:64"), uri=uri)


def test_a_commit_whose_answer_was_lost_is_read_back_not_reported_as_unchanged(
    bucket_behind_relay: tuple[Relay, str, str],
) -> None:
    relay, endpoint, uri = bucket_behind_relay
    brain = _brain(endpoint, uri)
    brain.memorize("First note", "The first acknowledged memory about deploys.")
    relay.drop = MANIFEST_PUT
    # Before: WriteFailed "… is unknown …; nothing was changed (check free space and
    # permissions)", though the memory was stored; sent again, it was stored twice.
    second, _ = brain.memorize("Second note", "The memory whose commit answer is lost.")
    assert relay.dropped, "the relay never saw the commit"
    rows = _brain(endpoint, uri).store.memories.search().limit(None).select(["title"]).to_list()
    assert sorted(r["title"] for r in rows) == ["First note", "Second note"]
    assert brain.get(second.id).title == "Second note"


def test_a_lease_renewal_whose_answer_was_lost_keeps_the_lease(
    bucket_behind_relay: tuple[Relay, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the renewal landed, its retry was refused for the new ETag, and the holder took
    that for a takeover: its next commit failed ("was taken over by another writer") and its
    own lease object was left for every other writer to wait out."""
    import obstore

    from octobrain.store import lease

    relay, endpoint, uri = bucket_behind_relay
    brain = _brain(endpoint, uri)
    brain.memorize("First note", "The first acknowledged memory about deploys.")
    monkeypatch.setattr(lease, "LEASE_TTL_S", 1.2)  # a renewal every 0.3 s
    with brain.store.write_lock():
        relay.drop = r"_octobrain/locks/write\.json"
        time.sleep(1.0)  # the dropped renewal, then more beats
        assert relay.dropped, "no renewal was sent"
        brain.store.check_lease()  # still held: raises LeaseLost when taken for a takeover
    with pytest.raises(FileNotFoundError):  # released, not left behind
        obstore.get(brain.store.location.objects(), "_octobrain/locks/write.json")
