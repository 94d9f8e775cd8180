"""URL fetching against a real HTTP server on loopback: refusal, routing, caps, errors."""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import re
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
from mcp import Client

from octobrain.config import Config, EmbeddingConfig, KnowledgeConfig, MemoryConfig
from octobrain.errors import InvalidInput
from octobrain.knowledge.fetch import FetchError, resolve_checked
from octobrain.server import BrainPool
from tests.server_support import PROJECT_A, call, run, server_for

from .conftest import HTML_PAGE, MakeKnowledge, Server, config, write_pdf

LOCAL = ("127.0.0.1",)


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "10.1.2.3", "192.168.0.10", "169.254.169.254", "::1",
             "::ffff:127.0.0.1", "100.64.0.1", "0.0.0.0", "fe80::1",
             # Python 3.11's `is_global` lets these three through:
             "192.0.0.8", "fec0::1", "::ffff:0:7f00:1"]
)  # fmt: skip
def test_private_addresses_are_refused_by_default(host: str) -> None:
    with pytest.raises(FetchError, match=r"^source: refusing .*knowledge.allow_private_hosts"):
        resolve_checked(host, 80, ())


def test_a_host_that_does_not_resolve_in_the_time_left_is_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The resolver has no timeout of its own: a lookup that hung held the fetch past its limit.
    import socket
    import threading

    release = threading.Event()

    def slow(*_: object, **__: object) -> list[object]:
        release.wait(30)
        raise socket.gaierror("gave up")

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    try:
        with pytest.raises(FetchError, match=r'cannot resolve host "docs\.example" within the'):
            resolve_checked("docs.example", 80, (), 0.2)
    finally:
        release.set()


def test_allow_list_takes_addresses_networks_and_host_names() -> None:
    assert resolve_checked("10.1.2.3", 80, ("10.0.0.0/8",)) == "10.1.2.3"
    assert resolve_checked("127.0.0.1", 80, ("127.0.0.1",)) == "127.0.0.1"
    assert resolve_checked("localhost", 80, ("localhost",)) in ("127.0.0.1", "::1")
    with pytest.raises(FetchError):
        resolve_checked("10.1.2.3", 80, ("192.168.0.0/16", "docs.internal"))


def test_loopback_url_refused_without_the_allow_list(
    make_knowledge: MakeKnowledge, server: Server
) -> None:
    server.routes["/page"] = (200, {"Content-Type": "text/html"}, HTML_PAGE)
    with pytest.raises(InvalidInput, match=r"^source: refusing 127\.0\.0\.1"):
        make_knowledge().read(server.url("/page"))
    assert server.hits == {}  # refused before connecting


def test_html_and_pdf_over_http_are_indexed_and_found(
    make_knowledge: MakeKnowledge, server: Server, tmp_path: Path
) -> None:
    pdf = write_pdf(tmp_path / "p.pdf", [["Quarterly capacity plan", "Add four racks in March."]])
    server.routes["/docs/widgets"] = (200, {"Content-Type": "text/html; charset=utf-8"}, HTML_PAGE)
    server.routes["/plan"] = (200, {"Content-Type": "application/pdf"}, pdf.read_bytes())
    k = make_knowledge(allow_private_hosts=LOCAL)
    result = k.search("quota breach retry after seconds", source=server.url("/docs/widgets/"))
    assert result.indexed is not None and result.indexed.status == "indexed"
    assert result.hits[0].section_path[-1] == "Errors"
    assert result.hits[0].uri == server.url("/docs/widgets")  # trailing slash normalised
    found = k.search("racks March capacity", source=server.url("/plan")).hits
    assert found and "four racks" in found[0].text
    assert k.read(server.url("/plan")).doc_type.value == "pdf"


@pytest.mark.parametrize(
    ("path", "content_type", "body", "expected"),
    [
        (
            "/notes.txt",
            "text/html",
            b"<html><body><h1>T</h1><p>Hello page</p></body></html>",
            "html",
        ),
        ("/readme.md", "text/plain", b"# Readme\n\nPlain markdown.", "markdown"),
        ("/readme.md", "application/octet-stream", b"# Readme\n\nUntyped bytes.", "markdown"),
        ("/data", "text/csv", b"a,b\n1,2\n", "text"),
    ],
)
def test_content_type_routes_extraction(
    make_knowledge: MakeKnowledge, server: Server, path: str, content_type: str, body: bytes,
    expected: str,
) -> None:  # fmt: skip
    server.routes[path] = (200, {"Content-Type": content_type}, body)
    doc = make_knowledge(allow_private_hosts=LOCAL).read(server.url(path))
    assert doc.doc_type.value == expected


