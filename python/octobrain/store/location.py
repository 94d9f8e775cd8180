"""Where a store lives — a local directory or an object-store URI — and how its writers agree.

LanceDB keeps tables on a local disk or on object storage (`s3://`, `s3+ddb://`, `gs://`, `az://`)
and makes every commit atomic on both. octobrain additionally serialises its read-modify-write
steps (an update, a consolidation pass) under one write lock per store:

- local directory: a lock file beside the tables (`filelock`), as fast as a syscall, naming
  its holder to a writer that waits (`store.lock_file`);
- object store: a *lease* object under `_octobrain/locks/` in the store itself, renewed while
  held and taken over once its holder stopped renewing it (`store.lease`).

Small shared records (the last sleep pass of a scope) live under `_octobrain/` the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from octobrain.errors import InvalidInput, StorageError
from octobrain.files import read_regular, replace_whole
from octobrain.json_values import UnreadableJSON
from octobrain.store import forked
from octobrain.store.aws_profile import s3_settings
from octobrain.store.endpoint import lacks_credentials, object_store_reason
from octobrain.store.highwater import HighWater
from octobrain.store.lancedb_import import import_lancedb
from octobrain.store.lease import Lease, Waiting

if TYPE_CHECKING:
    import lancedb

    from octobrain.config import Config

_META = "_octobrain"
RECORD_BYTES = 64 << 20  # a record under _octobrain/ is a few kB; more is not one of ours
# Storage options that configure the HTTP client (obstore takes them separately) or only
# LanceDB's own commit machinery (the object-store client rejects them).
_CLIENT_KEYS = {
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "timeout",
    "proxy_url",
    "pool_idle_timeout",
    "user_agent",
}
_LANCE_ONLY = ("dynamodb_", "download_retry_count", "client_max_retries", "client_retry_timeout")
# The object-store client retries one request for up to 3 minutes, and LanceDB tries its open
# 6 times over: an endpoint that accepts and never answers held a command for 20 minutes. Three
# retries within 20 s (as AWS's SDKs: 3 attempts) still ride out throttling and dropped
# connections; a request that got no answer in its `timeout` (30 s) is not tried again.
RETRY_DEFAULTS = {"client_max_retries": "3", "client_retry_timeout": "20"}


def is_remote(uri: str) -> bool:
    """Whether `uri` names an object store rather than a local directory."""
    scheme = urlsplit(uri).scheme.lower()
    return bool(scheme) and scheme != "file" and "://" in uri


def local_path(uri: str) -> Path | None:
    """The directory of the store at `uri` on this machine's disks; None for an object store."""
    return None if is_remote(uri) else Path(uri)


