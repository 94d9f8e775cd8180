"""Fetching one http(s) URL safely: timeouts, a redirect cap, a size cap, no private networks.

An agent can be steered (by a prompt injection in a page it read) into asking for
`http://169.254.169.254/` or `http://localhost:8080/admin`. So before every connection — the
first request and each redirect hop — the host is resolved, and any address that is not
globally routable (loopback, private, link-local, carrier-grade NAT, multicast, reserved) is
refused unless `knowledge.allow_private_hosts` lists the host or a network holding it, alone or
with the port the URL names (`127.0.0.1:8000` opens that port, not the machine). The
connection then goes to the address that was checked (the URL's host is kept for the Host
header, TLS SNI and certificate checks), so a second DNS answer cannot swap in another address.
Proxies from the environment are ignored for the same reason.

One fetch has one deadline (`knowledge.fetch_timeout_secs`) for every hop and the whole body, so
a server that drips a byte a second cannot hold a call. The body is decoded here, not by the HTTP
client: a compressed body inflates at most to the size cap (a few hundred bytes of nested gzip
would otherwise inflate to gigabytes before any cap is checked), and only the codings asked for
(gzip, deflate; one of them) are accepted.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from octobrain import __version__
from octobrain.config.private_hosts import entry_for, parse_entry
from octobrain.errors import InvalidInput, as_json, char_named, cut_middle
from octobrain.knowledge.sources import Fetched, SourceRef, not_in_a_host

if TYPE_CHECKING:
    import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
USER_AGENT = f"octobrain/{__version__} (+knowledge indexer)"
ACCEPT = (
    "text/html,application/xhtml+xml,text/markdown,text/plain,application/pdf,"
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document;q=0.9,*/*;q=0.1"
)
ACCEPT_ENCODING = "gzip, deflate"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class FetchError(InvalidInput):
    """A URL that could not be fetched (refused, unreachable, non-2xx, too large). `failed`:
    through no fault of the URL (a timeout, a resolver or server that is down or answers
    garbage, a redirect loop), so not `input_fault`: the command line exits 1 for it, 2 for
    the others (a malformed URL, one refused by a rule, a host or page that is not there)."""

    def __init__(self, rule: str, *, failed: bool = False) -> None:
        super().__init__("source", rule)
        self.input_fault = not failed


# Answers that are the server's state, not the URL's: asked again later, it may serve it.
_TRY_AGAIN = frozenset({408, 425, 429})
# Resolver answers that say the name does not exist (any other: it could not answer now).
_NO_SUCH_NAME = frozenset(
    getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, name)
)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765
# Special-purpose ranges `ipaddress` still calls global on Python 3.11: IETF protocol
# assignments (192.0.0.8 among them) and the deprecated IPv6 site-local block.
_SPECIAL = (ipaddress.ip_network("192.0.0.0/24"), ipaddress.ip_network("fec0::/10"))


def embedded_ipv4(addr: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries and would reach (mapped, IPv4-compatible,
    NAT64 incl. the local-use 64:ff9b:1::/48, 6to4, Teredo server and client)."""
    if not isinstance(addr, ipaddress.IPv6Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    low32 = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr.ipv4_mapped is not None:
        found.append(addr.ipv4_mapped)
    if _carrier(addr):
        found.append(low32)
    if addr.sixtofour is not None:
        found.append(addr.sixtofour)
    if addr.teredo is not None:
        found.extend(addr.teredo)
    return found


def _judged_as(addr: IPAddress) -> list[IPAddress]:
    """The addresses `addr` is checked as: a pure IPv4 carrier (mapped, compatible, NAT64) is
    its IPv4 alone; 6to4 and Teredo are both the IPv6 address and the IPv4 they tunnel to."""
    carried: list[IPAddress] = list(embedded_ipv4(addr))
    if isinstance(addr, ipaddress.IPv6Address) and (addr.ipv4_mapped is not None or _carrier(addr)):
        return carried
    return [addr, *carried]


def _carrier(addr: ipaddress.IPv6Address) -> bool:
    """Whether `addr` is an IPv4 address in IPv6 form (compatible, translated, NAT64)."""
    return addr in _IPV4_COMPATIBLE or addr in _IPV4_TRANSLATED or any(addr in n for n in _NAT64)


def _forbidden(addr: IPAddress) -> bool:
    special = any(addr.version == net.version and addr in net for net in _SPECIAL)
    return not addr.is_global or addr.is_multicast or special


def _allowed(host: str, addr: IPAddress, port: int, allow: Sequence[str]) -> bool:
    entries = (parse_entry(item) for item in allow)
    return any(entry is not None and entry.admits(host, addr, port) for entry in entries)


def resolve_checked(
    host: str, port: int, allow: Sequence[str], seconds: float | None = None
) -> str:
    """Resolve `host` and return one address to connect to, after checking every address.

    Raises FetchError when the host does not resolve (within `seconds`, when given), or when
    any of its addresses is not globally routable and not allowed on `port` by `allow`
    (`knowledge.allow_private_hosts`).
    """
    try:
        infos = _getaddrinfo(host, port, seconds)
    except (socket.gaierror, UnicodeError) as exc:
        # (no such name is the URL's, as a 404 is; a resolver that cannot answer now is not)
        if isinstance(exc, socket.gaierror) and exc.errno not in _NO_SUCH_NAME:
            raise FetchError(
                f"cannot resolve host {as_json(host)}: the name servers did not answer ({exc})",
                failed=True,
            ) from None
        if isinstance(exc, UnicodeError):  # (a label too long for DNS, say)
            raise FetchError(f"{as_json(host)} is not a valid host name ({exc})") from None
        raise FetchError(
            f"no such host {as_json(host)}: the name servers know no such name ({exc})"
        ) from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise FetchError(f"cannot resolve host {as_json(host)}")
    for addr in addresses:
        forms = _judged_as(addr)
        # (`::1` is checked as the IPv4 it would carry, 0.0.0.1, but allowed as listed)
        listed = any(_allowed(host, a, port, allow) for a in {addr, *forms})
        if listed or not any(map(_forbidden, forms)):
            continue
        entry = entry_for(host, port)
        raise FetchError(
            f"refusing {host} ({addr}): it is a private, loopback or link-local address; "
            f"add {entry} to knowledge.allow_private_hosts to index your own local documents "
            "(HOST:PORT allows that port only, a plain HOST every port; in the file "
            "`octobrain config path` names, or "
            f"OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS={entry} in the environment)"
        )
    return str(addresses[0])


def _getaddrinfo(host: str, port: int, seconds: float | None) -> list[Any]:
    """`socket.getaddrinfo`, given up after `seconds`: the resolver has no timeout of its own
    (5 s a try, several tries and name servers), and the fetch's deadline is read only
    between steps. The lookup left behind ends on its own; nothing waits for it."""
    if seconds is None:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    answer: list[Any] = []
    failure: list[BaseException] = []

    def look_up() -> None:
        try:
            answer.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except BaseException as exc:  # handed to the caller
            failure.append(exc)

    lookup = threading.Thread(target=look_up, name="octobrain-resolve", daemon=True)
    lookup.start()
    lookup.join(max(seconds, 0.0))
    if lookup.is_alive():
        raise FetchError(
            f"cannot resolve host {as_json(host)} within the time left to fetch it", failed=True
        )
    if failure:
        raise failure[0]
    return answer


def fetch_url(
    ref: SourceRef,
    *,
    max_bytes: int,
    timeout: float,
    max_redirects: int,
    allow_private: Sequence[str] = (),
) -> Fetched:
    """GET one URL with every hop checked; the body must be 2xx and at most `max_bytes`
    (decoded), all within `timeout` seconds."""
    import httpx

    deadline = time.monotonic() + timeout

    try:
        url = httpx.URL(ref.uri)
    except httpx.InvalidURL as exc:
        raise FetchError(f"{ref.uri}: not a valid URL ({exc})") from None
    timed_out = FetchError(
        f"{ref.uri}: timed out after {timeout:g} s (knowledge.fetch_timeout_secs)", failed=True
    )
    with httpx.Client(follow_redirects=False, trust_env=False) as client, _cut_at(deadline, client):
        for hop in range(max_redirects + 1):
            if url.scheme not in ("http", "https"):  # (a redirect's: the URL given was checked)
                raise FetchError(
                    f"{ref.uri}: redirected to {cut_middle(str(url), 300)}; only http and "
                    "https URLs are fetched"
                )
            port = _default_port(url) if url.port is None else url.port
            if not 0 < port < 65536:  # (the lookup keeps 16 bits: 8765 + 65536 reached 8765)
                # (given, the URL is malformed; redirected to, the server's answer is)
                said = f"{ref.uri}: redirected to {url}" if hop else str(url)
                raise FetchError(f"{said}: port {port} is not a TCP port (1–65535)", failed=hop > 0)
            try:
                host = url.host
            except UnicodeError as exc:  # an `xn--` label httpx parses but cannot decode
                if hop:
                    raise FetchError(
                        f"{ref.uri}: redirected to an invalid URL ({exc})", failed=True
                    ) from None
                raise FetchError(f"{ref.uri}: not a valid URL ({exc})") from None
            # (given, `parse_source` refused it; a Location's went on to the name servers,
            # percent-encoded: "exa%20mple.com", which is named by the space)
            bad = not_in_a_host(unquote(host)) or not_in_a_host(host) if ":" not in host else []
            if hop and bad:
                found = ", ".join(map(char_named, bad))
                raise FetchError(
                    f"{ref.uri}: redirected to {cut_middle(str(url), 300)}, whose host holds "
                    f"what no host name can (found {found})",
                    failed=True,
                )
            address = resolve_checked(
                host, port, allow_private, max(0.0, deadline - time.monotonic())
            )
            left = deadline - time.monotonic()
            if left <= 0:
                raise timed_out
            request = client.build_request(
                "GET",
                url.copy_with(host=address),
                headers={
                    "Host": url.netloc.decode("ascii"),
                    "User-Agent": USER_AGENT,
                    "Accept": ACCEPT,
                    "Accept-Encoding": ACCEPT_ENCODING,
                },
                timeout=httpx.Timeout(left),
                extensions={"sni_hostname": host} if url.scheme == "https" else {},
            )
            try:
                response = client.send(request, stream=True)
            except httpx.TimeoutException:
                raise timed_out from None
            except UnicodeError as exc:  # httpx reads a redirect's host as it answers
                raise FetchError(
                    f"{ref.uri}: redirected to an invalid URL ({exc})", failed=True
                ) from None
            except (httpx.HTTPError, OSError, RuntimeError) as exc:
                raise _failed(ref, exc, deadline, timed_out) from None
            try:
                if response.has_redirect_location:
                    try:
                        url = url.join(response.headers["location"])
                    except httpx.InvalidURL as exc:
                        raise FetchError(
                            f"{ref.uri}: redirected to an invalid URL ({exc})", failed=True
                        ) from None
                    continue
                return _body(ref, response, max_bytes, deadline, timed_out)
            finally:
                response.close()
    raise FetchError(  # (a loop, or a chain longer than any site needs: the server's)
        f"{ref.uri}: more than {max_redirects} redirects (knowledge.max_redirects)", failed=True
    )


@contextlib.contextmanager
def _cut_at(deadline: float, client: httpx.Client) -> Iterator[None]:
    """Close `client`'s connections at `deadline`, whatever the fetch is doing then. httpx's
    timeout bounds each socket read, not the whole response: a server sending its headers a
    byte a second, or `102 Processing` answers without end, would hold the fetch for as long
    as it liked. Closed, the next read fails at once, and the caller, past the deadline,
    reports the timeout."""
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), client.close)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _failed(
    ref: SourceRef, exc: BaseException, deadline: float, timed_out: FetchError
) -> FetchError:
    """What a transport error means: past the deadline, the connection `_cut_at` closed."""
    if time.monotonic() >= deadline:
        return timed_out
    what = "the TLS handshake failed" if _tls_failure(exc) else _in_words(exc)
    if what is None:
        return FetchError(f"{ref.uri}: {type(exc).__name__}: {exc}", failed=True)
    return FetchError(f"{ref.uri}: {what}" + (f" ({exc})" if str(exc) else ""), failed=True)


