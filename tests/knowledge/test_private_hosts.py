"""`knowledge.allow_private_hosts` with ports, against real HTTP servers on two loopback ports,
and the address a fetch connects to being the address that was checked."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import load_config
from octobrain.errors import ConfigError, InvalidInput
from octobrain.knowledge.fetch import FetchError, resolve_checked

from .conftest import HTML_PAGE, MakeKnowledge, Server

SECRET = (200, {"Content-Type": "text/plain"}, b"admin console: drop every table")


@pytest.fixture
def admin(server: Server) -> Iterator[Server]:
    """A second local HTTP server, on another port (a database's admin, say); `server` (the
    first) also forgets the pages read by earlier tests."""
    srv = Server()
    srv.routes["/admin"] = SECRET
    try:
        yield srv
    finally:
        srv.close()


def test_host_and_port_allows_that_port_alone_redirects_included(
    make_knowledge: MakeKnowledge, server: Server, admin: Server
) -> None:
    # Before: "127.0.0.1" was the only way to allow the docs server, and it opened every port.
    server.routes["/guide"] = (200, {"Content-Type": "text/html"}, HTML_PAGE)
    server.routes["/moved"] = (302, {"Location": admin.url("/admin")}, b"")
    k = make_knowledge(allow_private_hosts=(f"127.0.0.1:{server.port}",))
    assert "fifty widgets per page" in k.read(server.url("/guide")).text
    for source in (admin.url("/admin"), server.url("/moved")):
        with pytest.raises(InvalidInput) as refused:
            k.read(source)
        said = str(refused.value)
        assert said.startswith("source: refusing 127.0.0.1 (127.0.0.1)"), said
        assert "knowledge.allow_private_hosts" in said
        assert f"OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS=127.0.0.1:{admin.port} " in said
    assert admin.hits == {}  # refused before connecting
    # A plain host still allows every port, as it always did.
    assert (
        "drop every table"
        in make_knowledge(allow_private_hosts=("127.0.0.1",)).read(admin.url("/admin")).text
    )


def test_ports_apply_to_names_networks_and_ipv6() -> None:
    assert resolve_checked("localhost", 8000, ("localhost:8000",)) in ("127.0.0.1", "::1")
    assert resolve_checked("10.1.2.3", 8000, ("10.0.0.0/8:8000",)) == "10.1.2.3"
    assert resolve_checked("::1", 8000, ("[::1]:8000",)) == "::1"
    assert resolve_checked("::1", 9, ("[::1]",)) == "::1"
    for host, port, allow in [
        ("localhost", 8001, "localhost:8000"),
        ("10.1.2.3", 80, "10.0.0.0/8:8000"),
        ("::1", 8001, "[::1]:8000"),
    ]:
        with pytest.raises(FetchError, match=r"knowledge\.allow_private_hosts"):
            resolve_checked(host, port, (allow,))
    with pytest.raises(FetchError, match=r"ALLOW_PRIVATE_HOSTS=\[::1\]:8001 "):
        resolve_checked("::1", 8001, ())


@pytest.mark.parametrize(
    "entry",
    ["127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:", "docs.internal:８０", ":8000",
     "[127.0.0.1]:80", "[::1", "[::1]8000", "[docs.internal]:80", "a:b:c.example", "bad host!"],
)  # fmt: skip
def test_a_bad_entry_names_the_setting_and_the_rule(tmp_path: Path, entry: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[knowledge]\nallow_private_hosts = ["{entry}"]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == "knowledge.allow_private_hosts"
    assert "with :PORT (1..65535, that port only)" in str(info.value)
    assert "in brackets before a port, e.g. [::1]:8000" in str(info.value)


def test_the_environment_takes_bracketed_ipv6_with_a_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the refusal tells one to write it: "[::1]:8000" was read as a broken TOML array.
    monkeypatch.setenv("OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS", "[::1]:8000, 127.0.0.1:8000")
    config = load_config(tmp_path / "absent.toml")
    assert config.knowledge.allow_private_hosts == ("[::1]:8000", "127.0.0.1:8000")


def test_the_connection_goes_to_the_address_that_was_checked(
    make_knowledge: MakeKnowledge, admin: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DNS rebinding: the name answers a public address when checked, then 127.0.0.1. Were the
    # connection made by name, the second lookup would reach the local admin server.
    real_lookup, real_connect = socket.getaddrinfo, socket.create_connection
    answers = iter(["93.184.216.34"])
    connected: list[str] = []

    def rebinding(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host != "docs.example.com":
            return real_lookup(host, port, *args, **kwargs)
        address = next(answers, "127.0.0.1")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    def no_outside_network(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        connected.append(address[0])
        if address[0] == "93.184.216.34":
            raise ConnectionRefusedError("(the test has no outside network)")
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(socket, "create_connection", no_outside_network)
    url = f"http://docs.example.com:{admin.port}/admin"
    with pytest.raises(InvalidInput, match=r"cannot connect to the server"):
        make_knowledge().read(url)
    assert connected == ["93.184.216.34"] and admin.hits == {}


def test_ipv6_loopback_listed_is_fetched(make_knowledge: MakeKnowledge, server: Server) -> None:
    # Before: "::1" (or "[::1]:PORT") in the list never allowed http://[::1]:PORT/: ::1 was
    # checked only as the IPv4 an IPv4-compatible address carries (0.0.0.1), and the refusal
    # said to add ::1, which was there.
    try:
        docs = Server("::1")
    except OSError as exc:  # (a machine or container without IPv6 on its loopback)
        pytest.skip(f"no IPv6 loopback here: {exc}")
    docs.routes["/guide"] = (200, {"Content-Type": "text/html"}, HTML_PAGE)
    try:
        for allow in ("::1", f"[::1]:{docs.port}"):
            page = make_knowledge(allow_private_hosts=(allow,)).read(docs.url("/guide"))
            assert "fifty widgets per page" in page.text
        with pytest.raises(InvalidInput, match=r"^source: refusing ::1 \(::1\)"):
            make_knowledge(allow_private_hosts=("[::1]:1",)).read(docs.url("/guide"))
    finally:
        docs.close()


def test_a_port_past_65535_is_refused_not_wrapped_round(
    make_knowledge: MakeKnowledge, server: Server, admin: Server
) -> None:
    # The system's lookup keeps a port's low 16 bits: http://127.0.0.1:<port + 65536>/admin was
    # fetched from <port> under a URL naming another, and a refusal of such a URL said to add
    # the port to knowledge.allow_private_hosts, whose entries refuse it.
    server.routes["/moved"] = (
        302,
        {"Location": f"http://127.0.0.1:{admin.port + 65536}/admin"},
        b"",
    )
    k = make_knowledge(allow_private_hosts=("127.0.0.1",))
    for source in (f"http://127.0.0.1:{admin.port + 65536}/admin", server.url("/moved")):
        with pytest.raises(InvalidInput) as refused:
            k.read(source)
        said = str(refused.value)
        assert said.startswith("source: http://127.0.0.1:"), said
        assert f"port {admin.port + 65536} is not a TCP port (1–65535)" in said, said
    with pytest.raises(InvalidInput, match=r"port 0 is not a TCP port \(1–65535\)"):
        make_knowledge().read("http://127.0.0.1:0/admin")
    assert admin.hits == {}
