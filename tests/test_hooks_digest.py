"""The session digest that `octobrain hook pre-compact` / `session-end` store from a real Claude
Code transcript: extractive, odd lines skipped, one per session, credentials and injected text
left out."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.gist import DIGEST_TAG
from octobrain.memory.hooks import digest_transcript
from octobrain.memory.transcript_file import read_transcript
from octobrain.models import Source
from tests.hooks_support import SESSION, brain_for, cli, hook_json, transcript
from tests.hooks_support import env as env  # the fixture, shared


def test_digest_is_extractive(tmp_path: Path) -> None:
    project = tmp_path / "p"
    digest = digest_transcript(
        read_transcript(transcript(tmp_path / "t.jsonl", project)), str(project)
    )
    assert digest.files == ["src/export.py", "tests/test_tz.py"]
    assert any("root cause is naive datetimes" in f for f in digest.fixes)
    assert digest.decisions == ["We decided to normalise all timestamps to UTC at the boundary."]
    with pytest.raises(InvalidInput, match=r"^transcript_path: no such file"):
        read_transcript(tmp_path / "missing.jsonl")


def test_a_transcript_line_json_cannot_read_is_skipped_and_the_rest_kept(tmp_path: Path) -> None:
    # An integer longer than Python converts raised a bare ValueError: the whole digest lost.
    kept = {"type": "user", "message": {"role": "user", "content": "We chose blue-green."}}
    path = tmp_path / "t.jsonl"
    lines = [json.dumps(kept), '{"n": ' + "9" * 5000 + "}", "[" * 100_000, "not json"]
    path.write_text("\n".join(lines) + "\n")
    assert list(read_transcript(path)) == [kept]


def _said(text: str, *edits: str) -> dict[str, Any]:
    """An assistant entry saying `text` and editing `edits`."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    blocks += [{"type": "tool_use", "name": "Edit", "input": {"file_path": f}} for f in edits]
    return {"type": "assistant", "message": {"role": "assistant", "content": blocks}}


