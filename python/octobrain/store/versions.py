"""A table's version manifests in its `_versions/` folder, and whether committed ones were lost.

Each version of a table is one manifest file there (named either way, `version_of`), and on a
local disk Lance's hint names the newest it committed. A committed manifest gone leaves the
table opening at an older version, which the next write would bury: `lost_version` names it.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from octobrain.files import read_regular
from octobrain.store import sighted
from octobrain.store.lease import CLOCK_TOLERANCE_S

if TYPE_CHECKING:
    import lancedb

    from octobrain.store.location import StoreLocation

log = logging.getLogger(__name__)

VERSIONS = ("_versions", ".manifest")  # (folder, suffix) of a table's version manifests
HINT = "latest_version_hint.json"  # in `_versions/`: the newest version Lance committed


@dataclass(frozen=True)
class Problem:
    """What is wrong with a table, and what would repair it."""

    reason: str
    repair: str
    doctor_sees: bool = True  # whether `octobrain doctor`, a new process, finds it too


def lost_version(location: StoreLocation, name: str, table: lancedb.table.Table) -> Problem | None:
    """Whether table `name` has lost committed versions newer than the newest that opens.

    Lance writes `_versions/latest_version_hint.json` after each commit's manifest. A hint
    above the newest version that opens means a committed manifest file is gone: opening
    would silently serve (and the next write would bury) the store as it was before those
    writes. A commit killed before its manifest leaves no hint, so it is not taken for this.
    On a bucket Lance writes no hint, and on a disk the hint may be gone with the manifest:
    octobrain's own record of the versions committed under the write lock stands in for it
    then (`highwater`; on a disk read only when the hint is not there: a table copied back
    from a backup, with its own hint, is its own word), and with that gone too, the newest
    version this process committed or opened (`sighted`).
    """
    if int(table.version) == 0:
        return _blank_newest(location, name)
    if location.path is None:
        return _lost_by_record(location, name, table)
    versions = versions_dir(location, name)
    if versions is None:
        return None
    try:
        committed = hinted(versions)
    except (OSError, ValueError):
        committed = None
    if committed is None:  # (gone, or an older Lance's store)
        return _lost_by_record(location, name, table)
    if committed <= int(table.version):
        return None
    # `table` may have opened before another process committed: look again, now that the
    # hint has been read (a version it names was committed before it was written).
    table.checkout_latest()  # type: ignore[no-untyped-call]
    opened = int(table.version)
    if committed <= opened:
        return None
    _named_on_disk(location, name, opened)
    gone = _gone(committed, opened)
    return Problem(
        f"{gone} committed, but the newest version that opens is {opened}: the manifest file "
        f"of {gone} in _versions/ is gone",
        f"put {name}.lance/_versions/ back from a backup; or, to keep the table as of version "
        f"{opened} and lose what was written after it, delete {versions / HINT} and "
        f"{location.high_water.where()} (the next write records the versions again)",
    )


def _blank_newest(location: StoreLocation, name: str) -> Problem:
    """Table `name` opened at version 0, which no commit makes: its newest version manifest
    was zeroed or overwritten, and Lance reads it as a manifest of no columns and no rows."""
    versions = versions_dir(location, name)
    files = sorted(versions.glob(f"*{VERSIONS[1]}")) if versions is not None else []
    newest = max(files, key=lambda f: version_of(f.name), default=None)
    where = f"{name}.lance/{VERSIONS[0]}/{newest.name}" if newest else f"{name}.lance/_versions"
    hint = (
        f"and delete {versions / HINT} and {location.high_water.where()} "
        if versions is not None
        else ""
    )
    return Problem(
        f"its newest version manifest ({where}) reads as version 0, with no columns and no "
        "rows: the file was zeroed or overwritten",
        f"put that file back from a backup; or, to keep the table as of the version before "
        f"it and lose that one commit, move the file aside {hint}(never `memory reembed`, "
        "which would rewrite the table from no rows)",
    )


def _lost_by_record(
    location: StoreLocation, name: str, table: lancedb.table.Table
) -> Problem | None:
    """`lost_version` from the versions recorded under the write lock: on an object store, and
    on a disk whose hint is gone; then from what this process saw (`sighted`)."""
    marks = location.high_water
    committed = marks.recorded(name)
    if committed is None or committed <= int(table.version):
        return _lost_by_sight(location, name, table)
    table.checkout_latest()  # type: ignore[no-untyped-call]
    opened = int(table.version)
    if committed <= opened:
        return None
    # A cached record may predate the table being dropped and made again (`doctor
    # --recreate`) by another process: only the record as it is now counts.
    committed = marks.recorded(name, fresh=True) or 0
    if committed <= opened or _started_over_since(marks.recorded_at(name), table, opened):
        return _lost_by_sight(location, name, table)
    _named_on_disk(location, name, opened)
    gone = _gone(committed, opened)
    if location.path is not None:
        return Problem(
            f"{gone} committed (recorded in {marks.key}), but the newest version that opens is "
            f"{opened} and Lance's {HINT} is gone too: the manifest file of {gone} in "
            "_versions/ is gone",
            f"put {name}.lance/_versions/ back from a backup; or, to keep the table as of "
            f"version {opened} and lose what was written after it, delete {marks.where()} "
            "(the next write records the versions again)",
        )
    return Problem(
        f"{gone} committed (recorded in {marks.key}), but the newest version that opens is "
        f"{opened}: the manifest object of {gone} in {name}.lance/_versions/ is gone",
        f"bring the deleted object back from the bucket's object versioning; or, to keep the "
        f"table as of version {opened} and lose what was written after it, delete the object "
        f"{marks.where()} (the next write records the versions again)",
    )


def _lost_by_sight(
    location: StoreLocation, name: str, table: lancedb.table.Table
) -> Problem | None:
    """`lost_version` from the newest version this process committed or opened (`sighted`),
    when neither Lance's hint nor octobrain's record names a newer one than opens: all three
    deleted at once under a running server, which answered from the version before.

    On a disk only: there the committer's clock is this machine's, so a table started over
    since this process last saw it (only versions committed after that) is told from a loss
    exactly. On a bucket another machine's `doctor --recreate` within the clock tolerance of
    this process's last look would be refused for good, and a bucket has no hint to lose:
    octobrain's record is its witness (`_lost_by_record`)."""
    if location.path is None or not location.high_water.applies:
        return None
    mark = sighted.sighted(location, name)
    if mark is None or mark[0] <= int(table.version):
        return None
    table.checkout_latest()  # type: ignore[no-untyped-call]
    opened, (seen, at) = int(table.version), mark
    if seen <= opened or _started_over_since(at, table, opened, 0.0):
        return None
    gone = _gone(seen, opened)
    return Problem(
        f"{gone} committed (this process saw it), but the newest version that "
        f"opens is {opened}, and neither Lance's {HINT} nor {location.high_water.key} names it "
        f"any more: the manifest file of {gone} in {name}.lance/_versions/ is gone",
        f"put {name}.lance/_versions/ back from a backup; or, to keep the table as of version "
        f"{opened} and lose what was written after it, restart this process (the MCP server; "
        "`octobrain service stop` for the resident service)",
        doctor_sees=False,  # (what this process saw is in no file a new process reads)
    )


