"""What a commit of a Lance table did, as Lance records it: the operation of its transaction.

`list_versions()` gives a version's time and row counts, not what made it. Each version's
manifest (`_versions/*.manifest`) ends with the file position of the `Manifest` message, which
says where the `Transaction` that made the version lies: inside the manifest file
(`transaction_section`) or in `_transactions/` (`transaction_file`). The transaction's
`operation` is a oneof whose field number names the kind (Lance's `protos/transaction.proto`).
`memory history` reads it to say why a version changed no memory: the store's upkeep.

The manifest also names the data files the version reads, with the size Lance wrote each at,
and each fragment's deletion file (`_deletions/{fragment}-{read version}-{id}.arrow|bin`, no
size recorded): before a commit the store checks them on disk (`damaged_file`), since a commit
never reads them.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation

__all__ = ["UPKEEP", "damaged_file", "data_files", "operation", "upkeep_note"]

# `Transaction.operation` field numbers of the commits that rearrange a table without changing
# a row, and what `memory history` says of them ("this version …").
UPKEEP = {
    103: "is the store's upkeep: a search index built, updated or dropped",  # CreateIndex
    104: "is the store's upkeep: the table's files compacted",  # Rewrite
    107: "is the store's upkeep: a compaction of the table's files begun",  # ReserveFragments
}
_FOOTER = struct.Struct("<QHH4s")  # manifest position, format major and minor, b"LANC"
_LENGTH = struct.Struct("<I")  # before each message: its length
_TRANSACTION_FILE, _TRANSACTION_SECTION = 12, 21  # `Manifest` fields
_OPERATIONS = range(100, 200)  # `Transaction.operation`'s field numbers
# `Manifest.fragments`, `DataFragment.files`, `DataFile.path` and `DataFile.file_size_bytes`;
# `DataFragment.id` and `.deletion_file`; `DeletionFile.file_type` (0: Arrow, 1: bitmap),
# `.read_version` and `.id` (Lance's `protos/table.proto`).
_FRAGMENTS, _FILES, _PATH, _SIZE = 2, 2, 1, 6
_FRAGMENT_ID, _DELETION_FILE = 1, 3
_DELETION_TYPE, _READ_VERSION, _DELETION_ID = 1, 2, 3
# A deletion file's path in `data_files`: under the table's folder, not under `data/`.
DELETIONS = "_deletions/"


def operation(location: StoreLocation, name: str, version: int) -> int | None:
    """The `Transaction.operation` field number of `version` of table `name`, or None when it
    cannot be told: the version cleaned up, no transaction recorded, a format not known."""
    from google.protobuf.message import DecodeError

    try:
        read = _manifest(location, name, version)
        if read is None:
            return None
        raw, message = read
        manifest = _fields(message)
        section = manifest.get(_TRANSACTION_SECTION)
        if isinstance(section, int):
            transaction = _message(raw, section)
        else:
            file = manifest.get(_TRANSACTION_FILE)
            if not isinstance(file, bytes) or not file:
                return None
            got = _read(location, name, [f"_transactions/{file.decode()}"])
            if got is None:
                return None
            transaction = got
        return next((n for n in _fields(transaction) if n in _OPERATIONS), None)
    except (OSError, ValueError, struct.error, UnicodeDecodeError, DecodeError):
        return None


def data_files(location: StoreLocation, name: str, version: int) -> list[tuple[str, int]] | None:
    """The data files `version` of table `name` reads: each one's path under the table's
    `data/` and the size Lance recorded when it wrote it (0 when it recorded none), and its
    fragments' deletion files (`_deletions/…`, under the table's folder, size 0: Lance
    records none; one gone fails every read as a data file does); None when that cannot be
    told (the manifest gone or in a format not known)."""
    from google.protobuf.message import DecodeError

    try:
        read = _manifest(location, name, version)
        if read is None:
            return None
        files = []
        for fragment in _repeated(read[1], _FRAGMENTS):
            for file in _repeated(fragment, _FILES):
                fields = _fields(file)
                path, size = fields.get(_PATH), fields.get(_SIZE, 0)
                if not isinstance(path, bytes) or not isinstance(size, int):
                    return None
                files.append((path.decode(), size))
            deletion = _deletion_path(fragment)
            if deletion is not None:
                files.append((deletion, 0))
        return files
    except (OSError, ValueError, struct.error, UnicodeDecodeError, DecodeError):
        return None


def _deletion_path(fragment: bytes) -> str | None:
    """The path of a `DataFragment`'s deletion file under the table's folder, or None."""
    fields = _fields(fragment)
    deletion = fields.get(_DELETION_FILE)
    if not isinstance(deletion, bytes):
        return None
    found = _fields(deletion)
    kind = found.get(_DELETION_TYPE, 0)
    read, number = found.get(_READ_VERSION, 0), found.get(_DELETION_ID, 0)
    fragment_id = fields.get(_FRAGMENT_ID, 0)
    if not all(isinstance(n, int) for n in (kind, read, number, fragment_id)):
        raise ValueError("a deletion file not in the format known")
    return f"{DELETIONS}{fragment_id}-{read}-{number}.{'bin' if kind == 1 else 'arrow'}"


# The last bytes of every Lance data file, legacy and v2 formats alike. A file overwritten at
# its own size (zeros, as a crash of some filesystems leaves the blocks last written) keeps
# the size the commit check compares, not these.
LANCE_MAGIC = b"LANC"


def _footer(path: Path, size: int) -> bytes:
    """The last four bytes of the data file `path` of `size` bytes (a regular file: its size
    matched what Lance wrote)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        return os.pread(fd, 4, max(size - 4, 0))
    finally:
        os.close(fd)


