"""A small HTTP relay in front of a loopback S3 endpoint that injects faults: an answer dropped
after the request was forwarded, or the endpoint down (every connection shut unanswered)."""

from __future__ import annotations

import http.client
import http.server
import re
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class Relay:
    """Forwards every request to `upstream`. The next PUT whose path matches `drop` is
    forwarded and its answer dropped (the connection is shut instead). From the first request
    whose "METHOD path" matches `down_at` on, the endpoint is `down`: each request is shut
    unanswered, not forwarded, until `down` is set False again."""

    upstream: int
    drop: str | None = None
    dropped: list[str] = field(default_factory=list)
    down_at: str | None = None
    down: bool = False
    refused: list[str] = field(default_factory=list)  # "METHOD path" of each request shut

    def start(self) -> int:
        relay = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def shut(self) -> None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

            def forward(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                request = f"{self.command} {self.path}"
                if relay.down_at and re.search(relay.down_at, request):
                    relay.down_at, relay.down = None, True
                if relay.down:
                    relay.refused.append(request)
                    self.shut()
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", relay.upstream, timeout=30)
                upstream.request(self.command, self.path, body, dict(self.headers.items()))
                answer = upstream.getresponse()
                data = answer.read()
                if relay.drop and self.command == "PUT" and re.search(relay.drop, self.path):
                    relay.drop = None
                    relay.dropped.append(self.path)
                    self.shut()
                    return
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return int(server.server_address[1])
