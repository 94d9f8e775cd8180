"""`knowledge.allow_private_hosts` entries: which private, loopback or link-local hosts (and
ports) a fetched URL may reach. A plain host allows every port; `HOST:PORT` only that port, so
allowing a docs server on `127.0.0.1:8000` does not open the database's HTTP admin on another
port of the same machine."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from octobrain.config.rules import port_of
from octobrain.errors import as_json

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ENTRY_RULE = (
    "a host name, an IP address or a CIDR network, alone (every port) or with :PORT "
    "(1..65535, that port only); an IPv6 address or network goes in brackets before a port, "
    "e.g. [::1]:8000"
)
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?")


@dataclass(frozen=True)
class AllowedHost:
    """One entry: a host name (lowercased) or a network, and its port (None: every port)."""

    name: str
    network: IPNetwork | None
    port: int | None

    def admits(self, host: str, addr: IPAddress, port: int) -> bool:
        """Whether a connection to `addr` port `port`, for the URL host `host`, is allowed."""
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            return addr.version == self.network.version and addr in self.network
        return self.name == host.lower().rstrip(".")


def parse_entry(item: str) -> AllowedHost | None:
    """`item` as an entry, or None when it breaks `ENTRY_RULE`."""
    host, port_text, bracketed = item, None, item.startswith("[")
    if bracketed:
        host, closed, rest = item[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    elif item.count(":") == 1:  # (more: a bare IPv6 address, which cannot carry a port)
        host, _, port_text = item.partition(":")
    port = None
    if port_text is not None:
        port = port_of(port_text)
        if port is None:
            return None
    try:
        network: IPNetwork | None = ipaddress.ip_network(host, strict=False)
    except ValueError:
        network = None
        if bracketed or not _NAME.fullmatch(host):
            return None
    if bracketed and (network is None or network.version != 6):
        return None
    return AllowedHost(host.lower().rstrip("."), network, port)


def allow_hosts_rule(v: Any) -> str | None:
    """The config rule of `knowledge.allow_private_hosts`: every entry keeps `ENTRY_RULE`."""
    for item in v:
        if parse_entry(item) is None:
            return f"{as_json(item)} is not {ENTRY_RULE}"
    return None


def entry_for(host: str, port: int) -> str:
    """The entry that allows `host` on `port` alone (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
