"""Fixtures for the knowledge tests: real files of every type, a real HTTP server on loopback,
real LanceDB in temp dirs, and the hash embedder (wrapped to count what it embeds)."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config, KnowledgeConfig
from octobrain.embed.factory import get_embedder
from octobrain.knowledge import Knowledge

SCOPE = "github.com/acme/api"


class CountingEmbedder:
    """The hash embedder, counting document embedding calls and texts."""

    def __init__(self, dim: int = 64) -> None:
        self._inner = get_embedder(f"hash:{dim}")
        self.calls = 0
        self.texts = 0

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed_documents(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        self.texts += len(texts)
        return self._inner.embed_documents(texts)

    def embed_query(self, query: str | Sequence[str]) -> Any:
        return self._inner.embed_query(query)

    def prepare(self) -> None:
        self._inner.prepare()


def config(**knowledge: Any) -> Config:
    """A default config with some `[knowledge]` keys changed."""
    return dataclasses.replace(Config(), knowledge=KnowledgeConfig(**knowledge))


MakeKnowledge = Callable[..., Knowledge]


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def make_knowledge(tmp_path: Path, embedder: CountingEmbedder) -> MakeKnowledge:
    def make(
        scope: str = SCOPE, session_id: str = "s1", cfg: Config | None = None, **knowledge: Any
    ) -> Knowledge:
        return Knowledge(
            scope,
            config=cfg if cfg is not None else config(**knowledge),
            embedder=embedder,  # type: ignore[arg-type]
            uri=tmp_path / "db",
            session_id=session_id,
            cwd=tmp_path,
        )

    return make


# ---- real documents ---------------------------------------------------------------------------


# The ligatures a typesetter draws, as glyph codes 1 and 2 of the font (as TeX's fonts do), and
# a symbol font's private bullet (U+F0B7, as Word's Symbol bullets read) as code 3.
_LIGATURE_CODES = str.maketrans({"\ufb01": "\x01", "\ufb02": "\x02", "\uf0b7": "\x03"})


def pdf_escape(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return text.translate(_LIGATURE_CODES)


def write_pdf(path: Path, pages: Sequence[Sequence[str]], title: str = "") -> Path:
    """A real PDF (Helvetica text, one content stream per page), built object by object;
    `ﬁ` and `ﬂ` in a line are drawn as the font's ligature glyphs."""
    bodies = [
        "BT /F1 11 Tf 14 TL 72 760 Td "
        + " ".join(f"({pdf_escape(line)}) Tj T*" for line in lines)
        + " ET"
        for lines in pages
    ]
    return write_pdf_pages(path, bodies, title)


def write_pdf_pages(
    path: Path, bodies: Sequence[str], title: str = "", form: str = "", deflate: bool = False
) -> Path:
    """A real PDF whose pages draw `bodies` (content streams, Latin-1; fonts /F1 Helvetica,
    /F2 Courier; `form`, if any, the content of a form XObject /Fm1 they may draw), each
    stream compressed (FlateDecode) if `deflate`."""

    def stream(dictionary: bytes, data: bytes) -> bytes:
        if deflate:
            data, dictionary = zlib.compress(data), dictionary + b" /Filter /FlateDecode"
        length = f" /Length {len(data)} >>\nstream\n".encode()
        return b"<< " + dictionary + length + data + b"\nendstream"

    objects: list[bytes] = []
    n_pages = len(bodies)
    fonts = f"/Font << /F1 3 0 R /F2 {4 + 2 * n_pages} 0 R >>"
    xobjects = f" /XObject << /Fm1 {5 + 2 * n_pages} 0 R >>" if form else ""
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    objects.append(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica"
        b" /Encoding << /Type /Encoding /BaseEncoding /WinAnsiEncoding"
        b" /Differences [1 /fi /fl /uniF0B7] >> >>"
    )
    for i, body in enumerate(bodies):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * i} 0 R "
            f"/Resources << {fonts}{xobjects} >> >>".encode()
        )
        objects.append(stream(b"", body.encode("latin-1")))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>")
    if form:
        form_dict = b"/Type /XObject /Subtype /Form /BBox [0 0 612 792]"
        form_dict += b" /Resources << /Font << /F1 3 0 R >> >>"
        objects.append(stream(form_dict, form.encode("latin-1")))
    info = None
    if title:
        objects.append(f"<< /Title ({pdf_escape(title)}) >>".encode())
        info = len(objects)
    return write_pdf_objects(path, objects, info)