def test_odd_paths_and_control_characters_do_not_cost_the_digest(env: Path, tmp_path: Path) -> None:
    # A path too long to store, a NUL or a lone surrogate in one used to fail the whole
    # digest; terminal escapes in what was said were stored and printed back raw.
    # (A bidirectional override, refused in a stored path, is dropped too.)
    odd = ["a/" * 300 + "long.py", "src/nul\x00.py", "src/\udcff.py", "src/\x1b[31mred.py"]
    odd.append("src/\u202eyp.evil")
    said = "We decided to \x1b]52;c;ZXZpbA==\x07use UTC\x1b[2J everywhere."
    path = tmp_path / "t.jsonl"
    lines = [json.dumps(_said(said, *odd, "src/kept.py"))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    digest = digest_transcript(read_transcript(path))
    assert digest.files == ["src/kept.py"]
    assert digest.decisions == ["We decided to ]52;c;ZXZpbA==use UTC[2J everywhere."]
    result = cli("hook", "session-end", input=hook_json("SessionEnd", env, path, reason="exit"))
    assert result.exit_code == 0 and "digest stored" in result.output, result.output
    [stored] = [m for m in brain_for(env).recent(10) if DIGEST_TAG in m.tags]
    assert stored.related_files == ["src/kept.py"] and "\x1b" not in stored.content


def test_a_line_over_the_cap_is_skipped_unread_and_the_rest_digested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import transcript_file

    monkeypatch.setattr(transcript_file, "LINE_BYTES", 1000)
    path = tmp_path / "t.jsonl"
    big = json.dumps(_said("We decided to skip this one. " + "x" * 5000))
    kept = json.dumps(_said("We decided to keep this one."))
    path.write_text(f"{big}\n{kept}\n")
    assert digest_transcript(read_transcript(path)).decisions == ["We decided to keep this one."]


@pytest.mark.parametrize("end", ["\r", "\r\n"])
def test_a_transcript_with_other_line_ends_is_digested(tmp_path: Path, end: str) -> None:
    # Lone CRs (old Mac) made the transcript one line, unreadable: no digest at all.
    path = tmp_path / "t.jsonl"
    entries = [_said("We decided to use Redis."), _said("We decided to pin the client.")]
    path.write_bytes(end.join(json.dumps(e) for e in entries).encode() + end.encode())
    digest = digest_transcript(read_transcript(path))
    assert digest.decisions == ["We decided to use Redis.", "We decided to pin the client."]


def test_two_long_session_ids_that_share_a_start_keep_two_digests(
    env: Path, tmp_path: Path
) -> None:
    # Tags hold 50 characters: ids cut to the same 42 were one session, and the second
    # session's digest replaced the first's.
    ids = [f"ci-runner-7/pipeline-20261203-nightly-build-job-000{i}" for i in (1, 2)]
    for sid, choice in zip(ids, ("Redis", "Postgres"), strict=True):
        path = tmp_path / f"{sid[-4:]}.jsonl"
        path.write_text(json.dumps(_said(f"We decided to use {choice} for the queue.")) + "\n")
        event = json.loads(hook_json("SessionEnd", env, path, reason="exit"))
        result = cli("hook", "session-end", input=json.dumps({**event, "session_id": sid}))
        assert result.exit_code == 0, result.output
    digests = [m for m in brain_for(env).recent(10) if DIGEST_TAG in m.tags]
    assert sorted("Redis" in m.content for m in digests) == [False, True]
    assert all(len(t) <= 50 for m in digests for t in m.tags)


def test_pre_compact_and_session_end_store_one_digest(env: Path, tmp_path: Path) -> None:
    path = transcript(tmp_path / "session.jsonl", env)
    result = cli(
        "hook",
        "pre-compact",
        input=hook_json("PreCompact", env, path, trigger="auto", custom_instructions=""),
    )
    assert result.exit_code == 0, result.output
    result = cli("hook", "session-end", input=hook_json("SessionEnd", env, path, reason="exit"))
    assert result.exit_code == 0, result.output
    brain = brain_for(env)
    digests = [m for m in brain.recent(50) if DIGEST_TAG in m.tags]
    assert len(digests) == 1
    digest = digests[0]
    assert digest.source is Source.AGENT_INFERRED and digest.importance == pytest.approx(0.3)
    assert f"session:{SESSION}" in digest.tags
    assert "Files touched: src/export.py, tests/test_tz.py" in digest.content
    assert "normalise all timestamps to UTC" in digest.content
    assert digest.related_files == ["src/export.py", "tests/test_tz.py"]


def test_two_hooks_of_one_session_at_once_store_one_digest(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PreCompact and a SessionEnd fired together each looked for the session's digest, found
    # none, and stored one: two digests, of which later hooks refreshed only the first.
    import threading

    from octobrain.memory import hooks, session_digest, transcript_parts

    path = transcript(tmp_path / "session.jsonl", env)
    both_looked = threading.Barrier(2)
    looked = session_digest._session_digests

    def look_then_wait(brain: Brain, tag: str) -> Any:
        found = looked(brain, tag)
        with contextlib.suppress(threading.BrokenBarrierError):  # the other one waits its turn
            both_looked.wait(timeout=2)
        return found

    monkeypatch.setattr(session_digest, "_session_digests", look_then_wait)

    def hook(event: str, more: list[str]) -> None:  # the later hook has seen more
        given = hooks.HookInput(event, SESSION, str(path), str(env), {})
        part = transcript_parts.transcript_part(path, str(env))
        part.digest.decisions += more
        session_digest.store_digest(brain_for(env, SESSION), given, part)

    threads = [
        threading.Thread(target=hook, args=("PreCompact", [])),
        threading.Thread(target=hook, args=("SessionEnd", ["We decided to keep the cron job."])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    digests = [m for m in brain_for(env).recent(50) if DIGEST_TAG in m.tags]
    assert len(digests) == 1


def test_a_credential_in_the_transcript_costs_its_sentence_not_the_digest(
    env: Path, tmp_path: Path
) -> None:
    path = transcript(tmp_path / "session.jsonl", env)
    leaked = {
        "type": "user",
        "message": {
            "role": "user",
            "content": "We decided to deploy with the key AKIAIOSFODNN7EXAMPLE for now.",
        },
    }
    path.write_text(path.read_text() + json.dumps(leaked) + "\n")
    result = cli("hook", "session-end", input=hook_json("SessionEnd", env, path, reason="exit"))
    assert result.exit_code == 0 and "digest stored" in result.output, result.output
    (digest,) = [m for m in brain_for(env).recent(50) if DIGEST_TAG in m.tags]
    assert "normalise all timestamps to UTC" in digest.content
    assert "AKIA" not in digest.content and "deploy with the key" not in digest.content


def test_the_digest_keeps_the_session_s_words_not_what_the_client_injected(tmp_path: Path) -> None:
    # CLAUDE.md comes back in a <system-reminder> every session: its "We decided …" lines took
    # the five decision places of every digest, before the session's own decision. A subagent's
    # turns and a compaction's summary are not the conversation either.
    claude_md = (
        "<system-reminder>\nContents of CLAUDE.md:\n"
        + "\n".join(f"- We decided long ago on rule {i} for this repository." for i in range(6))
        + "\n</system-reminder>"
    )
    user = {"type": "user", "message": {"content": [
        {"type": "text", "text": claude_md},
        {"type": "text", "text": "Please make the login page faster."},
    ]}}  # fmt: skip
    inline = _said("We decided to lazy-load the avatar images. <system-reminder>We decided on "
                   "rule 9.</system-reminder>")  # fmt: skip
    sidechain = {**_said("Search agent: I chose to grep for every caller first."),
                 "isSidechain": True}  # fmt: skip
    summary = {**_said("The user agreed to delete the legacy PayPal integration."),
               "isCompactSummary": True}  # fmt: skip
    digest = digest_transcript([user, inline, sidechain, summary])
    assert digest.decisions == ["We decided to lazy-load the avatar images."]


def test_injected_text_is_cut_in_one_pass_however_it_is_broken(tmp_path: Path) -> None:
    # 20,000 "<command-name " with no ">" took 3.2 s: each scanned to the end for its ">".
    import time

    from octobrain.memory.hooks import transcript_text

    entry = _said("<command-name " * 20_000 + "We decided to ship.")
    started = time.process_time()
    assert transcript_text(entry).endswith("We decided to ship.")
    assert time.process_time() - started < 0.5


def test_the_digest_leaves_out_sentences_that_name_a_credential(tmp_path: Path) -> None:
    # Nobody chose what a digest keeps: a password said in prose, or one assigned to a name,
    # is not read back into every later session's briefing.
    leaks = [
        "We agreed the staging DB_PASSWORD=S3cr3tP@ssw0rd99 stays until Friday.",
        "My sudo password is correcthorsebattery, we decided to share it with the team.",
        "We decided to use the webhook https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefgh.",
        "Going with the API key 9f8e7d6c5b4a39281706f5e4d3c2b1a0 for the staging account.",
        "We decided the access token is kept for one more day.",
    ]
    kept = "We decided to cap the briefing at 1500 tokens per session."
    digest = digest_transcript([_said(text) for text in [*leaks, kept]])
    assert digest.decisions == [kept]
