"""Storage settings for an object store: checked at load, and an unreachable or silent endpoint
is one clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.config import load_config
from octobrain.errors import InvalidInput, StorageError
from octobrain.store.location import StoreLocation
from tests.object_store_support import CREDENTIALS, S3, SCOPE


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
