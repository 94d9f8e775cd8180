"""`octobrain memory` on files and on the whole store: export, import, migrate, reembed,
history and restore."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main
from tests.cli_memory_support import memorize, memory_env, run  # noqa: F401  (a fixture)


@pytest.fixture
def env(memory_env: dict[str, str]) -> dict[str, str]:  # noqa: F811
    """A data dir of its own, the hash embedder, no config file."""
    return memory_env


def whole_store(*args: str) -> Result:
    """`octobrain memory <args>` for a command on every scope: it takes no `--scope`."""
    return CliRunner().invoke(main, ["memory", *args])


def test_export_import_files(env: dict[str, str], tmp_path: Path) -> None:
    memorize("Primary database", "Postgres 16 is the primary database.")
    dump = tmp_path / "dump.jsonl"
    assert run("export", str(dump)).exit_code == 0
    lines = dump.read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["header", "memory", "end"]
    other = CliRunner().invoke(
        main,
        ["memory", "--scope", "github.com/acme/api", "import", str(dump), "--format", "json"],
        env={"OCTOBRAIN_DATA_DIR": str(tmp_path / "other")},
    )
    assert other.exit_code == 0, other.output
    assert json.loads(other.stdout)["imported"] == 1
    assert json.loads(other.stdout)["scopes"] == {"github.com/acme/api": 1}
    # Saved again with a byte order mark (as editors on Windows save UTF-8): read the same.
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + dump.read_bytes())
    again = CliRunner().invoke(
        main,
        ["memory", "--scope", "github.com/acme/api", "import", str(marked), "--format", "json"],
        env={"OCTOBRAIN_DATA_DIR": str(tmp_path / "third")},
    )
    assert again.exit_code == 0 and json.loads(again.stdout)["imported"] == 1, again.output


def test_an_import_says_which_scopes_it_wrote_when_not_only_the_commands(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The file's scopes are kept: an import run elsewhere (its scope derived from another
    # cwd) wrote project memories and said only "imported 2 memories".
    memorize("Primary database", "Postgres 16 is the primary database.")
    editor = ["memorize", "-t", "Editor preference", "-c", "The user prefers vim keybindings."]
    assert CliRunner().invoke(main, ["memory", *editor, "--global"]).exit_code == 0
    dump = tmp_path / "dump.jsonl"
    assert run("export", str(dump)).exit_code == 0
    other = {"OCTOBRAIN_DATA_DIR": str(tmp_path / "other")}
    # A scope given for it is another project's, or global: the import wrote the memories in
    # their own project all the same, exit 0, and `recent` there showed none of them.
    for given in (["--global"], ["--scope", "github.com/acme/web"]):
        refused = CliRunner().invoke(main, ["memory", *given, "import", str(dump)], env=other)
        assert refused.exit_code == 2, refused.output
        assert refused.stderr.endswith(
            f"error: {given[0]}: "
            + ("given" if len(given) == 1 else 'is "github.com/acme/web"')
            + ', but the file holds memories of "github.com/acme/api": an import keeps each '
            "memory's scope and moves none into another project; nothing was imported. Leave "
            f"{given[0]} out to import them as they are (then seen with --scope "
            "github.com/acme/api)\n"
        ), refused.stderr
    done = CliRunner().invoke(main, ["memory", "import", str(dump)], env=other)
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("imported 2 memories (1 in github.com/acme/api, 1 global), ")


def test_an_export_that_fails_leaves_the_file_that_was_there(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import export

    memorize("Primary database", "Postgres 16 is the primary database.")
    backup = tmp_path / "backup.jsonl"
    assert run("export", str(backup)).exit_code == 0
    kept = backup.read_bytes()
    missing = run("export", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    assert "output: cannot write" in missing.output and "nothing was written" in missing.output

    def full_disk(brain: object, out: Any, **_: object) -> int:
        out.write('{"kind": "header"}\n')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "export_jsonl", full_disk)
    failed = run("export", "--force", str(backup))
    assert failed.exit_code == 1 and "No space left on device" in failed.output  # (not usage)
    assert backup.read_bytes() == kept  # (written in place, it was cut to the failed part)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.jsonl", "data"]


def test_an_export_over_a_private_file_keeps_it_private(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: the file written beside it and moved over it came with the default mode, so a
    # 0600 export made with --force was readable by everyone (0644).
    memorize("Primary database", "Postgres 16 is the primary database.")
    private = tmp_path / "private.jsonl"
    private.write_text("x")
    private.chmod(0o600)
    assert run("export", "--force", str(private)).exit_code == 0
    assert private.stat().st_mode & 0o777 == 0o600 and "Postgres" in private.read_text()


def test_an_export_refuses_a_destination_that_is_not_a_regular_file(
    env: dict[str, str], tmp_path: Path
) -> None:
    memorize("Primary database", "Postgres 16 is the primary database.")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # Before: opened as it was, a FIFO nobody reads blocked the export for good. The test holds
    # its read end open (without waiting) so the old code wrote to it instead of hanging.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    device = tmp_path / "device"
    device.symlink_to("/dev/null")
    try:
        for target in (fifo, device):
            for force in (["--force"], []):
                done = run("export", *force, str(target))
                assert (done.exit_code, done.stderr) == (
                    2,
                    f"error: output: {target} is not a regular file (give - for standard "
                    "output); nothing was written\n",
                ), (target, done.output)
        assert os.read(reader, 1) == b""  # nothing was written to it
    finally:
        os.close(reader)
    assert Path("/dev/null").is_char_device()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "device", "fifo"]
    fresh = tmp_path / "fresh.jsonl"  # a path not there yet is written as before
    assert run("export", str(fresh)).exit_code == 0 and len(fresh.read_text().splitlines()) == 3
    # A folder that is not there (its trailing slash) was written as a file of its name; an
    # empty name said "output:  is a directory".
    missing = run("export", f"{tmp_path}/sub/")
    assert missing.stderr == (
        f"error: output: {tmp_path}/sub/ names a folder that does not exist; name a file\n"
    )
    blank = run("export", "")
    assert blank.stderr == "error: output: must name a file to write, or - for stdout\n"
    assert not (tmp_path / "sub").exists()


def test_reembed_after_a_model_change(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    mid = memorize("Primary database", "Postgres 16 is the primary database.")
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:32")
    refused = run("remember", "postgres")
    assert refused.exit_code == 1 and "octobrain memory reembed" in refused.output
    done = whole_store("reembed")
    assert done.exit_code == 0, done.output
    assert "re-embedded 1 memory with hash:32" in done.stdout
    found = json.loads(run("remember", "postgres database", "--format", "json").stdout)
    assert [r["id"] for r in found["results"]] == [mid]


def memory_process(*args: str, scoped: bool = True) -> subprocess.CompletedProcess[str]:
    """`octobrain memory --scope github.com/acme/api <args>` (without `--scope` unless
    `scoped`) as a process of its own (the service off: this environment, read now, is the one
    it runs in)."""
    memory = [sys.executable, "-m", "octobrain", "memory"]
    memory += ["--scope", "github.com/acme/api"] if scoped else []
    env = {**os.environ, "OCTOBRAIN_SERVICE_ENABLED": "0"}
    return subprocess.run([*memory, *args], capture_output=True, text=True, env=env, check=False)


def test_reembed_in_a_new_process_reports_no_failure(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command's background sleep pass opened the store under the new model and logged,
    # cut off mid-word, "sleep pass for '…' failed, retried next start: … run `octobrain memory
    # reem" on every run of the very command that re-embeds.
    memorize("Primary database", "Postgres 16 is the primary database.")
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:32")
    refused = memory_process("remember", "postgres")
    assert refused.returncode == 1 and "sleep pass" not in refused.stderr
    assert refused.stderr.count("\n") == 1 and "octobrain memory reembed`" in refused.stderr
    done = memory_process("reembed", scoped=False)
    assert done.returncode == 0 and "re-embedded 1 memory with hash:32" in done.stdout
    assert "sleep pass" not in done.stderr and "failed" not in done.stderr


def test_history_and_restore(env: dict[str, str]) -> None:
    mid = memorize("Primary database", "Postgres 16 is the primary database.")
    version = json.loads(whole_store("history", "--format", "json").stdout)[0]["version"]
    assert run("forget", mid, "--yes").exit_code == 0
    refused = whole_store("restore", str(version))  # no terminal, no --yes
    assert refused.exit_code == 2 and "--yes" in refused.output
    done = whole_store("restore", str(version), "--yes")
    assert done.exit_code == 0, done.output
    assert json.loads(run("get", mid, "--format", "json").stdout)["id"] == mid


def test_history_says_what_the_forgotten_turns_mark_did(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The first forget of a turn commits a mark on the memories table (`manifest.STAMPED_ON`):
    # history showed it as one more version with the same count, as if nothing happened.
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"speaker": "A", "text": "The password is hunter2."}]))
    assert run("ingest", str(chat)).exit_code == 0
    turn = json.loads(run("recent", "--format", "json").stdout)[0]["id"]
    assert run("forget", turn, "--yes").exit_code == 0
    versions = json.loads(whole_store("history", "--format", "json").stdout)
    assert [v["memories"] for v in versions[:3]] == [0, 1, 1]
    assert [v.get("note") for v in versions] == [
        None,
        "marks the store as having forgotten turns",
        *[None] * (len(versions) - 2),
    ]
    text = whole_store("history").stdout.splitlines()
    assert text[1].endswith(
        "1 memory (no memory changed: this version marks the store as having forgotten turns)"
    )
    assert [line.endswith(")") for line in text].count(True) == 1


def test_history_times_are_utc_whatever_the_local_zone(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # LanceDB gives version times in local time without a zone; they were labelled UTC, so
    # in New York every version read five hours early.
    memorize("Primary database", "Postgres 16 is the primary database.")
    monkeypatch.setenv("TZ", "America/New_York")
    done = memory_process("history", "--format", "json", scoped=False)
    assert done.returncode == 0, done.stderr
    newest = datetime.fromisoformat(json.loads(done.stdout)[0]["timestamp"].replace("Z", "+00:00"))
    assert abs(datetime.now(UTC) - newest) < timedelta(minutes=10), newest


def test_migrate_refuses_a_destination_that_names_no_new_place(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mid = memorize("Rate limiting decision", "API rate limiting uses a token bucket per key.")
    work = tmp_path / "work"
    work.mkdir()
    (work / "file").write_text("x")
    monkeypatch.chdir(work)
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    assert (store / "memories.lance").is_dir()
    for to, rule in [
        ("", "must be a local directory or an object-store URI, got nothing"),
        ("  ", "must be a local directory or an object-store URI, got nothing"),
        ("a\nb", "must not contain control characters"),
        ("a\x1b]52;c;x\x07", "must not contain control characters"),
        ("a\udc9bb", "must be valid UTF-8"),  # the byte 0x9b as the shell passes it
        ("file", "cannot create the directory"),
        ("file/sub", "cannot create the directory"),
        ("x" * 300, "cannot create the directory"),
        (str(store / "sub"), "must not be inside the current store's directory"),
        (str(store / ".." / "db"), "must differ from the current store location"),
        (str(store.parent), "must not be a directory holding the current store"),
        ("ftp://x/y", "must be a local path or a URI with one of the schemes s3"),
    ]:
        result = whole_store("migrate", "--to", to)
        assert result.exit_code == 2, (to, result.output)
        assert result.stderr.startswith(f"error: to: {rule}"), (to, result.stderr)
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output
    assert sorted(p.name for p in work.iterdir()) == ["file"]  # nothing copied into the cwd
    assert not (store / "sub").exists()
    # `--option` follows storage.options' rules: a key given twice took the last value
    # without a word, and the retry options were not checked.
    for options, rule in [
        (["region=us-east-1", "REGION=eu-west-1"], 'names "REGION" twice; give each key once'),
        (["client_max_retries=abc"], "client_max_retries must be"),
        (["region"], "each entry must be key=value"),
    ]:
        given = [a for o in options for a in ("--option", o)]
        result = whole_store("migrate", "--to", "s3://bucket/copy", *given)
        assert result.exit_code == 2, (options, result.output)
        assert result.stderr.startswith(f"error: --option: {rule}"), (options, result.stderr)
    note = ["knowledge", "--scope", "github.com/acme/api", "store", "plan", "Ship it in May."]
    assert CliRunner().invoke(main, note).exit_code == 0  # (the knowledge tables too)
    done = whole_store("migrate", "--to", "elsewhere")
    assert done.exit_code == 0, done.output
    # One line per table, the counts in one column (knowledge_sources' pushed its own over).
    counted = [line for line in done.stdout.splitlines() if line.endswith(" rows  verified")]
    assert any(line.startswith("knowledge_sources ") for line in counted), counted
    assert len({line.index(" rows") for line in counted}) == 1, counted
    assert (work / "elsewhere" / "memories.lance").is_dir() and run("get", mid).exit_code == 0


def test_import_refuses_what_it_cannot_read_as_ingest_does(
    env: dict[str, str], tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opened blocking, it would wait for a writer that never comes
    cases = [
        ("/proc/self/mem", "error: source: cannot read /proc/self/mem: Input/output error"),
        (str(tmp_path), f"error: source: {tmp_path} is a directory, not an export file"),
        (str(tmp_path / "none"), f"error: source: no such file: {tmp_path / 'none'}"),
        (str(fifo), f"error: source: {fifo} is not a regular file"),
        ("/dev/zero", "error: source: /dev/zero is not a regular file"),
    ]
    for source, line in cases:
        if not Path(source).exists() and source.startswith("/proc"):
            continue  # not Linux
        result = run("import", source)
        assert (result.exit_code, result.stderr) == (2, line + "\n"), (source, result.output)


def test_restore_takes_a_negative_version_for_a_bad_version_not_an_option(
    env: dict[str, str],
) -> None:
    memorize("Rate limiting decision", "API rate limiting uses a token bucket per key.")
    for args in (["-1", "-y"], ["-5"], ["-0", "--yes"], ["0"]):
        result = whole_store("restore", *args)
        got = int(args[0])  # -0 is 0
        assert (result.exit_code, result.stderr) == (
            2,
            f"error: version: must be a version number >= 1, got {got}\n",
        ), (args, result.output)
    unknown = whole_store("restore", "--bogus")
    assert unknown.exit_code == 2 and "'--bogus' is not a valid integer" in unknown.stderr


def test_history_says_which_versions_were_the_stores_upkeep(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Index builds and compactions are versions too: history listed them with the count of the
    # version before and no word, as if a write had changed nothing. What made each is read
    # from the transaction Lance records for it, not guessed.
    from octobrain.store import upkeep

    monkeypatch.setattr(upkeep, "SCALAR_INDEX_MIN_ROWS", 1)  # build the scalar indexes now
    ids = [memorize(f"Database choice {i}", f"Postgres {i} is the primary one.") for i in (1, 2, 3)]
    assert run("forget", ids[0], "--yes").exit_code == 0
    built = whole_store("reindex")
    assert built.exit_code == 0 and "built 4 indexes" in built.output, built.output
    versions = json.loads(whole_store("history", "--format", "json").stdout)
    notes = [v.get("note") for v in versions]
    upkeep = [n for n in notes if n is not None]
    assert notes[: len(upkeep)] == upkeep and set(notes[len(upkeep) :]) == {None}
    assert upkeep.count("is the store's upkeep: a search index built, updated or dropped") >= 3
    assert "is the store's upkeep: the table's files compacted" in upkeep
    assert {v["memories"] for v in versions[: len(upkeep) + 1]} == {2}
    text = whole_store("history").stdout.splitlines()
    assert text[0].endswith(
        "2 memories (no memory changed: this version is the store's upkeep: the table's files "
        "compacted)"
    )


def test_an_export_removes_what_killed_exports_to_its_file_left(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A `memory export FILE` killed before its end left `.FILE.<pid>.partial` (6.5 MB in one
    # run), and no later export took it away.
    memorize("Primary database", "Postgres 16 is the primary database.")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    left = tmp_path / f".backup.jsonl.{dead}.partial"
    left.write_text('{"kind": "header"}\n')
    alive = tmp_path / f".backup.jsonl.{os.getppid()}.partial"  # (a process still running)
    alive.write_text("")
    other = tmp_path / f".other.jsonl.{dead}.partial"  # another file's
    other.write_text("")
    assert run("export", str(tmp_path / "backup.jsonl")).exit_code == 0
    assert not left.exists() and alive.exists() and other.exists()


def test_migrate_names_the_options_the_copy_needs_and_never_their_values(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Told only "set storage.uri", a user who migrated with --option aws_endpoint=… opened
    # the copy with the old storage.options: the endpoint gone, the bucket not found.
    memorize("Rate limiting decision", "API rate limiting uses a token bucket per key.")
    monkeypatch.chdir(tmp_path)
    given = ["--option", "region=eu-west-1", "--option", "aws_secret_access_key=sekrit-value"]
    done = whole_store("migrate", "--to", "copy", *given)
    assert done.exit_code == 0, done.output
    last = done.stdout.splitlines()[-1]
    assert last.endswith(
        "and, in storage.options, the --option values given (region, aws_secret_access_key)"
        " to use it"
    ), last
    assert "sekrit" not in done.output
    plain = whole_store("migrate", "--to", "plain")
    assert plain.stdout.splitlines()[-1].endswith(
        f"set storage.uri = {str(tmp_path / 'plain')!r} to use it"
    ), plain.stdout
