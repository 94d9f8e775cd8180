"""The write lease of a store on object storage: one object under `_octobrain/locks/` in the
store itself, taken with a conditional create (put-if-absent), renewed by a heartbeat while
held, and taken over with a compare-and-swap once its holder has stopped renewing it (`Lease`).
Every machine that can write the tables can see it; nothing local is involved.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import socket
import sys
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from octobrain.errors import StorageError

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation

log = logging.getLogger(__name__)

LEASE_TTL_S = 60.0  # a crashed holder blocks writers at most this long
# How far apart the wall clocks of the machines sharing a store may be: a lease is never taken
# from a live holder by a clock wrong by less (`Lease`).
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


@functools.cache
def _this_kernel() -> str | None:
    """Where a process id names one process: this boot of this machine's kernel and this
    process's pid namespace (Linux); None where that cannot be told."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except (OSError, ValueError):
        return None
    return f"{boot}:{namespace}"


def _ended_here(raw: bytes) -> bool:
    """Whether the lease object `raw` was put by a process of this kernel and pid namespace
    (`_this_kernel`) that no longer runs: a command that could not delete it on its way out
    (the endpoint was down). A live process, or one elsewhere, is never taken for ended."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    kernel = _this_kernel()
    if kernel is None or not isinstance(record, dict) or record.get("kernel") != kernel:
        return False
    pid = record.get("pid")
    if type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # (PermissionError: it runs, as another user)
        return False
    return False


class Waiting:
    """A reusable context manager: hold `lease`, waiting at most `timeout` seconds."""

    def __init__(self, lease: Lease, timeout: float) -> None:
        self._lease, self._timeout = lease, timeout

    def __enter__(self) -> None:
        self._lease.enter(self._timeout)

    def __exit__(self, *exc: object) -> None:
        self._lease.exit()


class Lease:
    """A write lease held as one object in the store (see the module docstring).

    Holder: each put (a create, a renewal, or the rewrite of an object still naming this holder:
    a create whose answer was lost, a release that failed) is sent at a moment of this machine's
    boot-time clock; the lease is good until one TTL after it, less a quarter TTL for the commit
    under way (`_valid_until`). The heartbeat renews it every quarter TTL by compare-and-swap on
    its ETag; a renewal refused means another writer took it over. `check` (every commit under
    the lease, via `StoreLocation.check_held`) refuses once either happened, so a holder paused
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
                with self._location.requesting(f"cannot take the write lease {self._key}"):
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
        kernel = _this_kernel()
        if kernel is not None:  # so a command on this machine knows it ended (`_ended_here`)
            record.update(kernel=kernel, pid=os.getpid())
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
            if holder == self._holder:  # our create whose answer was lost, or a failed release:
                try:  # written again, so its time runs from now (a taker's wait starts over)
                    self._put({"e_tag": etag})
                except (PreconditionError, FileNotFoundError):
                    continue  # another writer took it over meanwhile
                break
            unchanged = seen - self._seen[1]
            long_dead = expires is not None and expires + CLOCK_TOLERANCE_S < time.time()
            ended = _ended_here(raw)
            if unchanged >= LEASE_TTL_S or long_dead or ended:
                try:  # its holder stopped renewing it: take it over, unless another just did
                    self._put({"e_tag": etag})
                except (PreconditionError, FileNotFoundError):
                    continue
                log.warning(
                    "took over the write lease %s of %s (%s)",
                    self._key,
                    holder or "an unknown holder",
                    "its process ended" if ended else f"unchanged for {unchanged:.0f} s",
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
        if _elapsed() >= self._valid_until:
            # Past what its last renewal held it for, another may have taken it over, and the
            # head-then-delete below (obstore has no conditional delete) could delete that
            # writer's lease in between: left to expire instead.
            log.warning("the write lease %s lapsed before it was let go; it expires", self._key)
            return
        store = self._location.objects()
        try:
            if obstore.head(store, self._key)["e_tag"] == self._etag:
                obstore.delete(store, self._key)
        except FileNotFoundError:
            pass
        except Exception:  # the lease then simply expires
            log.warning("could not release the write lease %s", self._key, exc_info=True)