def redact(uri: str) -> str:
    """`uri` without any user:password part, for messages."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


class StoreLocation:
    """A store's URI and storage options; connects LanceDB and hands out its write locks."""

    def __init__(
        self,
        uri: str | Path,
        options: Mapping[str, str] | None = None,
        *,
        remote_refresh_s: float = 1.0,
    ) -> None:
        self.uri = str(uri)
        self.remote = is_remote(self.uri)
        self.options = {**(RETRY_DEFAULTS if self.remote else {}), **(options or {})}
        # A local version check is a stat; on a bucket it is a LIST request per table per read.
        self.refresh_s = remote_refresh_s if self.remote else 0.0
        self.path = local_path(self.uri)
        self._objects: Any = None  # the obstore handle, made on first use
        self._locks: dict[str, Lease] = {}
        self._guard = threading.Lock()
        # The newest version of each table committed here (a bucket's stand-in for the
        # version hint Lance leaves on a local disk).
        self.high_water = HighWater(self)

    @classmethod
    def from_config(cls, config: Config, uri: str | Path) -> StoreLocation:
        """The location `uri` with the `[storage]` options and refresh interval of `config`."""
        from octobrain.config import storage_options

        refresh = config.storage.remote_refresh_ms / 1000
        return cls(uri, storage_options(config), remote_refresh_s=refresh)

    def __str__(self) -> str:
        return redact(self.uri)

    def connect(self) -> lancedb.DBConnection:
        """A LanceDB connection: a local one sees every commit as soon as it lands, a remote one
        within `refresh_s` (writes first move to the latest commit: `to_latest`)."""
        forked.connecting(self)
        import_lancedb()
        import lancedb

        if self.path is not None:
            if os.path.exists(self.path) and not os.path.isdir(self.path):  # (mkdir: "File exists")
                raise StorageError(
                    f"store: {self.path} is not a folder (a store is one): move it aside and "
                    "put the store back from a backup (`octobrain memory import` of an export)"
                )
            self.path.mkdir(parents=True, exist_ok=True)
        else:  # (an option the object store does not know: LanceDB ignores it without a word)
            self.objects()
        try:
            return lancedb.connect(
                self.uri,
                read_consistency_interval=timedelta(seconds=self.refresh_s),
                storage_options=self.options or None,
            )
        except (ValueError, RuntimeError) as exc:  # LanceDB's wrapping of object-store errors
            said = f"store: cannot open {self}: {object_store_reason(exc)}"
            raise StorageError(said + self._unreadable_said()) from exc

    def _unreadable_said(self) -> str:
        """The folder of the local store (or on the way to it) this user may not read, and the
        repair, as the end of a line ("cannot open …: Permission denied" said neither)."""
        from octobrain.store.table_files import denied_said, outermost_unreadable

        outer = None if self.path is None else outermost_unreadable(self.path)
        return "" if outer is None else f" ({denied_said(outer)})"

    def to_latest(self, *tables: lancedb.table.Table | None) -> None:
        """Move table handles to their latest commit (a no-op when every read already is)."""
        if self.refresh_s:
            for table in tables:
                if table is not None:
                    table.checkout_latest()  # type: ignore[no-untyped-call]

    def table_gone(self, name: str) -> bool:
        """Whether table `name` has no version left since a handle to it was opened: dropped
        (`doctor --recreate` on an object store: one LIST) or its directory moved aside."""
        if self.path is not None:
            return not (self.path / f"{name}.lance" / "_versions").is_dir()
        import obstore

        listed = obstore.list(self.objects(), f"{name}.lance/_versions/", chunk_size=1)
        return not any(batch for batch in listed)

    @contextlib.contextmanager
    def requesting(self, what: str) -> Iterator[None]:
        """Requests to this store under it that fail (the endpoint down, refusing or not
        answering) raise the one line saying `what` could not be done; anything else (a missing
        object, a refused condition: its caller's to handle) goes through as it was raised."""
        from obstore.exceptions import BaseError

        try:
            yield
        except BaseError as exc:
            said = f"store: {self}: {what} ({object_store_reason(exc)}); nothing was changed"
            if not lacks_credentials(exc):  # (then the endpoint was never asked)
                said += (
                    ": check that the endpoint is up and reachable (storage.uri, "
                    "storage.options), then run it again"
                )
            raise StorageError(said) from exc

    def check_held(self) -> None:
        """Refuse (`LeaseLost`), before a commit, a write whose lease this thread may have lost
        (object stores; a local lock file cannot be lost while its process lives)."""
        for lease in list(self._locks.values()):
            lease.check()

    def lock(self, name: str, timeout: float) -> Any:
        """The cross-process (and, remotely, cross-machine) lock `name` of this store, re-entrant
        within a process. Use as a context manager; `timeout=0` fails at once when it is held."""
        if self.path is not None:
            from octobrain.store.lock_file import LockFile

            return LockFile(self.path, name, timeout)
        with self._guard:
            lease = self._locks.get(name)
            if lease is None:
                lease = self._locks[name] = Lease(self, f"{_META}/locks/{name}.json")
        return Waiting(lease, timeout)

    # ---- small shared records (object stores only) ----------------------------------------

    def read_json(self, name: str) -> dict[str, Any] | None:
        """The record `name` under `_octobrain/`, or None when it does not exist. A record that
        is not a JSON object raises ValueError (as does one that is not JSON)."""
        if self.path is not None:
            try:  # a FIFO or device in its place raises, not waits for a writer
                raw = read_regular(self.path / _META / name, RECORD_BYTES)[0]
            except FileNotFoundError:
                return None
        else:
            import obstore

            try:
                with self.requesting(f"cannot read {_META}/{name}"):
                    raw = bytes(obstore.get(self.objects(), f"{_META}/{name}").bytes())
            except FileNotFoundError:
                return None
        try:
            record = json.loads(raw)
        except RecursionError:  # (it failed the call that read it, as an internal error)
            raise UnreadableJSON("is nested too deeply", "nested too deeply") from None
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        return record

    def write_json(self, name: str, record: Mapping[str, Any]) -> None:
        """Write the record `name` under `_octobrain/`, whole or not at all: one object put, or
        a file written beside it, synced and renamed over it."""
        data = json.dumps(record).encode()
        if self.path is None:
            import obstore

            with self.requesting(f"cannot write {_META}/{name}"):
                obstore.put(self.objects(), f"{_META}/{name}", data)
            return
        target = self.path / _META / name
        target.parent.mkdir(parents=True, exist_ok=True)
        replace_whole(target, data, sync=True)

    def objects(self) -> Any:
        """The obstore handle for this store's prefix (object stores only)."""
        if self._objects is None:
            from obstore.exceptions import UnknownConfigurationKeyError
            from obstore.store import from_url

            parts = urlsplit(self.uri)
            scheme = "s3" if parts.scheme.lower() == "s3+ddb" else parts.scheme
            base = urlunsplit((scheme, parts.netloc, parts.path, "", ""))
            config: Any = {
                k: v
                for k, v in self.options.items()
                if k not in _CLIENT_KEYS and not k.startswith(_LANCE_ONLY)
            }
            client: Any = {k: v for k, v in self.options.items() if k in _CLIENT_KEYS}
            retry: Any = {
                "max_retries": int(self.options["client_max_retries"]),
                "retry_timeout": timedelta(seconds=float(self.options["client_retry_timeout"])),
            }
            provider = None
            if scheme.lower() == "s3":
                added, provider = s3_settings(self, config)
                config.update(added)
            try:
                self._objects = from_url(
                    base,
                    config=config or None,
                    client_options=client or None,
                    retry_config=retry,
                    credential_provider=provider,
                )
            except UnknownConfigurationKeyError:
                raise _unknown_option(base, config) from None
        return self._objects


_KEYS_LIKE = {
    "s3": "aws_access_key_id, region, aws_endpoint",
    "gs": "google_service_account, google_application_credentials",
    "az": "azure_storage_account_name, azure_storage_account_key",
    "abfs": "azure_storage_account_name, azure_storage_account_key",
}


def _unknown_option(base: str, config: Mapping[str, str]) -> InvalidInput:
    """The error naming the first key of `config` the object store at `base` does not take (a
    typo such as `aws_acess_key_id` was left to the first request, or never said)."""
    from obstore.exceptions import UnknownConfigurationKeyError
    from obstore.store import from_url

    scheme = urlsplit(base).scheme
    for key, value in config.items():
        try:
            from_url(base, config={key: value})  # type: ignore[call-overload]
        except UnknownConfigurationKeyError:
            return InvalidInput(
                f"storage.options.{key}",
                f"is not an option of {scheme}:// stores (the object_store crate's keys, such "
                f"as {_KEYS_LIKE.get(scheme, 'region')}); check its spelling",
            )
        except Exception:  # (a key it takes: its value, or the keys it needs beside, are not ours)
            continue
    return InvalidInput("storage.options", f"holds a key {scheme}:// stores do not take")
