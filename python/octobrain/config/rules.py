"""The rules a configuration value must keep (`schema` names one per key), and the checks
the CLI and the HTTP server make of the same values given on the command line: a bind
address, a bearer token, storage options and a storage URI."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from octobrain.errors import as_json
from octobrain.modelspec import parse_model_spec

# A rule returns None when the value is fine, else the rule the value broke.
Rule = Callable[[Any], "str | None"]


def in_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False) -> Rule:
    """A finite number from `lo` (excluded when `lo_open`) to `hi`; None: unbounded."""

    def check(v: Any) -> str | None:
        if isinstance(v, float) and not math.isfinite(v):
            return "must be a finite number"
        if lo is not None and (v <= lo if lo_open else v < lo):
            if hi is None:
                return f"must be {'>' if lo_open else '>='} {lo}"
            return f"must be between {lo} and {hi}" + (" (exclusive of the lower bound)" * lo_open)
        if hi is not None and v > hi:
            return f"must be <= {hi}" if lo is None else f"must be between {lo} and {hi}"
        return None

    return check


def one_of(*allowed: str) -> Rule:
    """One of the strings `allowed`."""

    def check(v: Any) -> str | None:
        return None if v in allowed else f"must be one of {', '.join(allowed)}"

    return check


def model_rule(v: Any) -> str | None:
    try:
        parse_model_spec(v)
    except ValueError as exc:
        return str(exc).split(": ", 1)[-1]
    return None


_STORE_SCHEMES = ("s3", "s3+ddb", "gs", "az", "abfs")


def storage_uri_rule(v: Any) -> str | None:
    scheme, sep, _ = v.partition("://")
    if sep and scheme.lower() not in _STORE_SCHEMES:
        return f"must be a local path or a URI with one of the schemes {', '.join(_STORE_SCHEMES)}"
    return None


# The retry options octobrain reads itself (for the lease and records, besides LanceDB): a
# value neither reads was a traceback at the first request (`int('abc')`).
_RETRY_OPTIONS = {
    "client_max_retries": (r"[0-9]{1,3}", "a whole number of retries, 0–999"),
    "client_retry_timeout": (r"[0-9]{1,6}(\.[0-9]+)?", "a number of seconds, 0–999999"),
}


def storage_options_problem(v: Any) -> str | None:
    """What is wrong with a list of storage options (`key=value` each, a key once, the retry
    options numbers), or None."""
    given: set[str] = set()  # the keys read, in lower case
    for item in v:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            return f"each entry must be key=value; got {as_json(item)}"
        # (read into a dict, the last entry of a key won without a word; its values are not
        # shown: an option may hold a credential)
        if key.strip().lower() in given:
            return f"names {as_json(key.strip())} twice; give each key once"
        given.add(key.strip().lower())
        pattern, what = _RETRY_OPTIONS.get(key.strip(), ("", ""))
        if pattern and not re.fullmatch(pattern, value.strip()):
            return f"{key.strip()} must be {what}; got {as_json(value.strip())}"
    return None


def base_url_rule(v: Any) -> str | None:
    if v == "":
        return None
    m = re.match(r"^(https?)://([^/:]+|\[[^\]]+\])(:[0-9]{1,5})?(/.*)?$", v)  # ASCII digits
    if not m:
        return "must be an http(s) URL such as https://api.example.com/v1"
    loopback = m.group(2) in ("localhost", "127.0.0.1", "[::1]")
    if m.group(1) == "http" and not loopback:
        return "must use https unless the host is loopback (API keys travel in headers)"
    return None


BIND_RULE = "must be HOST:PORT with a port of ASCII digits in 1..65535"
MIN_TOKEN_CHARS = 16  # a bearer token's least length (`mcp.token`, `--token`)


_PORT = re.compile(r"[0-9]{1,5}")


def port_of(text: str) -> int | None:
    """A port written as ASCII digits, 1..65535, or None. `isdigit` takes full-width digits
    (`０８０`, read by int as 80) and superscripts (`²`, which int refuses); five digits at most,
    so int never reads a number past its 4,300-digit limit (a ValueError)."""
    if not _PORT.fullmatch(text) or not 1 <= int(text) <= 65535:
        return None
    return int(text)


def split_bind(bind: str) -> tuple[str, int] | None:
    """`HOST:PORT` as (host as given, port), or None when it breaks `BIND_RULE`."""
    host, _, port_text = bind.rpartition(":")
    port = port_of(port_text)
    if not host or port is None:
        return None
    return host, port


def bind_rule(v: Any) -> str | None:
    if v == "" or split_bind(v) is not None:
        return None
    return f"{BIND_RULE}, e.g. 127.0.0.1:8765"


def token_rule(v: Any) -> str | None:
    if v == "":
        return None
    if len(v) < MIN_TOKEN_CHARS:
        return f"must be empty or at least {MIN_TOKEN_CHARS} characters"
    return token_problem(v)


def token_problem(token: str) -> str | None:
    """Why clients could never send `token` in `Authorization: Bearer <token>`, or None: a
    header carries printable ASCII, and a server reads it without spaces at either end. The
    token itself is not quoted (it is a secret)."""
    if token != token.strip(" \t"):
        held = "a space at its start or end"
    elif any(ord(c) > 126 for c in token):
        held = "a character outside ASCII"
    elif any(ord(c) < 32 or ord(c) == 127 for c in token):
        held = "a control character"
    else:
        return None
    return (
        "must be printable ASCII with no space at either end, as clients send it in "
        f"'Authorization: Bearer <token>'; this one holds {held}"
    )