def _named_on_disk(location: StoreLocation, name: str, opened: int) -> None:
    """A loss named from a file (Lance's hint, octobrain's record): this process's own mark
    comes down to the version that opens, so the repair the line names (deleting those files,
    accepting the loss) holds here too, not refused again from what this process saw."""
    sighted.sight(location, name, opened, accepted=True)


def _started_over_since(
    at: float | None,
    table: lancedb.table.Table,
    opened: int,
    tolerance: float = CLOCK_TOLERANCE_S,
) -> bool:
    """Whether version `opened` of `table` was committed more than `tolerance` after its
    recorded entry was set at `at` (`HighWater.recorded_at`): the table was started over since
    (by a release that keeps no record), so the entry is stale, not a sign of loss (`highwater`
    says which clocks this trusts). Asked only of a table whose entry is above it: one LIST and
    manifest reads."""
    if at is None:
        return False  # an entry that does not say when it was set: taken as it stands
    try:
        versions = table.list_versions()
    except Exception as exc:  # the loss is named as it stands: never a loss let through
        log.warning("could not read the versions of %s: %s", table.name, exc)
        return False
    for version in versions:
        if int(version["version"]) == opened:
            # (Lance gives its UTC time naive, in this machine's zone)
            committed = version["timestamp"].astimezone().timestamp()
            return bool(committed > at + tolerance)
    return False


