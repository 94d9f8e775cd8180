"""A bucket that commits a write but whose answer never reaches octobrain (a timeout, a reset
connection): the writer reads back whether the commit landed instead of saying "nothing was
changed", which a caller would answer by sending the write again.

A real S3 endpoint (moto in server mode) on loopback, behind a small HTTP relay that forwards
each request and, when told, drops the connection instead of relaying the answer.
"""

from __future__ import annotations

import http.client
import http.server
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from octobrain.config import Config, StorageConfig
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
MANIFEST_PUT = r"memories\.lance/_versions/.*\.manifest"


@dataclass
class Relay:
    """Forwards every request to `upstream`; the next request whose path matches `drop` is
    forwarded, and its answer dropped (the connection is shut instead)."""

    upstream: int
    drop: str | None = None
    dropped: list[str] = field(default_factory=list)

    def start(self) -> int:
        relay = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def forward(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                upstream = http.client.HTTPConnection("127.0.0.1", relay.upstream, timeout=30)
                upstream.request(self.command, self.path, body, dict(self.headers.items()))
                answer = upstream.getresponse()
                data = answer.read()
                if relay.drop and self.command == "PUT" and re.search(relay.drop, self.path):
                    relay.drop = None
                    relay.dropped.append(self.path)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return int(server.server_address[1])


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