def file_path(store: Path, name: str, path: str) -> Path:
    """Where the data or deletion file `path` (as `data_files` names it) of table `name` of
    the local store at `store` lies."""
    table = store / f"{name}.lance"
    return table / path if path.startswith(DELETIONS) else table / "data" / path


def damaged_file(location: StoreLocation, name: str, version: int) -> str | None:
    """The first data file that `version` of table `name` of a local store reads and that is
    gone, not the size Lance wrote it at, or no longer ends in Lance's footer (or a deletion
    file of it gone or emptied), in words."""
    return damaged_among(location, name, data_files(location, name, version) or ())


# A data or deletion file as `data_files` names it, the size Lance wrote it at and, once a
# snapshot or tail recorded it, its mtime_ns then (`stamped`).
DataFile = tuple[str, int] | tuple[str, int, int]


def stamped(location: StoreLocation, name: str, files: Sequence[DataFile]) -> list[DataFile]:
    """`files` of table `name` each with its mtime_ns as it is now (a file gone, without)."""
    assert location.path is not None
    out: list[DataFile] = []
    for path, size, *_ in files:
        try:
            out.append((path, size, file_path(location.path, name, path).stat().st_mtime_ns))
        except OSError:
            out.append((path, size))
    return out


def recorded_files(recorded: Any) -> dict[str, list[DataFile]] | None:
    """The data files a snapshot's manifest (or a tail's header) records by table, or None
    (none recorded, or not in the form written: then nothing is checked by them)."""
    if not isinstance(recorded, dict):
        return None
    out: dict[str, list[DataFile]] = {}
    for table, files in recorded.items():
        if not isinstance(files, list) or not all(
            isinstance(f, list)
            and len(f) in (2, 3)
            and isinstance(f[0], str)
            and all(type(n) is int for n in f[1:])
            for f in files
        ):
            return None
        out[str(table)] = [(f[0], f[1], f[2]) if len(f) == 3 else (f[0], f[1]) for f in files]
    return out


def damaged_among(
    location: StoreLocation, name: str, files: Sequence[DataFile], *, gone: bool = True
) -> str | None:
    """`damaged_file` of the data `files` of table `name`, known beforehand (`checked_among`)."""
    return checked_among(location, name, files, gone=gone)[0]