def _gone(committed: int, opened: int) -> str:
    """The versions lost between the newest that opens and the newest committed."""
    if committed == opened + 1:
        return f"version {committed}"
    return f"versions {opened + 1}–{committed}"


def versions_dir(location: StoreLocation, name: str) -> Path | None:
    """Where table `name` of a local store keeps its version manifests (None: object storage)."""
    return None if location.path is None else location.path / f"{name}.lance" / VERSIONS[0]


def version_of(name: str) -> int:
    """The version a `_versions/<n>.manifest` file holds (LanceDB's names count down from
    2**64 - 1 since its V2 naming, up from 1 before)."""
    number = int(name.rsplit("/", 1)[-1].split(".", 1)[0])
    return (1 << 64) - 1 - number if number >= 1 << 63 else number


def hinted(versions: Path) -> int | None:
    """The version Lance's hint in the folder `versions` names (None: there is no hint);
    `ValueError` (or `OSError`) when it does not read as one."""
    try:
        data, _ = read_regular(versions / HINT, 1 << 20)
    except FileNotFoundError:
        return None
    try:
        return int(json.loads(data)["version"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{HINT} names no version ({exc})") from None


def version_manifest(location: StoreLocation, name: str, version: int) -> Path | None:
    """The file holding `version` of table `name` (either naming, `version_of`), or None when
    it is not there (object storage, or cleaned up)."""
    versions = versions_dir(location, name)
    if versions is None:
        return None
    for number in ((1 << 64) - 1 - version, version):
        path = versions / f"{number}{VERSIONS[1]}"
        if path.is_file():
            return path
    return None


def newest_on_disk(location: StoreLocation, name: str) -> int | None:
    """The newest committed version of table `name` of a local store, read from its version
    folder without LanceDB (a listing and Lance's hint file): the version an open would find.
    None where only an open can tell: object storage, no manifest in the folder, a name that is
    not Lance's, or a hint above every manifest left (a lost commit, which the open reports,
    `lost_version`), or with the hint gone, a version recorded above them (`highwater`)."""
    versions = versions_dir(location, name)
    if versions is None:
        return None
    try:
        names = [n for n in os.listdir(versions) if n.endswith(VERSIONS[1])]
        newest = max((version_of(n) for n in names), default=0)
    except (OSError, ValueError):
        return None
    if newest <= 0:
        return None
    try:
        committed = hinted(versions)
    except (OSError, ValueError):
        return None
    if committed is None:  # (gone, or an older Lance's store): as in `lost_version`
        mark = sighted.sighted(location, name)
        committed = max(location.high_water.recorded(name) or 0, mark[0] if mark else 0) or None
    return newest if committed is None or committed <= newest else None


def history_gap(table: lancedb.table.Table, kept_for: timedelta) -> list[int]:
    """The versions missing between two kept ones where the cleanup would not have removed
    them. The cleanup (`upkeep.KEEP_VERSIONS_FOR`, given as `kept_for`, longer for the
    companion tables) removes versions older than its horizon, the oldest first: a version
    missing after one made within the last `kept_for` was deleted by something else."""
    try:
        kept = sorted((int(v["version"]), v["timestamp"]) for v in table.list_versions())
    except (ValueError, RuntimeError, OSError):
        return []  # the table's other checks name what cannot be read
    horizon = datetime.now() - kept_for  # LanceDB's version times are naive local
    missing: list[int] = []
    for (before, made), (after, _) in itertools.pairwise(kept):
        if after > before + 1 and made >= horizon:
            missing.extend(range(before + 1, after))
    return missing


def version_ranges(numbers: Sequence[int]) -> str:
    """Sorted version numbers as ranges: "1–2, 4–8" (a version lost in between shows); past
    six ranges, the first three and the last three."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    shown = [f"{a}" if a == b else f"{a}–{b}" for a, b in spans]
    if len(shown) > 6:
        shown = [*shown[:3], "…", *shown[-3:]]
    return ", ".join(shown)
