"""The exit code of a URL that cannot be fetched, as `octobrain --help` gives it, for `knowledge
index`, `search --source` and `read` alike: 1 when the network, a name server or the URL's
server failed (asked again later, it may answer), 2 when the URL is the mistake (malformed,
refused by a rule, naming a host or page that is not there). A real HTTP server on loopback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from tests.server_support import server_env

from .conftest import Server

SCOPE = ("--scope", "github.com/acme/api")
COMMANDS = {
    "index": lambda url: ["index", url],
    "search": lambda url: ["search", "widgets", "--source", url],
    "read": lambda url: ["read", url],
}


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def no_name(*_: object, **__: object) -> list[object]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def no_answer(*_: object, **__: object) -> list[object]:
    raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return server_env(
        tmp_path / "data",
        OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS="127.0.0.1",
        OCTOBRAIN_KNOWLEDGE_FETCH_TIMEOUT_SECS="1",  # (the dripping body: cut at 1 s)
        OCTOBRAIN_KNOWLEDGE_MAX_REDIRECTS="3",
    )


def test_each_url_failure_exits_with_the_code_help_gives(
    env: dict[str, str], server: Server
) -> None:
    # `search --source` exited 2 for every one of them (its error, renamed `--source`, lost
    # that the server had failed), a redirect loop and a redirect to a port past 65535 exited
    # 2 for all three (the server's doing, not the command line's).
    server.routes.update({
        "/down": (503, {}, b"down"),
        "/busy": (429, {}, b"slow down"),
        "/internal": (500, {}, b"oops"),
        "/gone": (410, {}, b""),
        "/forbidden": (403, {}, b""),
        "/loop": (302, {"Location": "/loop"}, b""),
        "/to-port": (302, {"Location": "http://127.0.0.1:99999/"}, b""),
        "/to-ftp": (302, {"Location": "ftp://example.com/file"}, b""),
        "/to-space": (302, {"Location": "http://exa mple.com/"}, b""),
        "/to-private": (302, {"Location": "http://169.254.169.254/latest"}, b""),
        "/drip": (200, {"Content-Type": "text/plain"}, (0.3, [b"x"] * 20)),
    })  # fmt: skip
    tls = f"https://127.0.0.1:{server.port}/"  # (a server that does not speak TLS)
    failed = {  # the network or the server: 1
        "HTTP 503": server.url("/down"),
        "HTTP 429": server.url("/busy"),
        "HTTP 500": server.url("/internal"),
        "a redirect loop": server.url("/loop"),
        "a redirect to port 99999": server.url("/to-port"),
        "a redirect to a host with a space": server.url("/to-space"),
        "a body past the deadline": server.url("/drip"),
        "a refused connection": f"http://127.0.0.1:{closed_port()}/",
        "TLS": tls,
    }
    mistaken = {  # the URL: 2
        "HTTP 404": server.url("/missing"),
        "HTTP 410": server.url("/gone"),
        "HTTP 403": server.url("/forbidden"),
        "a redirect to ftp:": server.url("/to-ftp"),
        "a redirect to a private address": server.url("/to-private"),
        "a port past 65535": "http://127.0.0.1:70000/",
        "not a URL's host": "http://xn--/",
    }
    expected = {(what, cmd): 1 for what in failed for cmd in COMMANDS}
    expected |= {(what, cmd): 2 for what in mistaken for cmd in COMMANDS}
    got, said = {}, {}
    for what, url in {**failed, **mistaken}.items():
        for cmd, args in COMMANDS.items():
            got[what, cmd], said[what, cmd] = run(env, *args(url))
    assert got == expected, {key: said[key] for key in got if got[key] != expected[key]}
    tls_said = f"error: source: {tls.rstrip('/')}: the TLS handshake failed ([SSL"
    assert said["TLS", "read"].startswith(tls_said), said["TLS", "read"]
    assert "redirected to http://127.0.0.1:99999/: port" in said["a redirect to port 99999", "read"]
    to_space = f"{server.url('/to-space')}: redirected to http://exa%20mple.com/, whose host"
    assert to_space in said["a redirect to a host with a space", "read"]
    assert said["a redirect to a host with a space", "read"].endswith('(found " ")')
    to_ftp = f"{server.url('/to-ftp')}: redirected to ftp://example.com/file; only http and"
    assert to_ftp in said["a redirect to ftp:", "search"], said["a redirect to ftp:", "search"]


def test_a_host_no_host_name_could_be_is_refused_before_any_lookup(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sent on percent-encoded, "exa%20mple.com" went to the name servers: "no such host".
    looked_up: list[object] = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: looked_up.append(a) or no_name())
    for url, found in [
        ("http://exa mple.com/", '" "'),
        ("https://exa<mple.com/docs", '"<"'),
        ("http://ex%41mple.com/", '"%"'),
        ("http://exa\u202emple.com/", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ]:
        for cmd, args in COMMANDS.items():
            code, said = run(env, *args(url))
            option = "--source" if cmd == "search" else "source"
            rule = 'has no valid host: a host name holds letters, digits, "-", "." and "_" only'
            assert code == 2 and said.startswith(f"error: {option}: URL "), said
            assert said.endswith(f"{rule} (found {found})"), said
    assert looked_up == []
    code, said = run(env, "read", "http://[zz]/")  # (a traceback)
    assert code == 2 and said.startswith('error: source: "http://[zz]/" is not a valid URL'), said


def test_a_private_address_is_refused_as_a_mistake(env: dict[str, str]) -> None:
    del env["OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS"]
    for args in COMMANDS.values():
        code, said = run(env, *args("http://10.1.2.3/docs"))
        assert code == 2 and "refusing 10.1.2.3" in said, said


def test_a_host_no_name_server_knows_is_a_mistake_one_that_cannot_answer_is_not(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both said "cannot resolve host"; a name that does not exist is the URL's, as a 404 is.
    url = "https://nonexistent.example/docs"
    monkeypatch.setattr(socket, "getaddrinfo", no_name)
    for args in COMMANDS.values():
        code, said = run(env, *args(url))
        assert code == 2 and ': no such host "nonexistent.example": the name servers' in said
    monkeypatch.setattr(socket, "getaddrinfo", no_answer)
    for args in COMMANDS.values():
        code, said = run(env, *args(url))
        assert code == 1 and 'cannot resolve host "nonexistent.example": the name' in said


def run(env: dict[str, str], *args: str) -> tuple[int, str]:
    """`octobrain knowledge <args>` in this process: its exit code and its last stderr line."""
    done = CliRunner().invoke(main, ["knowledge", *SCOPE, *args], env=env)
    assert isinstance(done.exception, SystemExit | None), done.exception  # no traceback
    last = done.stderr.splitlines()[-1] if done.stderr else ""
    assert done.stdout == "" and last.startswith("error: "), (args, done.stdout, done.stderr)
    return done.exit_code, last
