"""What the resident service is sent: a stranger's request, a client gone, a request past the
size bound dropped; out of descriptors it waits and serves again; large freed blocks handed
back."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from octobrain.cli.service_client import PROTOCOL, ask, build_id, service_environment
from tests.service_support import (
    current_settings,
    start_service,
    wait_for,
)
from tests.service_support import env as env  # (the `env` fixture)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/PID/environ")
def test_the_service_hands_large_freed_blocks_back(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # With glibc's moving mmap threshold, the blocks Lance and Arrow free on the service's
    # threads stayed in its arenas: 150-280 MB more at 100k memories after bench cold's commands.
    for key in ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(key, raising=False)
        env.pop(key, None)
    start_service(env)
    info = ask(current_settings(), "status")
    assert info is not None
    environ = Path(f"/proc/{info['pid']}/environ").read_bytes().split(b"\0")
    assert b"MALLOC_MMAP_THRESHOLD_=131072" in environ
    # A user's own allocator settings stand.
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert service_environment(current_settings())["MALLOC_MMAP_THRESHOLD_"] == "65536"
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1048576")
    assert "MALLOC_MMAP_THRESHOLD_" not in service_environment(current_settings())
    # The config file is named for the service only when the user named one or there is one:
    # naming a missing default made every warm answer warn that it does not exist.
    settings = current_settings()
    assert not os.path.exists(settings.config_file)
    assert "OCTOBRAIN_CONFIG_PATH" not in service_environment(settings)
    Path(settings.config_file).write_text("[search]\ndefault_limit = 5\n")
    assert service_environment(settings)["OCTOBRAIN_CONFIG_PATH"] == settings.config_file


@pytest.mark.parametrize(
    "line",
    [b"{}", b'{"op": "status"}', b'{"op": "run", "protocol": 2, "build": "x"}',
     b'{"op": "run", "protocol": "2", "build": "0123456789abcdef01234567"}', b"[1, 2]"],
)  # fmt: skip
def test_a_request_no_octobrain_client_sends_is_dropped_and_the_service_stays(
    env: dict[str, str], line: bytes
) -> None:
    # Any such request used to read as "another build": the service stepped aside, and the
    # next commands ran cold.
    start_service(env)
    pid = ask(current_settings(), "status")["pid"]  # type: ignore[index]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(current_settings().socket_path)
        sock.sendall(line + b"\n")
        assert sock.recv(100) == b""  # closed without an answer
    status = ask(current_settings(), "status")
    assert status is not None and status["pid"] == pid


def test_a_client_gone_before_asking_is_not_logged_as_a_stranger(env: dict[str, str]) -> None:
    # A client killed (or interrupted) as it connected was logged "dropped a request that is
    # not an octobrain client's", as a stranger's request is: 4 lines in the log of 150
    # clients killed 20-90 ms in.
    start_service(env)
    for _ in range(3):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(current_settings().socket_path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(current_settings().socket_path)
        sock.sendall(b'{"op": "nonsense"}\n')
        assert sock.recv(100) == b""
    assert ask(current_settings(), "status") is not None
    logged = Path(current_settings().log_path).read_text(encoding="utf-8")
    assert logged.count("dropped a request that is not an octobrain client's") == 1, logged


def test_a_request_past_the_size_bound_is_dropped_unanswered(env: dict[str, str]) -> None:
    # A line without end was kept whole in memory, and grown by copying (quadratic).
    from octobrain.cli.service_requests import REQUEST_BYTES

    start_service(env)
    pid = ask(current_settings(), "status")["pid"]  # type: ignore[index]
    padded = {"op": "status", "protocol": PROTOCOL, "build": build_id(), "pad": "x" * REQUEST_BYTES}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(current_settings().socket_path)
        with contextlib.suppress(OSError):  # the service may close while this is sent
            sock.sendall(json.dumps(padded).encode() + b"\n")
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(100) == b""  # closed without an answer
    status = ask(current_settings(), "status")
    assert status is not None and status["pid"] == pid


def test_a_service_out_of_descriptors_waits_and_serves_again(env: dict[str, str]) -> None:
    # accept() failing with EMFILE escaped the accept loop: the service was gone.
    import resource

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    started = subprocess.run(
        [sys.executable, "-m", "octobrain", "service", "start", "--wait", "90"],
        env=env, capture_output=True, timeout=120, preexec_fn=few_descriptors,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    pid = ask(current_settings(), "status")["pid"]  # type: ignore[index]
    held = []
    try:
        for _ in range(120):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(current_settings().socket_path)
            held.append(sock)
        time.sleep(1.0)
    finally:
        for sock in held:
            sock.close()
    assert wait_for(lambda: (ask(current_settings(), "status") or {}).get("pid") == pid, 30)
