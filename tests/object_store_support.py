"""What the tests of a team's shared store on S3 share: a real S3 + DynamoDB endpoint (moto in
server mode) on loopback, a bucket per test, and this test process as one machine of the team.

Each "machine" is a process with its own data directory (its own embedding cache, config and
sleep state) and no shared filesystem with the others; they meet only through the storage URI.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config, StorageConfig
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
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


def s3_brain(s3: S3, uri: str, **extra: str) -> Brain:
    options = tuple(f"{k}={v}" for k, v in {**s3.options, **extra}.items())
    config = Config(storage=StorageConfig(options=options))
    return Brain(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)


MARKS = "_octobrain/versions.json"  # the store's record of each table's newest version


def bucket_keys(location: StoreLocation, prefix: str) -> list[str]:
    """The keys under `prefix` of a bucket store."""
    import obstore

    return [str(m["path"]) for batch in obstore.list(location.objects(), prefix) for m in batch]


def delete_newest_version(location: StoreLocation, table: str) -> None:
    """Delete a table's newest version manifest from the bucket (a lifecycle rule, a hand)."""
    import obstore

    keys = bucket_keys(location, f"{table}.lance/_versions/")
    numbers = {int(k.rsplit("/", 1)[1].split(".")[0]): k for k in keys if k.endswith(".manifest")}
    # (LanceDB's names count down from 2**64 - 1: the smallest number is the newest version)
    obstore.delete(location.objects(), numbers[min(numbers)])


def cli_env(s3: S3, uri: str) -> dict[str, str]:
    return {
        "OCTOBRAIN_STORAGE_URI": uri,
        "OCTOBRAIN_STORAGE_OPTIONS": ",".join(f"{k}={v}" for k, v in s3.options.items()),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
        "OCTOBRAIN_CONSOLIDATION_SLEEP_ENABLED": "false",
    }


LEASE_KEY = "_octobrain/locks/write.json"


def set_lease(location: StoreLocation, lease: dict[str, Any] | bytes) -> None:
    """Put the write lease object as another machine would (a record, or raw bytes)."""
    import obstore

    body = lease if isinstance(lease, bytes) else json.dumps(lease).encode()
    obstore.put(location.objects(), LEASE_KEY, body)


def read_lease(location: StoreLocation) -> Any:
    """The write lease object's record (`FileNotFoundError` once released)."""
    import obstore

    return json.loads(bytes(obstore.get(location.objects(), LEASE_KEY).bytes()))


def until_paused(holder: subprocess.Popen[str], marker: Path) -> None:
    """Wait until the process `holder` made `marker`, as it stops itself (SIGSTOP)."""
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert holder.poll() is None, holder.communicate()
        assert time.monotonic() < deadline, "the holder never reached its pause"
        time.sleep(0.05)
