"""What an object-store endpoint's failure means, in a few words: LanceDB and the object-store
client nest it in a Rust error dump of many lines."""

from __future__ import annotations

import os
import re

NO_CREDENTIALS = (
    "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) "
    "in the environment, name a profile of ~/.aws/credentials in AWS_PROFILE, or run where an "
    "instance role provides them"
)


def no_credentials() -> str:
    """What to do when no AWS keys were found; with `AWS_PROFILE` set, the files it is read from."""
    profile = os.environ.get("AWS_PROFILE")
    if not profile:
        return NO_CREDENTIALS
    files = (
        os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials",
        os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config",
    )
    return (
        f"no AWS credentials from the profile {profile!r} (AWS_PROFILE): check that {files[0]} "
        f"or {files[1]} holds it, with its keys"
    )


def lacks_credentials(exc: BaseException) -> bool:
    """Whether an object-store error is the clients' finding no AWS keys."""
    # No keys in the environment or a profile: the clients then ask the instance metadata
    # service, whose refusal (or silence, off a cloud machine) is what they report.
    text = str(exc)
    return "Failed to get AWS credentials" in text or "169.254.169.254/latest/api/token" in text


def object_store_reason(exc: BaseException) -> str:
    """The human part of an object-store error (LanceDB nests the client's error in a dump)."""
    if lacks_credentials(exc):
        return no_credentials()
    text = str(exc)
    if re.search(r"kind: Timeout|TimedOut", text):
        return "no answer from the endpoint within the request timeout (storage option timeout)"
    if "IncompleteMessage" in text:  # (hyper's name for a connection shut before an answer)
        return "the endpoint closed the connection without answering"
    patterns = (r'message: "([^"]+)"', r'ConnectError\("([^"]+)"', r"<Code>(\w+)</Code>")
    for pattern in (*patterns, r"HTTP error: ([^,\n]+)"):
        found = re.search(pattern, text)
        if found:
            return found.group(1)
    line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    line = line.split(", /")[0]  # (LanceDB ends a line with the Rust source file it came from)
    return line if len(line) <= 500 else line[:499] + "…"