def checked_among(
    location: StoreLocation, name: str, files: Sequence[DataFile], *, gone: bool = True
) -> tuple[str | None, str | None]:
    """The first of the data `files` (path under `data/`, or `_deletions/…` under the
    table's folder, the size written, and its time when recorded) of table `name` that is
    damaged as `damaged_file` tells, and the first whose time is not the one recorded with
    it, in words (one stat each). They are known beforehand (a snapshot records those of its
    version: reading them from the manifest imports protobuf, a tenth of a new process's
    time). As Lance never writes a data file again, one written since was changed in place
    (a byte flipped inside a page, its size and footer intact). Without `gone`, a file that
    is not there is passed over (an older version's, which a clean-up may remove); one there
    is still checked."""
    assert location.path is not None
    written = None
    for path, size, *recorded in files:
        deletion = path.startswith(DELETIONS)
        where = file_path(location.path, name, path)
        try:
            found = where.stat()
            got = found.st_size
            if written is None and recorded and found.st_mtime_ns != recorded[0]:
                written = f"{name}: data file {path} was written since the snapshot recorded it"
            if deletion and got:
                continue  # (its size is not recorded: gone or emptied is what can be told)
            if not deletion and got == size and _footer(where, size) == LANCE_MAGIC:
                continue
        except FileNotFoundError:
            if not gone:
                continue
            return f"{'deletion' if deletion else 'data'} file {path} is gone", written
        except OSError:
            continue  # (access, not damage: the commit says so itself)
        if deletion:
            return f"deletion file {path} is empty", written
        if not size:
            continue
        if got != size:
            return f"data file {path} holds {got:,} bytes, not the {size:,} written", written
        return (
            f"data file {path} no longer ends in Lance's footer (overwritten at its size)",
            written,
        )
    return None, written


def upkeep_note(location: StoreLocation, name: str, version: int) -> str:
    """What `version` of table `name` did in words, when it was the store's upkeep (an index
    built, files compacted); "" for any other commit or one that cannot be told."""
    return UPKEEP.get(operation(location, name, version) or 0, "")


def _manifest(location: StoreLocation, name: str, version: int) -> tuple[bytes, bytes] | None:
    """The manifest file of `version` of table `name` and its `Manifest` message (its
    footer gives where that lies), or None when the file is gone or not Lance's format."""
    raw = _read(location, name, _manifest_names(version))
    if raw is None or len(raw) < _FOOTER.size:
        return None
    at, _, _, magic = _FOOTER.unpack_from(raw, len(raw) - _FOOTER.size)
    if magic != b"LANC":
        return None
    return raw, _message(raw, at)


def _manifest_names(version: int) -> list[str]:
    """Where a version's manifest may be: the newer naming (counting down from 2**64 - 1),
    then the older one."""
    return [f"_versions/{number}.manifest" for number in ((1 << 64) - 1 - version, version)]


def _read(location: StoreLocation, name: str, paths: list[str]) -> bytes | None:
    """The bytes of the first of `paths` (under table `name`) that exists, or None."""
    for path in paths:
        if location.path is not None:
            try:
                return (location.path / f"{name}.lance" / path).read_bytes()
            except FileNotFoundError:
                continue
        import obstore

        try:
            return bytes(obstore.get(location.objects(), f"{name}.lance/{path}").bytes())
        except FileNotFoundError:
            continue
    return None


def _message(raw: bytes, at: int) -> bytes:
    """The message at position `at` of a manifest file: its length, then its bytes."""
    (length,) = _LENGTH.unpack_from(raw, at)
    start = at + _LENGTH.size
    if start + length > len(raw):
        raise ValueError("a message runs past the end of the file")
    return raw[start : start + length]


def _fields(message: bytes) -> dict[int, Any]:
    """The top-level fields of a protobuf message (the last value of each), read without its
    schema: every field is an unknown field of the empty message."""
    return {field.field_number: field.data for field in _unknown(message)}


def _repeated(message: bytes, number: int) -> list[bytes]:
    """Every value of the length-delimited field `number` of a protobuf message, in order."""
    return [
        f.data for f in _unknown(message) if f.field_number == number and isinstance(f.data, bytes)
    ]


def _unknown(message: bytes) -> Any:
    """The fields of a protobuf message read without its schema: every field is an unknown
    field of the empty message (an `UnknownFieldSet`)."""
    from google.protobuf import empty_pb2
    from google.protobuf.unknown_fields import UnknownFieldSet

    parsed = empty_pb2.Empty()
    parsed.ParseFromString(message)
    return UnknownFieldSet(parsed)