def write_pdf_objects(path: Path, objects: Sequence[bytes], info: int | None = None) -> Path:
    """A PDF of `objects` (numbered from 1; the first the catalog, `info` the document
    information's number, if any) with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    trailer = f"<< /Size {len(objects) + 1} /Root 1 0 R" + (f" /Info {info} 0 R" if info else "")
    out += f"trailer\n{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


def write_docx(path: Path) -> Path:
    """A real DOCX with a title, headings, body paragraphs, a list item and a table."""
    import docx

    document = docx.Document()
    document.core_properties.title = "Deployment handbook"
    document.add_heading("Deployment handbook", level=0)
    document.add_heading("Rollbacks", level=1)
    document.add_paragraph("A rollback restores the previous release within five minutes.")
    document.add_paragraph("Run the canary first.", style="List Bullet")
    document.add_heading("Database migrations", level=2)
    document.add_paragraph("Migrations run before the new pods start, never after.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "region", "owner"
    table.cell(1, 0).text, table.cell(1, 1).text = "eu-west", "platform team"
    document.save(str(path))
    return path


HTML_PAGE = b"""<!doctype html>
<html><head><title>Widget API reference</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/pricing">Pricing</a> | Navigation chrome here</nav>
<header>Site banner with a login link</header>
<main><article>
<h1>Widget API reference</h1>
<p>The widget service exposes a small REST interface for creating and listing widgets.
Every request is authenticated with a bearer token issued by the console.</p>
<h2>Pagination</h2>
<p>List endpoints return fifty widgets per page. Pass the cursor from the previous response
to fetch the next page; an empty cursor means the listing is complete.</p>
<h2>Errors</h2>
<p>Errors use standard HTTP status codes. A quota breach answers 429 with a Retry-After
header giving the seconds to wait before trying again.</p>
<ul><li>400 means the payload failed validation.</li><li>404 means no such widget.</li></ul>
</article></main>
<footer>Copyright footer text, cookie settings</footer>
</body></html>
"""


# ---- a real HTTP server -----------------------------------------------------------------------

# A body is bytes, or pieces sent one by one with a pause (seconds) before each.
Route = tuple[int, dict[str, str], bytes | tuple[float, list[bytes]]]


class _HTTPServer6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Server:
    """Routes served by a real HTTP server on 127.0.0.1 (or `host`); `hits` counts requests per
    path."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.routes: dict[str, Route] = {}
        self.hits: dict[str, int] = {}
        routes, hits = self.routes, self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits[self.path] = hits.get(self.path, 0) + 1
                status, headers, body = routes.get(self.path, (404, {}, b"not found"))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if isinstance(body, tuple):
                    self.end_headers()
                    pause, pieces = body
                    for piece in pieces:
                        time.sleep(pause)
                        try:
                            self.wfile.write(piece)
                            self.wfile.flush()
                        except OSError:  # the client gave up
                            return
                    return
                if "Content-Length" not in headers and headers.get("X-No-Length") is None:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = (_HTTPServer6 if ":" in host else ThreadingHTTPServer)((host, 0), Handler)
        self.host = f"[{host}]" if ":" in host else host
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    from octobrain.knowledge import service
    from octobrain.knowledge.by_url import ByUrl

    # A URL read a moment ago is answered as it was (`service._FETCHED`): a port an earlier
    # test's server had must not answer with that server's page.
    monkeypatch.setattr(service, "_FETCHED", ByUrl(kept=8, budget=32 << 20, seconds=300))
    srv = Server()
    try:
        yield srv
    finally:
        srv.close()