def _tls_failure(exc: BaseException) -> bool:
    """Whether `exc` came of TLS (a certificate not trusted, a server that does not speak it),
    which httpx calls a `ConnectError` like a refused connection."""
    import ssl

    seen: BaseException | None = exc
    for _ in range(8):  # (httpx's error, httpcore's, the ssl module's)
        if seen is None or isinstance(seen, ssl.SSLError):
            return seen is not None
        seen = seen.__cause__ or seen.__context__
    return False


def _in_words(exc: BaseException) -> str | None:
    """What a transport failure means, in words (httpx's class names are its own vocabulary);
    None for one not named here."""
    import httpx

    failures: list[tuple[type[BaseException], str]] = [
        (httpx.ConnectError, "cannot connect to the server"),
        (httpx.RemoteProtocolError, "the server's answer is not valid HTTP"),
        (httpx.ReadError, "the connection failed while the answer was read"),
        (httpx.WriteError, "the connection failed while the request was sent"),
        (httpx.ProxyError, "the proxy refused the request"),
        (httpx.DecodingError, "the answer's content encoding is broken"),
    ]
    return next((said for kind, said in failures if isinstance(exc, kind)), None)


def _default_port(url: httpx.URL) -> int:
    return 443 if url.scheme == "https" else 80


def _body(
    ref: SourceRef,
    response: httpx.Response,
    max_bytes: int,
    deadline: float,
    timed_out: FetchError,
) -> Fetched:
    import httpx

    if not 200 <= response.status_code < 300:
        raise FetchError(
            f"{ref.uri}: HTTP {response.status_code} {response.reason_phrase}",
            failed=response.status_code >= 500 or response.status_code in _TRY_AGAIN,
        )
    too_big = FetchError(
        f"{ref.uri}: larger than the {max_bytes}-byte cap (knowledge.max_source_bytes)"
    )
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_big
    inflate = _decoder(ref, response.headers.get("content-encoding", ""))
    chunks: list[bytes] = []
    size = received = 0
    try:
        for raw in response.iter_raw():
            received += len(raw)
            # Room for one byte past the cap: producing it proves the body too big.
            chunk = raw if inflate is None else inflate.decompress(raw, max_bytes - size + 1)
            size += len(chunk)
            if size > max_bytes or received > max_bytes:
                raise too_big
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise timed_out
    except httpx.TimeoutException:
        raise timed_out from None
    except (httpx.HTTPError, OSError, RuntimeError) as exc:
        raise _failed(ref, exc, deadline, timed_out) from None
    except zlib.error as exc:
        raise FetchError(
            f"{ref.uri}: the body is not valid compressed data ({exc})", failed=True
        ) from None
    content_type, charset = media_type(response.headers.get("content-type", ""))
    return Fetched(ref, b"".join(chunks), content_type=content_type, charset=charset)


