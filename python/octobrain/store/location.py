"""Where a store lives — a local directory or an object-store URI — and how its writers agree.

LanceDB keeps tables on a local disk or on object storage (`s3://`, `s3+ddb://`, `gs://`, `az://`)
and makes every commit atomic on both. octobrain additionally serialises its read-modify-write
steps (an update, a consolidation pass) under one write lock per store:

- local directory: a lock file beside the tables (`filelock`), as fast as a syscall;
- object store: a *lease* object under `_octobrain/locks/` in the store itself, taken with a
  conditional create (put-if-absent), renewed by a heartbeat while held, and taken over with a
  compare-and-swap once its holder has stopped renewing it (`_Lease`). Every machine that can
  write the tables can see it; nothing local is involved.

Small shared records (the last sleep pass of a scope) live under `_octobrain/` the same way.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import math
import os
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from octobrain.errors import StorageError
from octobrain.files import read_regular
from octobrain.store.highwater import HighWater

if TYPE_CHECKING:
    import lancedb

    from octobrain.config import Config

log = logging.getLogger(__name__)

LEASE_TTL_S = 60.0  # a crashed holder blocks writers at most this long
# How far apart the wall clocks of the machines sharing a store may be: a lease is never taken
# from a live holder by a clock wrong by less (`_Lease`).
CLOCK_TOLERANCE_S = 300.0
# A boot-time clock runs on while the machine sleeps (a laptop lid closed): Linux's
# CLOCK_BOOTTIME, macOS's CLOCK_MONOTONIC; `time.monotonic` stops there on both.
_ELAPSED_CLOCK: int | None = (
    getattr(time, "CLOCK_BOOTTIME", None)
    if sys.platform.startswith("linux")
    else getattr(time, "CLOCK_MONOTONIC", None)
    if sys.platform == "darwin"
    else None
)
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


_IMPORTING = threading.Lock()


_REST_CLIENT = "lance_namespace_urllib3_client"  # lancedb's REST namespace client


class _LazyPackage(ModuleType):
    """A package whose `__init__` runs when one of its own names is first read.

    Its submodules import as usual (the package's `__path__` is set from the start), and
    reading a name the package does not have yet (`package.ApiClient`, a `from package import
    ApiClient`) runs the real `__init__` once, in this module, then answers. A name bound by a
    submodule's import (`package.models`) is there without it.
    """

    @classmethod
    def register(cls, name: str) -> None:
        """Put `name` in `sys.modules` unexecuted, unless it is imported or not installed."""
        if name in sys.modules:
            return
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return
        module = cls(name)
        module.__spec__ = spec
        module.__loader__ = spec.loader
        module.__file__ = spec.origin
        module.__path__ = list(spec.submodule_search_locations)
        module.__package__ = name
        sys.modules[name] = module

    def __getattr__(self, attr: str) -> Any:
        with _IMPORTING_REST:
            if type(self) is _LazyPackage:  # not run yet: run it once, under the lock
                loader = self.__spec__.loader if self.__spec__ is not None else None
                assert loader is not None  # `register` set it
                object.__setattr__(self, "__class__", ModuleType)
                try:
                    loader.exec_module(self)
                except BaseException:
                    sys.modules.pop(self.__name__, None)  # the next import starts afresh
                    raise
        try:
            return self.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}") from None


_IMPORTING_REST = threading.Lock()


def _override_marker(method: Any = None, /, **_options: Any) -> Any:
    """What lancedb decorates with on Python 3.12+ (`typing.override`): marks, checks nothing."""

    def mark(func: Any) -> Any:
        with contextlib.suppress(AttributeError, TypeError):  # a builtin or slotted object
            func.__override__ = True  # what `overrides.EnforceOverrides` looks for
        return func

    return mark if method is None else mark(method)


def import_lancedb() -> ModuleType:
    """`lancedb`, imported the way every octobrain path imports it (call before any
    `from lancedb… import`).

    `import lancedb` imports its REST namespace client package, whose `__init__` imports all of
    its API modules: 366 methods (lancedb 0.40) wrapped in pydantic's `validate_call`, each
    validator built at import, about 0.8 s of a new process's start on a 2-core machine, for a
    client a local or object-store location never calls. lancedb itself needs only the
    package's request and response models, which it imports by their own modules. So during
    the import that package is registered unexecuted (`_LazyPackage`): its submodules import
    as usual, and its `__init__` runs, unchanged, the first time anything reads one of its own
    names (`from lance_namespace_urllib3_client import ApiClient`), so a caller of that client
    gets it whole. Before Python 3.12 lancedb marks its overriding methods with the
    `overrides` package's `@override`, which disassembles the calling frame's bytecode to check
    each one against its base class (about 0.1 s); from 3.12 it uses `typing.override`, a
    marker, and during the import it gets that marker on 3.11 too, put back after.
    LanceDB's own log (index training notes, skipped partitions) is not actionable for a user
    and would interleave with the CLI's output; `LANCEDB_LOG=warn` brings it back.
    """
    os.environ.setdefault("LANCEDB_LOG", "error")
    loaded = sys.modules.get("lancedb")
    if loaded is not None:
        return loaded
    with _IMPORTING:
        _LazyPackage.register(_REST_CLIENT)
        swaps: list[tuple[ModuleType, str, Any]] = []
        if sys.version_info < (3, 12):
            try:
                import overrides
            except ImportError:  # lancedb then fails its own import, with its own message
                pass
            else:
                swaps.append((overrides, "override", _override_marker))
        saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
        for module, name, value in swaps:
            setattr(module, name, value)
        try:
            with _pydantic_builds_deferred():
                import lancedb
        finally:
            for module, name, value in saved:
                setattr(module, name, value)
    return lancedb


@contextlib.contextmanager
def _pydantic_builds_deferred() -> Iterator[None]:
    """Within: a pydantic model class that does not say otherwise builds its validator when
    first used rather than when defined. The ~200 models lancedb defines as it imports (the
    REST namespace's requests and responses, the embedding functions) are never used by a
    local or object-store location, and building them cost about 60 ms of every new process.
    pydantic reads its config defaults when a class is made (`_config.config_defaults`, a
    private name: without it nothing changes); the default is put back after."""
    try:
        from pydantic._internal import _config
    except ImportError:
        yield
        return
    defaults = getattr(_config, "config_defaults", None)
    if not isinstance(defaults, dict) or defaults.get("defer_build") is not False:
        yield
        return
    defaults["defer_build"] = True
    try:
        yield
    finally:
        defaults["defer_build"] = False


def lancedb_loop() -> Any:
    """The event loop lancedb's sync API runs every call on (to hand it several at once)."""
    import_lancedb()
    from lancedb.background_loop import LOOP

    return LOOP


class StoreBusy(StorageError):
    """Another process (on this machine or another) holds the lock and did not let go in time."""


class LeaseLost(StoreBusy):
    """This process's write lease may have passed to another writer while it held it (it was
    paused, or could not reach the store, past the lease's time): a commit under it is refused."""


def _elapsed() -> float:
    """Seconds on this machine's boot-time clock (`_ELAPSED_CLOCK`), never on its wall clock."""
    return time.monotonic() if _ELAPSED_CLOCK is None else time.clock_gettime(_ELAPSED_CLOCK)


def _read_lease(raw: bytes) -> tuple[str | None, float | None, str | None]:
    """(holder, wall-clock expiry, what is wrong) of a lease object's bytes; an object that is
    no lease has no holder or expiry known, and says why."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):  # (a UnicodeDecodeError is a ValueError)
        return None, None, "not JSON"
    if not isinstance(record, dict):
        return None, None, "not a JSON object"
    holder, expires = record.get("holder"), record.get("expires")
    if not isinstance(holder, str) or not holder.isprintable() or not 0 < len(holder) <= 200:
        return None, None, "no holder name"
    if isinstance(expires, bool) or not isinstance(expires, int | float):
        return holder, None, "no expiry time"
    if not math.isfinite(expires):
        return holder, None, "no finite expiry time"
    return holder, float(expires), None


def is_remote(uri: str) -> bool:
    """Whether `uri` names an object store rather than a local directory."""
    scheme = urlsplit(uri).scheme.lower()
    return bool(scheme) and scheme != "file" and "://" in uri


def redact(uri: str) -> str:
    """`uri` without any user:password part, for messages."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def object_store_reason(exc: BaseException) -> str:
    """The human part of an object-store error (LanceDB nests the client's error in a dump)."""
    text = str(exc)
    for pattern in (r'message: "([^"]+)"', r'ConnectError\("([^"]+)"', r"<Code>(\w+)</Code>"):
        found = re.search(pattern, text)
        if found:
            return found.group(1)
    line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    line = line.split(", /")[0]  # (LanceDB ends a line with the Rust source file it came from)
    return line if len(line) <= 500 else line[:499] + "…"


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
        self.options = dict(options or {})
        self.remote = is_remote(self.uri)
        # A local version check is a stat; on a bucket it is a LIST request per table per read.
        self.refresh_s = remote_refresh_s if self.remote else 0.0
        self.path = None if self.remote else Path(self.uri)
        self._objects: Any = None  # the obstore handle, made on first use
        self._locks: dict[str, _Lease] = {}
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
        import_lancedb()
        import lancedb

        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
        try:
            return lancedb.connect(
                self.uri,
                read_consistency_interval=timedelta(seconds=self.refresh_s),
                storage_options=self.options or None,
            )
        except (ValueError, RuntimeError) as exc:  # LanceDB's wrapping of object-store errors
            raise StorageError(f"store: cannot open {self}: {object_store_reason(exc)}") from exc

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

    def check_held(self) -> None:
        """Refuse (`LeaseLost`), before a commit, a write whose lease this thread may have lost
        (object stores; a local lock file cannot be lost while its process lives)."""
        for lease in list(self._locks.values()):
            lease.check()

    def lock(self, name: str, timeout: float) -> Any:
        """The cross-process (and, remotely, cross-machine) lock `name` of this store, re-entrant
        within a process. Use as a context manager; `timeout=0` fails at once when it is held."""
        if self.path is not None:
            from filelock import FileLock

            return FileLock(str(self.path / f".{name}.lock"), timeout=timeout)
        with self._guard:
            lease = self._locks.get(name)
            if lease is None:
                lease = self._locks[name] = _Lease(self, f"{_META}/locks/{name}.json")
        return _Waiting(lease, timeout)

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
                raw = bytes(obstore.get(self.objects(), f"{_META}/{name}").bytes())
            except FileNotFoundError:
                return None
        record = json.loads(raw)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        return record

    def write_json(self, name: str, record: Mapping[str, Any]) -> None:
        """Write the record `name` under `_octobrain/`, whole or not at all: one object put, or
        a file written beside it, synced and renamed over it."""
        data = json.dumps(record).encode()
        if self.path is None:
            import obstore

            obstore.put(self.objects(), f"{_META}/{name}", data)
            return
        target = self.path / _META / name
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)

    def objects(self) -> Any:
        """The obstore handle for this store's prefix (object stores only)."""
        if self._objects is None:
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
            self._objects = from_url(base, config=config or None, client_options=client or None)
        return self._objects


class _Waiting:
    """A reusable context manager: hold `lease`, waiting at most `timeout` seconds."""

    def __init__(self, lease: _Lease, timeout: float) -> None:
        self._lease, self._timeout = lease, timeout

    def __enter__(self) -> None:
        self._lease.enter(self._timeout)

    def __exit__(self, *exc: object) -> None:
        self._lease.exit()


class _Lease:
    """A write lease held as one object in the store (see the module docstring).

    Holder: each put (create or renewal) is sent at a moment of this machine's boot-time
    clock; the lease is good until one TTL after it, less a quarter TTL for the commit under
    way (`_valid_until`). The heartbeat renews it every quarter TTL by compare-and-swap on its
    ETag; a renewal refused means another writer took it over. `check` (every commit under the
    lease, via `StoreLocation.check_held`) refuses once either happened, so a holder paused
    past the TTL never commits what it read before.

    Taker: a lease is taken over (compare-and-swap on the ETag read) when the object stayed the
    same, ETag unchanged, for one TTL on the taker's own boot-time clock since it first read it
    (after the holder's put, so after the holder's lease ran out), or when its wall-clock
    expiry is more than `CLOCK_TOLERANCE_S` past by the taker's wall clock (a holder long dead
    costs no wait). No two machines' clocks are compared but in that second rule, which is safe
    while they disagree by less than the tolerance. An object that is no lease (truncated, not
    an object, no expiry) is held by an unknown holder and taken over by the first rule only.
    """

    def __init__(self, location: StoreLocation, key: str) -> None:
        self._location = location
        self._key = key
        self._rlock = threading.RLock()  # threads of this process queue here, re-entrantly
        self._depth = 0
        self._owner: int | None = None  # the thread holding it
        self._etag: str | None = None
        self._valid_until = 0.0  # on `_elapsed`; set by each put
        self._lost: str | None = None  # why this holding ended, set by the heartbeat
        self._seen: tuple[str, float] | None = None  # another's lease: (ETag, first read at)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def enter(self, timeout: float) -> None:
        """Hold the lease (waiting up to `timeout` seconds; < 0 waits forever)."""
        if not self._rlock.acquire(timeout=-1 if timeout < 0 else max(timeout, 0.001)):
            raise StoreBusy(f"store: {self._location}: lock {self._key} busy in this process")
        try:
            if self._depth == 0:
                self._acquire(timeout if timeout >= 0 else float("inf"))
                self._owner = threading.get_ident()
        except BaseException:
            self._rlock.release()
            raise
        self._depth += 1

    def exit(self) -> None:
        """Leave one level; the outermost exit releases the lease."""
        try:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._release()
        finally:
            self._rlock.release()

    def check(self) -> None:
        """Raise `LeaseLost` when this thread holds the lease but it may have passed to
        another writer (taken over, or not renewed within its time); else nothing."""
        if self._depth == 0 or self._owner != threading.get_ident():
            return
        reason = self._lost
        late = _elapsed() - self._valid_until
        if reason is None and late >= 0:
            unrenewed = late + LEASE_TTL_S * 3 / 4
            reason = (
                f"was not renewed for {unrenewed:.0f} s (this process was paused, or could not "
                f"reach the store) and may have been taken over"
            )
        if reason is not None:
            raise LeaseLost(
                f"store: {self._location}: this write's lease {self._key} {reason}; nothing was "
                "changed by this commit (another writer may have changed what it read): "
                "run it again"
            )

    def _body(self) -> bytes:
        record = {"holder": self._holder, "expires": time.time() + LEASE_TTL_S}
        return json.dumps(record).encode()

    def _put(self, mode: Any) -> None:
        """Write this holder's lease (`mode`: "create" or the ETag it must replace); on
        success it is good until one TTL after the request was sent, less a quarter TTL."""
        import obstore

        sent = _elapsed()
        put = obstore.put(self._location.objects(), self._key, self._body(), mode=mode)
        self._etag = put["e_tag"]
        self._valid_until = sent + LEASE_TTL_S * 3 / 4

    def _acquire(self, timeout: float) -> None:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        store = self._location.objects()
        deadline = time.monotonic() + timeout
        pause = 0.02
        while True:
            sent = _elapsed()
            try:
                self._put("create")
                break
            except AlreadyExistsError:
                pass
            try:
                got = obstore.get(store, self._key)
                raw = bytes(got.bytes())
                etag = str(got.meta["e_tag"])
            except FileNotFoundError:
                continue  # released in between: try to create it again at once
            seen = _elapsed()  # after the read: after the put that made this ETag
            if self._seen is None or self._seen[0] != etag:
                self._seen = (etag, seen)
            holder, expires, problem = _read_lease(raw)
            if holder == self._holder:  # our create landed, its answer was lost (a retry)
                self._etag, self._valid_until = etag, sent + LEASE_TTL_S * 3 / 4
                break
            unchanged = seen - self._seen[1]
            long_dead = expires is not None and expires + CLOCK_TOLERANCE_S < time.time()
            if unchanged >= LEASE_TTL_S or long_dead:
                try:  # its holder stopped renewing it: take it over, unless another just did
                    self._put({"e_tag": etag})
                except (PreconditionError, FileNotFoundError):
                    continue
                log.warning(
                    "took over the write lease %s of %s (unchanged for %.0f s)",
                    self._key,
                    holder or "an unknown holder",
                    unchanged,
                )
                break
            if time.monotonic() >= deadline:
                raise StoreBusy(self._busy(holder, problem, unchanged))
            time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
            pause = min(pause * 2, 0.5)
        self._seen = None
        self._lost = None
        self._stop.clear()
        self._beat = threading.Thread(target=self._renew, name="octobrain-lease", daemon=True)
        self._beat.start()

    def _busy(self, holder: str | None, problem: str | None, unchanged: float) -> str:
        """The one line a writer that could not get the lease in time gets."""
        left = max(LEASE_TTL_S - unchanged, 0.0)
        if problem is not None:
            return (
                f"store: {self._location} is locked by {holder or 'an unknown holder'}: the "
                f"lease object "
                f"{self._key} is not a valid lease ({problem}); it is taken over once unchanged "
                f"for {LEASE_TTL_S:.0f} s ({left:.0f} s from now): try again then"
            )
        return (
            f"store: {self._location} is locked by {holder} (lease {self._key}); try again. A "
            f"lease whose holder stopped is taken over once seen unchanged for "
            f"{LEASE_TTL_S:.0f} s, or {CLOCK_TOLERANCE_S / 60:.0f} min after it expired"
        )

    def _renew(self) -> None:
        from obstore.exceptions import PreconditionError

        while not self._stop.wait(LEASE_TTL_S / 4):
            try:
                self._put({"e_tag": self._etag})
            except (PreconditionError, FileNotFoundError):
                if self._still_ours():
                    continue  # a renewal landed but its answer was lost: carry on from it
                self._lost = (
                    "was taken over by another writer while held (this process was paused, "
                    "or could not reach the store, past its time)"
                )
                log.error("the write lease %s was taken over while held", self._key)
                return
            except Exception:  # a transient network error: the next beat tries again
                log.warning("could not renew the write lease %s", self._key, exc_info=True)

    def _still_ours(self) -> bool:
        """After a renewal refused for its ETag: whether the object is still this holder's
        (the renewal landed and its answer was lost, then a retry found the new ETag); if so
        its ETag is adopted. Its time stays that of the last renewal answered, the safe side."""
        import obstore

        try:
            got = obstore.get(self._location.objects(), self._key)
            holder, _, _ = _read_lease(bytes(got.bytes()))
        except Exception:  # gone, or unreachable: not known to be ours
            return False
        if holder != self._holder:
            return False
        self._etag = str(got.meta["e_tag"])
        return True

    def _release(self) -> None:
        import obstore

        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        if self._lost is not None:
            return  # another writer's lease now
        store = self._location.objects()
        try:
            if obstore.head(store, self._key)["e_tag"] == self._etag:
                obstore.delete(store, self._key)
        except FileNotFoundError:
            pass
        except Exception:  # the lease then simply expires
            log.warning("could not release the write lease %s", self._key, exc_info=True)
