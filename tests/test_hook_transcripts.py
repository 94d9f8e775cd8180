"""The digest hooks on long and changing transcripts, run as Claude Code runs them: a new
process, the hook JSON on stdin."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import load_config
from octobrain.memory.brain import Brain
from octobrain.memory.gist import DIGEST_TAG
from octobrain.models import Memory

SESSION = "7a1c2a4e-51b7-4c1e-8d0a-3f2b6c7d8e90"
SCOPE = "acme/api"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
        "OCTOBRAIN_SERVICE_ENABLED": "0",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    return {**os.environ, **values}


def said(text: str, *edits: str) -> str:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    blocks += [{"type": "tool_use", "name": "Edit", "input": {"file_path": f}} for f in edits]
    entry = {"type": "assistant", "sessionId": SESSION, "message": {"content": blocks}}
    return json.dumps(entry) + "\n"


def tool_output(size: int) -> str:
    """A tool result of about `size` bytes, as most of a long transcript is."""
    body = "\n".join(
        f"{i:>6}\tdef handler_{i}(request): return respond(request)" for i in range(0, size // 56)
    )
    entry = {"type": "user", "message": {"content": [{"type": "tool_result", "content": body}]}}
    return json.dumps(entry) + "\n"


def hook(
    event: str, path: Path, env: dict[str, str], **fields: str
) -> subprocess.CompletedProcess[str]:
    name = {"pre-compact": "PreCompact", "session-end": "SessionEnd"}[event]
    given = {
        "session_id": SESSION,
        "transcript_path": str(path),
        "cwd": "/",
        "hook_event_name": name,
        **fields,
    }
    return subprocess.run(
        [sys.executable, "-m", "octobrain", "hook", event, "--scope", SCOPE],
        input=json.dumps(given), capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def digests() -> list[Memory]:
    brain = Brain(SCOPE, config=load_config())
    return [m for m in brain.recent(50) if DIGEST_TAG in m.tags]


def test_a_long_transcript_is_read_a_part_per_hook_and_the_rest_by_its_own_process(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The hook read the whole transcript (512 MiB at most): 200 MB of conversation took 20 s,
    # the bound about 50, and Claude Code kills a hook at its timeout (60 s as installed).
    path = tmp_path / "long.jsonl"
    with path.open("w") as out:
        out.write(said("We decided to keep the retry budget at three.", "/src/retry.py"))
        for _ in range(40 * 8):  # 43 MiB
            out.write(tool_output(128 << 10))
        out.write(said("We decided to pin the client library.", "/src/client.py"))
    done = hook("session-end", path, env)
    assert done.returncode == 0, done.stderr
    found = re.search(r"\(32 of its 43 MiB read\); the rest is read by process (\d+)", done.stderr)
    assert found, done.stderr
    pid = int(found[1])
    for _ in range(600):  # the other process ends by itself (bounded, not a speed check)
        if not Path(f"/proc/{pid}").exists() or "Z" in _state(pid):
            break
        time.sleep(0.1)
    [digest] = digests()
    assert "retry budget" in digest.content and "pin the client" in digest.content
    assert digest.related_files == ["src/retry.py", "src/client.py"]
    again = hook("session-end", path, env)  # the same event again: read on from the end
    assert again.returncode == 0 and "long" not in again.stderr, again.stderr
    assert [d.content for d in digests()] == [digest.content]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_later_hook_adds_to_the_digest_what_an_earlier_one_stored(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A later hook's digest replaced the earlier one's: a transcript cut after a compaction
    # (or a session resumed from a new file holding only its tail) lost the decisions and
    # fixes of the part that was cut, exactly what the PreCompact hook was there to keep.
    path = tmp_path / "session.jsonl"
    path.write_text(
        said("We decided to normalise timestamps to UTC.", "/src/tz.py")
        + said("Fixed: the root cause was a naive datetime in the importer.")
    )
    assert hook("pre-compact", path, env).returncode == 0
    tail = tmp_path / "resumed.jsonl"
    tail.write_text(said("We decided to keep the nightly export job.", "/src/export.py"))
    done = hook("session-end", tail, env)
    assert done.returncode == 0 and "digest stored" in done.stderr, done.stderr
    [digest] = digests()
    for point in ("normalise timestamps", "naive datetime", "nightly export"):
        assert point in digest.content, digest.content
    assert digest.related_files == ["src/tz.py", "src/export.py"]
    path.write_text(path.read_text() + said("We decided to drop the v1 routes."))
    assert hook("session-end", path, env).returncode == 0  # back to the first file, grown
    [digest] = digests()
    assert digest.content.count("normalise timestamps") == 1 and "v1 routes" in digest.content


def test_a_hook_killed_between_its_digest_and_its_record_is_finished_by_the_next(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from octobrain.cli import brief
    from octobrain.cli.main import main
    from octobrain.memory import transcript_file

    path = tmp_path / "session.jsonl"
    path.write_text(said("We decided to shard the queue.", "/src/q.py") + tool_output(4096) * 3)
    given = json.dumps({"session_id": SESSION, "transcript_path": str(path), "cwd": "/"})
    monkeypatch.setattr(transcript_file, "READ_BYTES", 4096)  # one part: the first two lines

    def killed(*_: object) -> None:
        raise SystemExit(137)

    with monkeypatch.context() as patch:
        patch.setattr(transcript_file.Progress, "save", killed)
        CliRunner().invoke(main, ["hook", "pre-compact", "--scope", SCOPE], input=given)
    assert transcript_file.Progress.load(f"session:{SESSION}") is None
    [first] = digests()
    monkeypatch.setattr(brief, "_read_on", lambda *_: 0)  # no process of its own here
    for _ in range(4):  # read on, a part at a time
        result = CliRunner().invoke(main, ["hook", "pre-compact", "--scope", SCOPE], input=given)
        assert result.exit_code == 0, result.output
    [digest] = digests()
    assert digest.id == first.id and digest.content.count("shard the queue") == 1
    progress = transcript_file.Progress.load(f"session:{SESSION}")
    assert progress is not None and progress.offset == path.stat().st_size


def test_a_session_s_transcript_path_that_is_now_a_fifo_is_refused_not_waited_on(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Once the session had a hook's record, the next hook checked the bytes it had read with a
    # plain open: a FIFO in the transcript's place held the hook until Claude Code killed it.
    path = tmp_path / "session.jsonl"
    path.write_text(said("We decided to normalise timestamps to UTC.", "/src/tz.py"))
    assert hook("session-end", path, env).returncode == 0
    path.unlink()
    os.mkfifo(path)
    done = hook("session-end", path, env)  # (its timeout only guards against a hang)
    assert done.returncode == 0 and done.stdout == "", done
    assert "is not a regular file" in done.stderr, done.stderr
    assert [d.content for d in digests()] == [
        "Decisions:\n- We decided to normalise timestamps to UTC.\n\nFiles touched: src/tz.py"
    ]


def test_a_tool_call_named_by_an_object_or_a_list_costs_nothing_of_the_digest(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A tool_use block whose `name` was no string failed the hook ("unhashable type: 'dict'"):
    # exit 0, the session's digest lost.
    odd = [{"type": "tool_use", "name": name, "input": {"file_path": "/odd.py"}}
           for name in ({"x": 1}, ["Edit"], None, 7)]  # fmt: skip
    entry = {"type": "assistant", "sessionId": SESSION, "message": {"content": odd}}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(entry) + "\n" + said("We decided to keep UTC.", "/src/a.py"))
    done = hook("session-end", path, env)
    assert done.returncode == 0 and "digest stored" in done.stderr, done.stderr
    [digest] = digests()
    assert "We decided to keep UTC." in digest.content and digest.related_files == ["src/a.py"]


@pytest.mark.parametrize("offset", ["1e999", "-Infinity"])
def test_a_damaged_record_of_how_far_a_hook_read_is_read_as_none(
    env: dict[str, str], tmp_path: Path, offset: str
) -> None:
    # A record whose offset JSON read as a float infinity failed every later hook of
    # the session ("cannot convert float infinity to integer"): exit 0, no digest.
    from octobrain.memory.transcript_file import Progress

    path = tmp_path / "session.jsonl"
    path.write_text(said("We decided to normalise timestamps to UTC."))
    assert hook("pre-compact", path, env).returncode == 0
    record = Progress.path(f"session:{SESSION}")
    record.write_text(re.sub(r'"offset": \d+', f'"offset": {offset}', record.read_text()))
    path.write_text(path.read_text() + said("We decided to drop the v1 routes."))
    done = hook("session-end", path, env)
    assert done.returncode == 0 and "digest stored" in done.stderr, done.stderr
    [digest] = digests()
    assert "normalise timestamps" in digest.content and "v1 routes" in digest.content


def test_what_follows_the_line_that_runs_past_a_part_s_end_is_read_on(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The line running past a part's bound was read to its end in a block that held the rest
    # of the file: the part said the transcript was done, so nothing read on, and a session's
    # last decisions (up to 64 KiB past its first 32 MiB) were never in its digest.
    from octobrain.memory import transcript_file
    from octobrain.memory.transcript_parts import transcript_part

    monkeypatch.setattr(transcript_file, "READ_BYTES", 4096)
    path = tmp_path / "session.jsonl"
    first, last = "We decided to shard the queue.", "We decided to pin the client at 2.3."
    path.write_text(said(first) + tool_output(8192) + said(last))
    part = transcript_part(path, "/", 0)
    assert not part.done and part.digest.decisions == [first]
    rest = transcript_part(path, "/", part.end)
    assert rest.done and rest.digest.decisions == [last]


def test_a_digest_the_user_edited_is_kept_and_what_follows_extends_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The next hook wrote the session's points over the digest's content: the words the user
    # had put in its place with `memory update -c` were gone.
    path = tmp_path / "session.jsonl"
    path.write_text(said("We decided to normalise timestamps to UTC.", "/src/tz.py"))
    assert hook("pre-compact", path, env).returncode == 0
    [first] = digests()
    mine = "We decided to normalise timestamps to UTC. Ask Dana before changing src/tz.py."
    Brain(SCOPE, config=load_config()).update(first.id, content=mine)
    path.write_text(path.read_text() + said("We decided to keep the nightly export job."))
    for event in ("session-end", "session-end"):  # the second finds nothing new
        assert hook(event, path, env).returncode == 0
    kept, added = sorted(digests(), key=lambda m: m.id != first.id)
    assert kept.content == mine
    assert added.title.endswith(", continued") and "nightly export" in added.content
    _, links = Brain(SCOPE, config=load_config()).graph(added.id, depth=1)
    assert (added.id, first.id) in {
        (e.source_id, e.target_id) for e in links if e.relationship_type.value == "extends"
    }
    path.write_text(said("We decided to normalise timestamps to UTC."))  # cut, read again
    path.write_text(path.read_text() + said("Fixed: the root cause was a stale cache."))
    assert hook("session-end", path, env).returncode == 0
    [_, added] = sorted(digests(), key=lambda m: m.id != first.id)
    assert "stale cache" in added.content and "normalise" not in added.content


def test_a_hook_json_without_a_session_id_reads_on_into_one_digest(
    env: dict[str, str], tmp_path: Path
) -> None:
    # No record of how far a hook read was kept without a session id: each hook read the
    # transcript from its start and stored a digest of its own, the same points twice.
    path = tmp_path / "session.jsonl"
    path.write_text(said("We decided to normalise timestamps to UTC."))
    assert hook("pre-compact", path, env, session_id="").returncode == 0
    path.write_text(path.read_text() + said("We decided to drop the v1 routes."))
    assert hook("session-end", path, env, session_id="").returncode == 0
    [digest] = digests()
    assert digest.content.count("normalise timestamps") == 1 and "v1 routes" in digest.content
    other = tmp_path / "other.jsonl"
    other.write_text(said("We decided to shard the queue."))
    assert hook("session-end", other, env, session_id="").returncode == 0
    assert len(digests()) == 2  # another transcript, another session


def test_a_repository_moved_mid_session_keeps_its_digest_and_relative_files(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Read from a new cwd, an edit made before the move was named by its old absolute path,
    # beside the same file's relative one.
    old, new = tmp_path / "old", tmp_path / "new"
    path = tmp_path / "session.jsonl"

    def at(where: Path, text: str, edited: str) -> str:
        entry = json.loads(said(text, str(where / edited)))
        return json.dumps({**entry, "cwd": str(where)}) + "\n"

    path.write_text(at(old, "We decided to normalise timestamps to UTC.", "src/tz.py"))
    assert hook("pre-compact", path, env, cwd=str(old)).returncode == 0
    path.write_text(path.read_text() + at(new, "We decided to drop the v1 routes.", "src/api.py"))
    assert hook("session-end", path, env, cwd=str(new)).returncode == 0
    [digest] = digests()
    assert digest.related_files == ["src/tz.py", "src/api.py"]
    resumed = tmp_path / "resumed.jsonl"  # the whole conversation again, in a new file
    resumed.write_text(path.read_text())
    assert hook("session-end", resumed, env, cwd=str(new), session_id="s-2").returncode == 0
    assert all(m.related_files == ["src/tz.py", "src/api.py"] for m in digests())
