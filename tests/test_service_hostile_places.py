"""Where the resident service lives: a runtime directory or socket path it cannot use is named,
another user's left alone, and something else listening on its socket is replaced."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from octobrain.cli.service_client import ask
from octobrain.cli.service_settings import load_settings
from tests.service_hostile_support import SCOPE, _cli, _run
from tests.service_hostile_support import env as env  # the fixture, shared
from tests.service_support import env as service_env  # noqa: F401  (the `env` fixture)
from tests.service_support import wait_for


def test_a_listener_answering_garbage_on_the_socket_is_replaced_by_a_service(
    env: dict[str, str],
) -> None:
    # Before: a program answering what no service says was left on the socket for good, every
    # command ran in-process and `service status` said "not running".
    settings = load_settings()
    assert settings is not None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(settings.socket_path)
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()

    def answer_garbage() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=answer_garbage)
    thread.start()
    try:
        done = _cli(env, "memory", "--scope", SCOPE, "recent")
        out, err = done.communicate(timeout=120)
        assert (done.returncode, out) == (0, b"No memories yet.\n"), err
        assert wait_for(lambda: ask(settings, "status") is not None, 90), "garbage kept the socket"
    finally:
        stop.set()
        thread.join()
        listener.close()


def _unusable(kind: str, base: Path) -> None:
    root = base / "octobrain"
    if kind == "another user's":
        root.mkdir(mode=0o700)
        os.chown(root, 65534, 65534)
    elif kind == "a link":
        (base / "elsewhere").mkdir(mode=0o700)
        root.symlink_to(base / "elsewhere")
    elif kind == "open to others":
        root.mkdir()
        root.chmod(0o777)
    else:
        root.write_text("not a directory")


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("another user's", "belongs to uid 65534, not to you (uid {uid})"),
        ("a link", "is a symbolic link (to {base}/elsewhere)"),
        ("open to others", "has mode 0777, open to other users, not 0700"),
        ("a file", "is not a directory"),
    ],
)
def test_service_status_names_what_is_wrong_with_the_runtime_directory(
    env: dict[str, str], kind: str, said: str
) -> None:
    # Before: "unavailable here (no Unix sockets, an unreadable config file, or an unsafe
    # runtime directory)", whichever it was, and every command ran in-process unsaid.
    if kind == "another user's" and os.getuid() != 0:
        pytest.skip("needs root to give a directory away")
    base = Path(tempfile.mkdtemp(prefix="ob-", dir="/tmp"))
    try:
        _unusable(kind, base)
        done = _run({**env, "XDG_RUNTIME_DIR": str(base)}, "service", "status")
        recent = _run({**env, "XDG_RUNTIME_DIR": str(base)}, "memory", "--scope", SCOPE, "recent")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    wrong = said.format(uid=os.getuid(), base=base)
    assert (done.returncode, done.stderr) == (
        1,
        f"error: service: unavailable: the runtime directory {base}/octobrain {wrong}; "
        "commands run in-process\n",
    )
    assert (recent.returncode, recent.stdout) == (0, "No memories yet.\n")


def test_an_xdg_runtime_dir_of_another_user_is_left_alone(env: dict[str, str]) -> None:
    # `sudo -E octobrain …` (root, with the user's XDG_RUNTIME_DIR) made a root-owned
    # `octobrain` folder in the user's /run/user/<uid>: from then on every command of the
    # user's own found "belongs to uid 0, not to you", and no service, until they removed it.
    if os.getuid() != 0:
        pytest.skip("needs root to give a directory away")
    base = Path(tempfile.mkdtemp(prefix="ob-", dir="/tmp"))
    try:
        os.chown(base, 12345, -1)
        done = _run({**env, "XDG_RUNTIME_DIR": str(base)}, "service", "status")
        assert list(base.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert f"socket /tmp/octobrain-{os.getuid()}/" in done.stdout


def test_service_status_names_a_socket_path_too_long(env: dict[str, str]) -> None:
    base = Path(tempfile.mkdtemp(prefix="ob-", dir="/tmp"))
    deep = base / ("d" * 90)
    deep.mkdir()
    try:
        done = _run({**env, "XDG_RUNTIME_DIR": str(deep)}, "service", "status")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: service: unavailable: its socket path {deep}/octobrain/")
    assert "bytes, over the 103 a Unix socket takes (a shorter XDG_RUNTIME_DIR)" in done.stderr


def test_a_directory_at_the_socket_path_is_named_not_started_into(env: dict[str, str]) -> None:
    # Each service started there crashed on it (IsADirectoryError removing a stale socket),
    # `service start` waited its 30 s for an answer, and `status` said "not running".
    settings = load_settings()
    assert settings is not None
    os.mkdir(settings.socket_path)
    started = _run(
        {**env, "OCTOBRAIN_SERVICE_WAIT_SECONDS": "5"}, "service", "start", "--wait", "20"
    )
    status = _run(env, "service", "status")
    recent = _run(env, "memory", "--scope", SCOPE, "recent")
    said = (
        f"error: service: unavailable: its socket path {settings.socket_path} is a directory; "
        "remove it (rmdir); commands run in-process\n"
    )
    assert (started.returncode, started.stderr) == (1, said)
    assert (status.returncode, status.stderr) == (1, said)
    assert (recent.returncode, recent.stdout) == (0, "No memories yet.\n")
    assert os.path.isdir(settings.socket_path)  # (the user's to remove)