def test_the_charset_a_server_names_decodes_the_page(
    make_knowledge: MakeKnowledge, server: Server
) -> None:
    page = "<html><head><title>Меню</title></head><body><p>Кофе и чай.</p></body></html>"
    for path, header in (
        ("/ru", 'text/html; Charset="KOI8-R"'),
        ("/ru2", "text/html;charset=koi8-r"),
    ):
        server.routes[path] = (200, {"Content-Type": header}, page.encode("koi8-r"))
        doc = make_knowledge(allow_private_hosts=LOCAL).read(server.url(path))
        assert (doc.title, doc.text) == ("Меню", "Кофе и чай.")
    # Plain text and markdown too: they were read as UTF-8, else Latin-1 ("ëÏÆÅ").
    for path, header in (
        ("/ru.txt", "text/plain; charset=koi8-r"),
        ("/ru.md", "text/markdown; charset=KOI8-R"),
    ):
        server.routes[path] = (
            200,
            {"Content-Type": header},
            "# Меню\n\nКофе и чай.\n".encode("koi8-r"),
        )
        doc = make_knowledge(allow_private_hosts=LOCAL).read(server.url(path))
        assert doc.text == "# Меню\n\nКофе и чай." and doc.title == "Меню"


def test_a_url_holding_a_credential_is_refused_before_it_is_fetched(
    make_knowledge: MakeKnowledge, server: Server
) -> None:
    # The address is stored and printed in every listing and search hit: a password or token
    # in it went to every later session (`memorize` refused the same text).
    page = "/page?access_token=ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    server.routes[page] = (200, {"Content-Type": "text/plain"}, b"Runbook: restart the pods.")
    k = make_knowledge(allow_private_hosts=LOCAL)
    secret_urls = {
        "password in a URL": server.url("/page").replace("//", "//admin:hunter2@"),
        "GitHub token": server.url(page),
    }
    for kind, url in secret_urls.items():
        with pytest.raises(InvalidInput, match=rf"^source: the URL holds a credential \({kind}\)"):
            k.search("restart pods", source=url)
    assert k.list_sources() == [] and server.hits == {}
    allowing = make_knowledge(cfg=dataclasses.replace(
        config(allow_private_hosts=LOCAL), memory=MemoryConfig(secrets="allow")
    ))  # fmt: skip
    assert allowing.search("restart pods", source=secret_urls["GitHub token"]).hits


def test_unsupported_content_type_and_non_2xx_are_clear_errors(
    make_knowledge: MakeKnowledge, server: Server
) -> None:
    k = make_knowledge(allow_private_hosts=LOCAL)
    server.routes["/img"] = (200, {"Content-Type": "image/png"}, b"\x89PNG....")
    with pytest.raises(InvalidInput, match=r'^source: .*unsupported content type "image/png"'):
        k.read(server.url("/img"))
    with pytest.raises(InvalidInput, match=r"^source: .*/missing: HTTP 404 Not Found"):
        k.read(server.url("/missing"))
    server.routes["/boom"] = (503, {}, b"down")
    with pytest.raises(InvalidInput, match=r"HTTP 503"):
        k.read(server.url("/boom"))


def test_redirects_are_followed_up_to_the_cap(
    make_knowledge: MakeKnowledge, server: Server
) -> None:
    server.routes["/final"] = (200, {"Content-Type": "text/plain"}, b"Arrived safely.")
    server.routes["/r2"] = (302, {"Location": "/final"}, b"")
    server.routes["/r1"] = (301, {"Location": server.url("/r2")}, b"")
    server.routes["/loop"] = (302, {"Location": "/loop"}, b"")
    k = make_knowledge(allow_private_hosts=LOCAL, max_redirects=3)
    assert k.read(server.url("/r1")).text == "Arrived safely."
    with pytest.raises(InvalidInput, match=r"^source: .*more than 3 redirects"):
        k.read(server.url("/loop"))
    assert server.hits["/loop"] == 4  # the first request plus three redirects, then stop
    assert (
        make_knowledge(allow_private_hosts=LOCAL, max_redirects=1).read(server.url("/r2")).text
        == "Arrived safely."
    )


def test_each_redirect_hop_is_checked(make_knowledge: MakeKnowledge, server: Server) -> None:
    server.routes["/jump"] = (302, {"Location": "http://169.254.169.254/latest/meta-data"}, b"")
    with pytest.raises(InvalidInput, match=r"^source: refusing 169\.254\.169\.254"):
        make_knowledge(allow_private_hosts=LOCAL).read(server.url("/jump"))
    server.routes["/ftp"] = (302, {"Location": "ftp://example.com/file"}, b"")
    with pytest.raises(InvalidInput) as info:  # (it named neither the URL given nor where to)
        make_knowledge(allow_private_hosts=LOCAL).read(server.url("/ftp"))
    assert str(info.value) == (
        f"source: {server.url('/ftp')}: redirected to ftp://example.com/file; "
        "only http and https URLs are fetched"
    )
    server.routes["/idna"] = (302, {"Location": "http://xn--/"}, b"")
    with pytest.raises(InvalidInput, match=r"^source: \S+/idna: redirected to an invalid URL"):
        make_knowledge(allow_private_hosts=LOCAL).read(server.url("/idna"))


