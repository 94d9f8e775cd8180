"""What pypdf logs while it reads around a damaged PDF, told once per file.

pypdf logs a warning for each fault it repairs (`incorrect startxref pointer(2)`, `parsing for
Object Streams`, …), each as a line of its own that names no file, straight onto the user's
terminal or the MCP server's stderr, as many as the file has faults. While a thread reads a
PDF (`gathered`), pypdf's records from that thread are kept instead, and one warning of ours
names the file, counts them and quotes the first; records from any other thread go on as
they did.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

_QUOTED_CHARS = 200  # of pypdf's first message (it may quote what it could not read)
_reading = threading.local()  # `records`: the list the current thread gathers into, if any
_install_lock = threading.Lock()
_installed = False


class _Gather(logging.Handler):
    """On the `pypdf` logger (which no longer propagates): a warning of a thread reading a PDF
    is kept for its notice; any other record goes to the root logger's handlers, as it did."""

    def emit(self, record: logging.LogRecord) -> None:
        records = getattr(_reading, "records", None)
        if records is None or record.levelno < logging.WARNING:
            logging.getLogger().handle(record)
        else:
            records.append(record)


def _install() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            pypdf_log = logging.getLogger("pypdf")
            pypdf_log.addHandler(_Gather())
            pypdf_log.propagate = False
            _installed = True


@contextmanager
def gathered(uri: str) -> Iterator[None]:
    """Read a PDF inside: pypdf's warnings of this thread become one warning naming `uri`."""
    _install()
    records: list[logging.LogRecord] = []
    outer = getattr(_reading, "records", None)
    _reading.records = records
    try:
        yield
    finally:
        _reading.records = outer
        if records:
            first = " ".join(records[0].getMessage().split())
            if len(first) > _QUOTED_CHARS:
                first = first[:_QUOTED_CHARS] + "…"
            log.warning(
                "%s: the PDF is damaged and was read around its faults (pypdf reported %d; "
                "the first: %s)",
                uri,
                len(records),
                first,
            )
