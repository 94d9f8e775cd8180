"""Library warnings: printed as a new process prints them, minus terminal escapes, and in the
resident service only on the stderr of the command that caused them."""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from octobrain.cli.library_log import CallerStderr, CappedLog, PrintableFormatter, install

HOSTILE = "could not read /F\x1b]0;owned\x07\x1b[2J font\x9b31m"


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    logger = logging.getLogger()
    before = list(logger.handlers)
    yield logger
    logger.handlers[:] = before


def test_a_library_warning_reaches_stderr_without_its_escapes(
    root: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    install()
    install()  # once, however often installed
    logging.getLogger("pypdf._reader").warning(HOSTILE)
    logging.getLogger("pypdf._reader").info("not shown")
    assert err.getvalue() == "could not read /F]0;owned[2J font31m\n"  # inert without ESC


def test_in_the_service_another_threads_warning_goes_to_the_log_not_the_command(
    root: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    service_log = io.StringIO()
    command_err = io.StringIO()
    handler = install(elsewhere=logging.StreamHandler(service_log))
    assert isinstance(handler, CallerStderr)
    monkeypatch.setattr(sys, "stderr", command_err)  # as `_run` swaps it for a command
    handler.command_thread = threading.get_ident()
    logging.getLogger("pypdf").warning("the command's own")
    session = threading.Thread(target=logging.getLogger("pypdf").warning, args=("a session's",))
    session.start()
    session.join()
    assert command_err.getvalue() == "the command's own\n"
    assert service_log.getvalue() == "a session's\n"
    handler.command_thread = None  # between commands, everything goes to the log
    logging.getLogger("pypdf").warning("idle")
    assert command_err.getvalue() == "the command's own\n"
    assert service_log.getvalue().endswith("idle\n")


def test_log_lines_carry_no_escape_sequences() -> None:
    # The service's log and `octobrain mcp`'s stderr are read with `tail -f`.
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(PrintableFormatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("octobrain.test_library_log")
    logger.addHandler(handler)
    try:
        logger.warning(HOSTILE)
    finally:
        logger.removeHandler(handler)
    assert (
        out.getvalue()
        == "WARNING octobrain.test_library_log: could not read /F]0;owned[2J font31m\n"
    )


def test_the_services_log_starts_again_past_its_bound(tmp_path: Path) -> None:
    # A service lives as long as its clients keep it busy and logs what they cause; nothing
    # shortened its log file (a refusal a second for a day is some 15 MB, tracebacks more).
    path = tmp_path / "service.log"
    # As the service's client opens it: written from its start, not appended to.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    stream = os.fdopen(fd, "w", buffering=1)
    handler = CappedLog(stream, limit=4096)
    logger = logging.getLogger("octobrain.test_library_log.capped")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for i in range(1000):
            logger.warning("refused request %04d %s", i, "x" * 80)
    finally:
        logger.removeHandler(handler)
        stream.close()
    text = path.read_text(encoding="utf-8")
    assert len(text) < 4096 + 200, len(text)
    assert text.startswith("(log cut at 4,096 bytes; what follows is newer)\n")
    assert "refused request 0999" in text and "refused request 0000" not in text
    assert "\0" not in text  # written from the start after a cut, not after a hole