def media_type(header: str) -> tuple[str, str]:
    """A Content-Type header's media type, lowercased, and its charset parameter (or "")."""
    kind, _, parameters = header.partition(";")
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return kind.strip().lower(), value.strip().strip("\"'")
    return kind.strip().lower(), ""


class _Inflate:
    """One content coding undone with a bound on what each call may produce."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.started = False
        self._z = zlib.decompressobj(_WBITS[coding])

    def decompress(self, data: bytes, limit: int) -> bytes:
        """What `data` inflates to, at most `limit` bytes (a full `limit` means: more to come)."""
        if self.started or self.coding != "deflate":
            return self._z.decompress(data, limit)
        self.started = True
        try:
            return self._z.decompress(data, limit)
        except zlib.error:  # "deflate" is the zlib format; some servers send raw deflate
            self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._z.decompress(data, limit)


def _decoder(ref: SourceRef, header: str) -> _Inflate | None:
    """The decoder for a body's `Content-Encoding` (None: as sent), or a FetchError for a
    coding that was not asked for, or for several stacked (no server needs that; a bomb does)."""
    codings = [c.strip().lower() for c in header.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return None
    if len(codings) > 1 or codings[0] not in _WBITS:
        raise FetchError(
            f"{ref.uri}: unsupported Content-Encoding {as_json(header.strip())} "
            f"(asked for one of {ACCEPT_ENCODING})",
            failed=True,
        )
    return _Inflate(codings[0])