def test_size_cap_applies_to_declared_and_streamed_bodies(
    make_knowledge: MakeKnowledge, server: Server
) -> None:
    k = make_knowledge(allow_private_hosts=LOCAL, max_source_bytes=1000)
    server.routes["/big"] = (200, {"Content-Type": "text/plain"}, b"x" * 5000)
    server.routes["/stream"] = (
        200,
        {"Content-Type": "text/plain", "X-No-Length": "1"},
        b"y" * 5000,
    )
    for path in ("/big", "/stream"):
        with pytest.raises(InvalidInput, match=r"^source: .*larger than the 1000-byte cap"):
            k.read(server.url(path))


def test_compressed_bodies_are_decoded_and_inflate_at_most_to_the_cap(
    make_knowledge: MakeKnowledge, server: Server
) -> None:
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    for path, coding, body in (
        ("/gz", "gzip", gzip.compress(HTML_PAGE)),
        ("/zlib", "deflate", zlib.compress(HTML_PAGE)),
        ("/raw", "deflate", raw_deflate.compress(HTML_PAGE) + raw_deflate.flush()),
    ):
        server.routes[path] = (200, {"Content-Type": "text/html", "Content-Encoding": coding}, body)
    k = make_knowledge(allow_private_hosts=LOCAL, max_source_bytes=100_000)
    for path in ("/gz", "/zlib", "/raw"):
        assert "Retry-After" in k.read(server.url(path)).text
    # 64 MiB of zeros in 64 KiB: the cap, not the bomb, bounds what is ever held.
    bomb = gzip.compress(bytes(64 << 20), compresslevel=9)
    server.routes["/bomb"] = (200, {"Content-Type": "text/html", "Content-Encoding": "gzip"}, bomb)
    nested = gzip.compress(gzip.compress(bytes(1 << 20)))
    server.routes["/nested"] = (
        200,
        {"Content-Type": "text/html", "Content-Encoding": "gzip, gzip"},
        nested,
    )
    server.routes["/br"] = (200, {"Content-Type": "text/html", "Content-Encoding": "br"}, b"x")
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInput, match=r"larger than the 100000-byte cap"):
            k.read(server.url("/bomb"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    for path, coding in (("/nested", '"gzip, gzip"'), ("/br", '"br"')):
        with pytest.raises(InvalidInput, match=f"unsupported Content-Encoding {coding}"):
            k.read(server.url(path))


def test_one_fetch_has_one_deadline_however_slowly_the_body_drips(
    make_knowledge: MakeKnowledge, server: Server
) -> None:
    # A byte every 0.2 s never trips a per-read timeout; the fetch's deadline still holds.
    server.routes["/drip"] = (200, {"Content-Type": "text/plain"}, (0.2, [b"x"] * 300))
    k = make_knowledge(allow_private_hosts=LOCAL, fetch_timeout_secs=1.0)
    started = time.monotonic()
    with pytest.raises(InvalidInput, match=r"timed out after 1 s \(knowledge.fetch_timeout_secs"):
        k.read(server.url("/drip"))
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("stall", ["header bytes a second apart", "endless 102 Processing"])
def test_one_fetch_has_one_deadline_while_the_headers_arrive_too(
    make_knowledge: MakeKnowledge, stall: str
) -> None:
    # httpx's timeout bounds each socket read: headers sent a byte at a time, or informational
    # answers without end, kept a fetch (and every knowledge call queued behind it) for good.
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            try:
                if stall.startswith("header"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not stop.is_set():
                    if stall.startswith("header"):
                        conn.sendall(b"a")
                        stop.wait(0.2)
                    else:
                        conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n" * 20)
                        stop.wait(0.005)
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    k = make_knowledge(allow_private_hosts=LOCAL, fetch_timeout_secs=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(InvalidInput, match=r"timed out after 1 s \(knowledge.fetch_timeout"):
            k.read(f"http://127.0.0.1:{port}/page")
        assert time.monotonic() - started < 5
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def test_url_age_triggers_a_check_and_the_hash_decides(
    make_knowledge: MakeKnowledge, server: Server
) -> None:
    server.routes["/page"] = (200, {"Content-Type": "text/html"}, HTML_PAGE)
    url = server.url("/page")
    young = make_knowledge(allow_private_hosts=LOCAL)
    assert young.search("pagination cursor", source=url).indexed.status == "indexed"  # type: ignore[union-attr]
    assert young.search("pagination cursor", source=url).indexed.status == "fresh"  # type: ignore[union-attr]
    assert server.hits["/page"] == 1  # a young URL is not fetched again
    stale = make_knowledge(allow_private_hosts=LOCAL, outdating_days=0.0)
    assert stale.search("pagination cursor", source=url).indexed.status == "unchanged"  # type: ignore[union-attr]
    server.routes["/page"] = (
        200,
        {"Content-Type": "text/html"},
        HTML_PAGE.replace(b"fifty", b"ninety"),
    )
    result = stale.search("ninety widgets per page", source=url)
    assert result.indexed is not None and result.indexed.status == "reindexed"
    assert "ninety" in result.hits[0].text and server.hits["/page"] == 3


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 300_000 + b"\r\n\r\n", "is not valid HTTP"),
        (b"NOT HTTP AT ALL\r\n\r\n", "is not valid HTTP"),
        (b"", "is not valid HTTP"),
    ],
)
def test_a_broken_http_answer_is_said_in_words(
    make_knowledge: MakeKnowledge, answer: bytes, said: str
) -> None:
    # It was "source: http://…: RemoteProtocolError: Receive buffer too long" (a class name
    # of the HTTP library's; headers of 20 MB).
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            with contextlib.suppress(OSError):
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    k = make_knowledge(allow_private_hosts=LOCAL, fetch_timeout_secs=10.0)
    with pytest.raises(InvalidInput) as refused:
        k.read(f"http://127.0.0.1:{port}/page")
    listener.close()
    message = str(refused.value)
    assert f"the server's answer {said}" in message and "Error" not in message, message


def test_a_url_read_again_within_minutes_is_not_fetched_again_and_later_is(
    make_knowledge: MakeKnowledge, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Paging through a URL (`read`, a call a page) fetched it again for every page.
    from octobrain.knowledge import by_url

    server.routes["/guide"] = (200, {"Content-Type": "text/plain"}, b"Rotate the keys.\n")
    now = [1000.0]
    monkeypatch.setattr(by_url.time, "monotonic", lambda: now[0])
    k = make_knowledge(allow_private_hosts=LOCAL)
    assert "Rotate the keys." in k.read(server.url("/guide")).text
    server.routes["/guide"] = (200, {"Content-Type": "text/plain"}, b"Keys are rotated weekly.\n")
    now[0] += 299
    again = make_knowledge(allow_private_hosts=LOCAL).read(server.url("/guide"))
    assert "Rotate the keys." in again.text and server.hits["/guide"] == 1  # the same copy
    now[0] += 2  # 5 minutes past the fetch: what the page says now
    assert "rotated weekly" in k.read(server.url("/guide")).text
    assert server.hits["/guide"] == 2
    with pytest.raises(InvalidInput, match=r"^source: refusing 127\.0\.0\.1"):
        make_knowledge().read(server.url("/guide"))  # kept under the settings that fetched it


def test_paging_through_a_url_over_mcp_fetches_it_once(tmp_path: Path, server: Server) -> None:
    # Each page of a `read` fetched the URL again: 20 pages, 20 requests to the site, and the
    # pages cut from as many copies of a page that may change in between.
    lines = [f"Step {n}: restart worker {n} and wait for its health check." for n in range(600)]
    body = ("# Runbook\n\n" + "\n".join(lines) + "\n").encode()
    knowledge = KnowledgeConfig(allow_private_hosts=("127.0.0.1",), read_page_bytes=1024)
    config = Config(embedding=EmbeddingConfig(model="hash:64"), knowledge=knowledge)
    pool = BrainPool(config, uri=tmp_path / "db")
    server.routes["/guide.md"] = (200, {"Content-Type": "text/markdown"}, body)
    page = server.url("/guide.md")

    async def body_() -> None:
        async with Client(server_for(pool, tmp_path, PROJECT_A)) as client:
            seen: list[str] = []
            from_line = 1
            for _ in range(100):
                read = {"command": "read", "source": page, "from_line": from_line}
                error, reply = await call(client, "knowledge", **read)
                assert not error, reply
                found = re.search(r"Next page: from_line (\d+)\.", reply)
                seen.extend(line for line in reply.splitlines() if line.startswith("Step "))
                if found is None:
                    break
                from_line = int(found.group(1))
            assert seen == lines  # every line once, in order, from one copy
            hits = server.hits["/guide.md"]
            assert hits == 1, f"{hits} requests for one read of 1 document"

    run(body_)
