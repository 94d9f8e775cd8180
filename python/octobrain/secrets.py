"""Credentials in memories: detect them and, by policy, refuse, redact or allow them.

A memory outlives the session that wrote it and is read back into other prompts (and maybe
served over HTTP), so an API key pasted into one is a leak waiting to happen. `memory.secrets`
chooses: "refuse" (default; the agent is told why and what to do), "redact" (the credential is
replaced by `[REDACTED:<kind>]`) or "allow". Errors never echo the secret itself.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from octobrain.errors import InvalidInput

POLICIES = ("refuse", "redact", "allow")

# (kind, pattern): specific, prefix-anchored shapes, so ordinary prose and ids do not match.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("Stripe key", re.compile(r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    (
        # Its three parts, or (no group) the rest of the run `eyJ` starts in: a start later in
        # that run ends its first part at the same place, so it fails too. Tried from each
        # `eyJ` of "eyJ-eyJ-…" and read on to the run's end, the plain pattern was quadratic
        # (0.8 s at 64 kB; an ingest's turn of a megabyte, minutes).
        "JSON web token",
        re.compile(
            r"\b(?:(eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+)"
            r"|eyJ[A-Za-z0-9_-]*+)"
        ),
    ),
    # A secret access key has no prefix of its own: it is recognised by the name it is given
    # (credentials files, env exports, JSON), and only the value is reported.
    (
        "AWS secret access key",
        re.compile(
            r"(?i)aws_?secret(?:_?access)?_?key[\"']?\s*(?::=|=>|[:=])\s*[\"']?"
            r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
    ),
    (
        "webhook URL",  # its path is the credential: whoever has it posts to the channel
        re.compile(
            r"\bhttps://(?:hooks\.slack\.com/(?:services|workflows|triggers)|"
            r"(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks)/[A-Za-z0-9/_-]{16,}"
        ),
    ),
    (
        # A password, secret or token given to a name (`DB_PASSWORD=…`, `"api_key": "…"`,
        # `token: …`): only a literal value of 8 or more characters with a letter and a digit,
        # so `password=$DB_PW`, `token=get_token()`, `max_tokens=4096` and prose are not it.
        # Anchored on the keyword and bounded, so a long run of name characters is read once.
        "named password or token",
        re.compile(
            r"(?i)(?:password|passwd|secret|token|api_?key|access_?key|private_?key)"
            r"[a-z0-9_]{0,40}[\"']?[ \t]{0,5}(?::=|=>|[:=])[ \t]{0,5}[\"']?"
            r"((?=[^\s\"']{0,199}[0-9])(?=[^\s\"']{0,199}[a-z])[a-z0-9_+/=@!#%^&~.-]{8,200})"
            r"(?![a-z0-9_+/=@!#%^&~.\[(-])"
        ),
    ),
    (
        "password in a URL",
        # A scheme is short: an unbounded one was scanned again from every word start of a
        # long run like "a.a.a.…" (quadratic: 3 s at 32 kB, with the GIL held).
        re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s:/?#@]+:[^\s/?#@]+@[^\s/?#@]+"),
    ),
]

# An `sk-` key: `sk-`, dash-separated segments of letters and digits, then one of 20 or more
# word characters (`sk-proj-…`). As one pattern, `\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{20,}`,
# every `sk-` of "sk-sk-sk-…" scanned the rest again (quadratic: 3.2 s at 32 kB); here each
# run of key characters is read once and its segments are checked in one pass from the end.
_KEY_RUN = re.compile(r"\bsk-[A-Za-z0-9_-]+")
_ALNUM = re.compile(r"[A-Za-z0-9]+")


def _api_keys(text: str) -> list[tuple[int, int]]:
    """The spans `\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{20,}` matches, found in linear time."""
    spans: list[tuple[int, int]] = []
    for run in _KEY_RUN.finditer(text):
        segments = run.group().split("-")
        starts = list(itertools.accumulate((len(g) + 1 for g in segments[:-1]), initial=0))
        # reach[i]: where a match whose segments begin at segment i ends (greedy, as the
        # pattern: as many segments as still leave a long last one), or -1 when none does.
        reach = [-1] * (len(segments) + 1)
        for i in range(len(segments) - 1, -1, -1):
            if _ALNUM.fullmatch(segments[i]) and reach[i + 1] >= 0:
                reach[i] = reach[i + 1]
            elif len(segments[i]) >= 20:
                reach[i] = starts[i] + len(segments[i])
        last = -1
        for i, segment in enumerate(segments[:-1]):
            if segment == "sk" and starts[i] >= last and reach[i + 1] >= 0:
                spans.append((run.start() + starts[i], run.start() + reach[i + 1]))
                last = reach[i + 1]
    return spans


@dataclass(frozen=True)
class Finding:
    """One credential-shaped span of a text."""

    kind: str
    start: int
    end: int


def find_secrets(text: str) -> list[Finding]:
    """Every credential-shaped span in `text`, in order, without overlaps (a span overlapping
    one found before is passed over; the spans found are kept in order, so that is told by
    the one before where it would go: a megabyte of `eyJa.eyJa.…`, 26,886 tokens, was
    quadratic)."""
    found: list[Finding] = []
    starts: list[int] = []

    def add(kind: str, start: int, end: int) -> None:
        at = bisect.bisect_left(starts, end)  # the spans found that start before this ends
        if at and found[at - 1].end > start:  # (the last of them reaches furthest)
            return
        starts.insert(at, start)
        found.insert(at, Finding(kind, start, end))

    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            group = 1 if pattern.groups else 0  # a named value inside its context
            if match.start(group) >= 0:  # (a group that took no part: no credential)
                add(kind, match.start(group), match.end(group))
        if kind == "Google API key":  # where the single pattern stood, so overlaps resolve alike
            for start, end in _api_keys(text):
                add("API key", start, end)
    return found


def redact(text: str, findings: list[Finding]) -> str:
    """`text` with each finding replaced by `[REDACTED:<kind>]`."""
    out, last = [], 0
    for f in findings:
        out += [text[last : f.start], f"[REDACTED:{f.kind}]"]
        last = f.end
    out.append(text[last:])
    return "".join(out)


def screen_each(field: str, values: Sequence[str], policy: str) -> list[str]:
    """`screen` over a list field (tags, related files); items are named `field[i]`."""
    return [screen(f"{field}[{i}]", value, policy) for i, value in enumerate(values)]


def screen(field: str, text: str, policy: str) -> str:
    """Apply `policy` to one field's text: returns it (possibly redacted) or raises.

    Every text octobrain stores for later sessions goes through here with the same policy:
    a memory's title, content, tags and related files, a link's description, an imported row,
    a `knowledge store` note."""
    if policy == "allow":
        return text
    findings = find_secrets(text)
    if not findings:
        return text
    if policy == "redact":
        return redact(text, findings)
    kinds = ", ".join(dict.fromkeys(f.kind for f in findings))
    raise InvalidInput(
        field,
        f"looks like it contains a credential ({kinds}); secrets are not stored in memories "
        "because they are read back into other sessions. Remove it and store where it lives "
        "instead (e.g. 'the key is in the CI secret OPENAI_API_KEY'), or set "
        'memory.secrets = "redact" or "allow" in the config',
    )
