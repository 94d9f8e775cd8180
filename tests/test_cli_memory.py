"""`octobrain memory …` through click's runner and through the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    return values


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(
        main, ["memory", "--scope", "github.com/acme/api", *args], input=input
    )


def whole_store(*args: str) -> Result:
    """`octobrain memory <args>` for a command on every scope: it takes no `--scope`."""
    return CliRunner().invoke(main, ["memory", *args])


def memorize(title: str, content: str, *extra: str) -> str:
    result = run("memorize", "-t", title, "-c", content, "--format", "json", *extra)
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["id"])


def test_round_trip(env: dict[str, str]) -> None:
    mid = memorize(
        "Rate limiting decision",
        "API rate limiting uses a token bucket per key.",
        "--tags",
        "api,limits",
    )
    result = run("remember", "token bucket", "--format", "json")
    assert result.exit_code == 0
    (hit,) = json.loads(result.output)["results"]
    assert (hit["id"], hit["tags"]) == (mid, ["api", "limits"])
    text = run("remember", "token bucket").output
    assert "[CONFIRMED] Rate limiting decision" in text and "Why:" in text
    assert run("get", mid, "--format", "json").exit_code == 0
    assert "No relevant memories" in run("remember", "chocolate cake frosting").output


@pytest.mark.parametrize(
    ("query", "title"),
    [("Go", "Backend language"), ("S3", "Blob storage"), ("C#", "Editor plugin")],
)
def test_a_two_byte_name_is_a_question(env: dict[str, str], query: str, title: str) -> None:
    memorize("Backend language", "Every backend service is written in Go, built with make.")
    memorize("Blob storage", "Uploads are kept in S3 with a lifecycle rule after 30 days.")
    memorize("Editor plugin", "The editor plugin is written in C# against the 2022 SDK.")
    found = run("remember", query, "--format", "json")
    assert found.exit_code == 0, found.output
    assert json.loads(found.output)["results"][0]["title"] == title


def test_an_empty_remember_says_a_filter_left_nothing_not_the_threshold(
    env: dict[str, str],
) -> None:
    memorize("Zebra migrations hub", "The zebra migrations hub moves every night.")
    result = run(
        "remember", "zebra migrations hub", "--after", "2099-01-01", "--min-relevance", "0"
    )
    assert result.exit_code == 0
    assert result.output.startswith("No memories found: none in github.com/acme/api or the global")
    assert "meets the filters" in result.output and "min_relevance" not in result.output
    data = json.loads(run("remember", "zebra", "--after", "2099-01-01", "--format", "json").output)
    assert (data["results"], data["empty"]) == ([], "filters")


def test_bad_input_is_one_line_and_exit_2(env: dict[str, str]) -> None:
    result = run("memorize", "-t", "abc", "-c", "long enough content here")
    assert result.exit_code == 2
    assert (
        result.output.strip() == "error: title: must be 5–200 bytes of UTF-8 after trimming, got 3"
    )
    result = run("remember", "token", "--after", "yesterday-ish")
    assert result.exit_code == 2 and result.output.startswith("error: --after: must be ISO-8601")
    result = run("get", "not-an-id")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_an_empty_time_bound_is_refused_not_taken_for_no_bound(env: dict[str, str]) -> None:
    memorize("Rate limiting decision", "API rate limiting uses a token bucket per key.")
    form = 'must be ISO-8601 (e.g. 2026-05-01 or 2026-05-01T12:00:00Z), got ""'
    for args, line in [
        (("--after", ""), f"error: --after: {form}"),
        (("--before", ""), f"error: --before: {form}"),
        (("--after", "2026-05-02", "--before", "2026-05-01"), "error: --before: must be later"
         " than --after"),
        # The value is quoted as given, even one that reads like a field's name.
        (("--after", "created_before"), f'error: --after: {form[:-2]}"created_before"'),
    ]:  # fmt: skip
        result = run("remember", "token bucket", *args)
        assert (result.exit_code, result.stdout) == (2, ""), (args, result.output)
        assert result.stderr == line + "\n", args


def test_a_related_to_with_a_colon_and_no_type_is_refused(env: dict[str, str]) -> None:
    other = memorize("Primary database", "Postgres 16 is the primary database.")
    for spec in (f"{other}:", f"{other}: "):
        result = run("memorize", "-t", "Replica lag", "-c", "Replicas lag by 2 s.",
                     "--related-to", spec)  # fmt: skip
        assert (result.exit_code, result.stdout) == (2, ""), result.output
        assert result.stderr == (
            f'error: --related-to: must be ID or ID:TYPE, a type after the colon; got "{spec}"\n'
        )
    assert "Replica lag" not in run("recent").output  # nothing stored
    done = run("memorize", "-t", "Replica lag", "-c", "Replicas lag by 2 s.", "--related-to",
               f"{other}:depends_on", "--format", "json")  # fmt: skip
    assert done.exit_code == 0 and json.loads(done.stdout)["relationships"] == 1


def test_forget_previews_then_deletes_exactly_that(env: dict[str, str]) -> None:
    keep = memorize("Primary database", "Postgres 16 is the primary database.")
    gone = memorize("Rate limiting decision", "API rate limiting uses a token bucket per key.")
    refused = run("forget", "--query", "token bucket")  # no terminal, no --yes
    # A failed command leaves stdout empty: the preview of what it refused to delete went
    # there, then the error, as if it had been the answer.
    assert (refused.exit_code, refused.stdout) == (2, ""), refused.output
    assert "--yes" in refused.stderr
    # Each memory previewed by its title and the start of its text: memories of one title
    # (a merged one and its members) were told apart by nothing.
    line = f"  {gone}  Rate limiting decision: API rate limiting uses a token bucket per key."
    assert line in refused.stderr.splitlines(), refused.output
    assert run("get", gone).exit_code == 0
    done = run("forget", "--query", "token bucket", "--yes", "--format", "json")
    assert done.exit_code == 0
    payload = json.loads(done.output)
    assert payload["deleted"] == 1 and [m["id"] for m in payload["memories"]] == [gone]
    assert run("get", gone).exit_code == 2
    assert run("get", keep).exit_code == 0


def test_forget_refuses_query_filters_with_ids_and_an_empty_query(env: dict[str, str]) -> None:
    mid = memorize("Rate limiting decision", "API rate limiting uses a token bucket per key.")
    for args, line in [
        (("--tags", "x"), "error: tags: only with --query; ids name exactly what to delete"),
        (("-m", "decision"), "error: memory_types: only with --query; ids name exactly what"),
        (("--query", ""), "error: query: must be 2–500 bytes of UTF-8 after trimming, got 0"),
        (("--query", "   "), "error: query: must be 2–500 bytes of UTF-8 after trimming, got 0"),
    ]:
        result = run("forget", mid, "-y", *args)
        assert result.exit_code == 2 and result.output.startswith(line), (args, result.output)
        assert len(result.output.splitlines()) == 1
    alone = run("forget", "--query", "", "-y")  # named query, not memory_ids
    assert alone.exit_code == 2 and alone.output.startswith("error: query: must be 2–500 bytes")
    both = run("forget", mid, "-y", "--query", "token bucket")
    assert both.exit_code == 2 and both.output.startswith("error: memory_ids: give memory ids or")
    assert run("get", mid).exit_code == 0  # nothing was deleted
    assert run("forget", mid, "-y").exit_code == 0


def test_a_filter_given_only_blanks_is_refused_not_read_as_none(env: dict[str, str]) -> None:
    # Before: `forget -q … --tags "$TAG" --yes` with TAG unset deleted every memory the query
    # found, as if no tag filter had been given; `remember` answered unfiltered.
    ids = [memorize(f"Deploy procedure {i}", f"Deploy procedure number {i}.") for i in range(3)]
    for command, option in [
        (("forget", "-q", "deploy procedure", "--yes"), ("--tags", "")),
        (("forget", "-q", "deploy procedure", "--yes"), ("-m", " ")),
        (("remember", "deploy procedure"), ("--files", " , ")),
    ]:
        result = run(*command, *option)
        field = {"--tags": "tags", "-m": "memory_types", "--files": "files"}[option[0]]
        assert result.exit_code == 2 and result.output == (
            f"error: {field}: must hold at least one non-blank value; leave it out for no filter\n"
        ), result.output
    assert all(run("get", mid).exit_code == 0 for mid in ids)  # nothing was deleted


def test_update_relate_graph_recent_stats(env: dict[str, str]) -> None:
    a = memorize("Goal: faster API", "Bring p95 latency of the API under 200 ms.", "-m", "goal")
    b = memorize("Cache hot endpoints", "Cache the /prices endpoint for 30 seconds.")
    linked = run("relate", b, a, "-t", "achieves", "--format", "json")
    assert json.loads(linked.output)["already_linked"] is False
    graph = json.loads(run("graph", a, "--format", "json").output)
    assert {m["id"] for m in graph["memories"]} == {a, b}
    assert graph["relationships"][0]["relationship_type"] == "achieves"
    updated = json.loads(
        run("update", b, "-i", "0.9", "--add-tags", "perf", "--format", "json").output
    )
    assert (updated["importance"], updated["tags"]) == (0.9, ["perf"])
    recent = json.loads(run("recent", "--format", "json").output)
    assert [m["id"] for m in recent] == [b, a]
    stats = json.loads(run("stats", "--format", "json").output)
    assert stats["total"] == 2 and stats["by_type"] == {"goal": 1, "code": 1}


def test_a_person_rewriting_an_inferred_memory_makes_it_confirmed(env: dict[str, str]) -> None:
    # Before: `update -c` kept [INFERRED] (and the inferred tier's lower trust) on words the
    # person had just typed; a tag or importance edit vouches for no words and keeps it.
    mid = memorize("Cache hot endpoints", "Cache /prices for 30 s.", "--source", "agent_inferred")
    tagged = json.loads(run("update", mid, "--add-tags", "perf", "--format", "json").output)
    assert tagged["source"] == "agent_inferred"
    rewritten = run("update", mid, "-c", "Cache /prices for 60 seconds.")
    assert rewritten.exit_code == 0, rewritten.output
    # Before: the memory alone, no line saying it was updated (`memorize` says "Memory stored:").
    assert rewritten.output.startswith(f"Memory updated: {mid}\n[CONFIRMED] Cache hot endpoints")
    back = run("update", mid, "--source", "agent_inferred", "--format", "json")
    assert json.loads(back.output)["source"] == "agent_inferred"


def test_a_memory_that_supersedes_another_is_not_also_in_conflict_with_it(
    env: dict[str, str],
) -> None:
    # Before: `--supersedes X --related-to X:conflicts` stored both edges and the answer listed
    # both: X ranked as replaced and was reported as disputed. The supersession holds.
    old = memorize("API timeout", "The API timeout is 30 seconds.")
    new = run("memorize", "-t", "API timeout now", "-c", "The API timeout is 45 seconds.",
              "--supersedes", old, "--related-to", f"{old}:conflicts")  # fmt: skip
    assert new.exit_code == 0, new.output
    assert f"this supersedes → {old}" in new.output and "conflicts" not in new.output
    graph = json.loads(run("graph", old, "--format", "json").output)
    assert [r["relationship_type"] for r in graph["relationships"]] == ["supersedes"]


def test_unrelate_removes_a_wrong_link_and_keeps_the_memories(env: dict[str, str]) -> None:
    # A link made by mistake (`relate`, or `memorize --related-to`) had no way out short of
    # forgetting a memory: every `remember` kept bringing the wrong neighbour along.
    a = memorize("Cache hot endpoints", "Cache the /prices endpoint for 30 seconds.")
    b = memorize("Primary database", "Postgres 16 is the primary database.")
    for kind in ("depends_on", "related_to"):
        assert run("relate", a, b, "-t", kind).exit_code == 0
    # Linking again keeps the link as it is, and says so instead of echoing what was asked.
    again = run("relate", a, b, "-t", "depends_on", "-s", "0.3", "-d", "new reason")
    assert again.output == (
        f"{a} depends_on {b} (already linked, with strength 0.8: kept; "
        "`memory unrelate` it first to link it anew)\n"
    )
    shown = json.loads(
        run("relate", a, b, "-t", "depends_on", "-s", "0.3", "--format", "json").output
    )
    assert (shown["strength"], shown["already_linked"]) == (0.8, True)
    done = run("unrelate", a[:8], b[:8], "-t", "depends_on")
    assert (done.exit_code, done.output) == (0, f"removed {a} depends_on {b}\n")
    graph = json.loads(run("graph", a, "--format", "json").output)
    assert [r["relationship_type"] for r in graph["relationships"]] == ["related_to"]
    again = run("unrelate", a, b, "-t", "depends_on")
    assert again.exit_code == 2
    assert f"error: target_id: no depends_on link from {a} to {b} to remove" in again.output
    # An unknown type offered the types octobrain writes itself, which `relate` then refuses.
    bogus = run("relate", a, b, "-t", "bogus")
    assert bogus.exit_code == 2 and 'unknown relationship type "bogus"; use one of' in bogus.output
    assert "auto_linked" not in bogus.output and "same_session" not in bogus.output
    kept = run("unrelate", a, b, "-t", "same_session")
    assert kept.exit_code == 2 and 'relationship_type: "same_session" edges are kept' in kept.output
    every = json.loads(run("unrelate", a, b, "--format", "json").output)
    assert [r["relationship_type"] for r in every["removed"]] == ["related_to"]
    assert run("graph", a).output == "No relationships.\n"
    assert {m["id"] for m in json.loads(run("recent", "--format", "json").output)} == {a, b}


@pytest.mark.parametrize("kind", ["consolidated_from", "auto_linked", "same_session"])
def test_links_octobrain_writes_itself_are_refused_from_the_cli(
    env: dict[str, str], kind: str
) -> None:
    hub = memorize("Unrelated hub note", "Release trains leave on Thursdays.")
    match = memorize("Alpha content topics", "Alpha content topics live in the CMS.")
    # Before: accepted; a hand-made consolidated_from ranked the hub first for the match's
    # query ("via consolidated member"), and doctor and unconsolidate saw nothing to mend.
    third = ("memorize", "-t", "Third note here", "-c", "Some content that is long enough.")
    for args in (("relate", hub, match, "-t", kind), (*third, "--related-to", f"{match}:{kind}")):
        refused = run(*args)
        assert refused.exit_code == 2, refused.output
        assert "written by octobrain itself" in refused.output, refused.output
    graph = json.loads(run("graph", hub, "--format", "json").output)
    assert graph["relationships"] == []


@pytest.mark.parametrize(
    ("description", "rule"),
    [
        ("x" * 120_000, "description: must be at most 200 characters, got 120000"),
        ("caf\udcff", "description: must be valid Unicode"),
    ],
)
def test_relate_checks_its_description_as_memorize_checks_a_link(
    env: dict[str, str], description: str, rule: str
) -> None:
    a = memorize("Unrelated hub note", "Release trains leave on Thursdays.")
    b = memorize("Alpha content topics", "Alpha content topics live in the CMS.")
    # Before: 120 kB stored on the edge (memorize's 200-character rule skipped); a byte that
    # is not UTF-8 a traceback.
    refused = run("relate", a, b, "-d", description)
    assert refused.exit_code == 2 and refused.output.startswith(f"error: {rule}"), refused.output
    assert json.loads(run("graph", a, "--format", "json").output)["relationships"] == []


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


def test_real_console_script(env: dict[str, str], tmp_path: Path) -> None:
    exe = Path(sysconfig.get_path("scripts")) / "octobrain"
    full_env = {**os.environ, **env}
    cwd = tmp_path / "project"
    cwd.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=cwd, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", "git@github.com:Acme/Shop.git"], cwd=cwd, check=True
    )
    out = subprocess.run(
        [
            str(exe),
            "memory",
            "memorize",
            "-t",
            "Checkout flow",
            "-c",
            "Checkout uses Stripe payment intents.",
            "--format",
            "json",
        ],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        check=True,
    )
    mid = json.loads(out.stdout)["id"]
    found = subprocess.run(
        [str(exe), "memory", "remember", "stripe payment", "--format", "json"],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        check=True,
    )
    payload = json.loads(found.stdout)
    assert (
        payload["scope"] == "github.com/acme/shop"
    )  # derived from the remote, user and .git stripped
    assert [r["id"] for r in payload["results"]] == [mid]
    elsewhere = subprocess.run(
        [str(exe), "memory", "remember", "stripe payment", "--format", "json"],
        cwd=tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(elsewhere.stdout)["results"] == []  # another scope sees nothing


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


@pytest.mark.parametrize(
    "args", [["memory", "stats"], ["memory", "--scope", "x/y", "stats"], ["brief"]]
)
def test_a_deleted_working_directory_is_one_line(
    env: dict[str, str], tmp_path: Path, args: list[str]
) -> None:
    # Path.cwd() raised FileNotFoundError: a 30-line traceback, exit 1.
    exe = str(Path(sysconfig.get_path("scripts")) / "octobrain")
    script = 'mkdir gone && cd gone && rmdir ../gone && exec "$@"'
    done = subprocess.run(
        ["sh", "-c", script, "sh", exe, *args],
        cwd=tmp_path, env={**os.environ, "OCTOBRAIN_SERVICE_ENABLED": "0"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "error: cwd: the current directory no longer exists; run from one that does\n"
    )


def test_terminal_escapes_in_a_memory_are_not_printed_to_the_terminal(env: dict[str, str]) -> None:
    # A memory written by an agent can hold escapes: set the window title, write the
    # clipboard (OSC 52), disguise a link. Text output printed them raw.
    title = "Deploy \x1b]0;owned\x07notes"
    content = "Run \x1b]52;c;ZXZpbA==\x07the \x1b[2Jdeploy script with \x9bcare."
    mid = memorize(title, content)
    for args in (["recent"], ["get", mid], ["remember", "deploy script"]):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert "Deploy ]0;ownednotes" in result.output
        assert not any(c in result.output for c in "\x1b\x07\x9b"), args
    data = json.loads(run("get", mid, "--format", "json").output)
    assert data["content"] == content  # stored and exported as written


def test_json_output_escapes_the_control_codes_json_leaves_raw(env: dict[str, str]) -> None:
    # JSON escapes only what is below U+0020: DEL and the C1 codes (CSI U+009B, OSC U+009D,
    # which a terminal acts on as on ESC) were printed raw by every --format json, the export
    # and the SessionStart hook. Now escaped: the same JSON, the same text read back.
    title = "Deploy \x9b2Jnotes"
    content = "Run \x9d52;c;ZXZpbA==\x9c the deploy\x7f script with care."
    mid = memorize(title, content)
    outputs = [
        run(*args).output
        for args in (
            ["get", mid, "--format", "json"],
            ["recent", "--format", "json"],
            ["remember", "deploy script", "--format", "json"],
            ["export"],
        )
    ]
    outputs.append(
        CliRunner()
        .invoke(main, ["brief", "--scope", "github.com/acme/api", "--format", "json"])
        .output
    )
    hook = json.dumps({"session_id": "s1", "cwd": str(Path.cwd()), "hook_event_name": "x"})
    started = CliRunner().invoke(
        main, ["hook", "session-start", "--scope", "github.com/acme/api"], input=hook
    )
    outputs.append(started.output)
    for output in outputs:
        assert not any(c in output for c in "\x7f\x9b\x9c\x9d"), output
        assert "\\u009b" in output or "\\u009d" in output, output
    assert json.loads(outputs[0])["content"] == content
    assert json.loads(started.output)["hookSpecificOutput"]["additionalContext"].count("\x9b") == 1


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["memory", "memorize", "-c", "Postgres 16 is the primary database."],
         "error: title: is required (-t / --title); see 'octobrain memory memorize --help'"),
        (["memory", "remember"],
         "error: queries: is required (QUERIES); see 'octobrain memory remember --help'"),
        (["memory", "remember", "x", "--limit", "abc"],
         "error: limit: 'abc' is not a valid integer; see 'octobrain memory remember --help'"),
        (["memory", "remember", "x", "--format", "yaml"],
         "error: format: 'yaml' is not one of 'text', 'json'; see 'octobrain memory remember "
         "--help'"),
        (["memory", "remember", "x", "--limt", "3"], "error: --limt: no such option (did you "
         "mean --limit?); see 'octobrain memory remember --help'"),
        (["memory", "memorize", "-t"], "error: -t: requires an argument"),
        (["bench", "modes"],
         "error: command: no such command 'modes'; see 'octobrain bench --help'"),
        (["--bogus"], "error: --bogus: no such option; see 'octobrain --help'"),
    ],
)  # fmt: skip
def test_a_mistaken_command_line_is_one_line_naming_the_field(
    env: dict[str, str], argv: list[str], line: str
) -> None:
    # Click printed its usage, a hint and "Error: Missing option '-t' / '--title'." on three
    # lines, where every other mistake is `error: <field>: <rule>`.
    result = CliRunner().invoke(main, argv, prog_name="octobrain")
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", line + "\n")


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


def test_refusals_name_the_option_given_not_a_derived_field(env: dict[str, str]) -> None:
    other = memorize("Primary database", "Postgres 16 is the primary database.")
    mid = memorize("Rate limiting decision", "API rate limiting uses a token bucket per key.")
    assert run("update", mid, "--add-tags", "api,limits").exit_code == 0
    unknown = "00000000-0000-0000-0000-000000000000"
    cases = [
        (
            [
                "memorize",
                "-t",
                "Rate limits v2",
                "-c",
                "Limits are per key now.",
                "--supersedes",
                "d0e2",
            ],
            "error: supersedes[0]: must be a memory id (a UUID) or a unique prefix",
        ),
        (
            [
                "memorize",
                "-t",
                "Rate limits v2",
                "-c",
                "Limits are per key now.",
                "--related-to",
                other,
                "--related-to",
                other,
                "--supersedes",
                unknown,
            ],
            f"error: supersedes[0]: no memory {unknown} is visible",
        ),
        (["update", mid, "--add-tags", "x" * 100_000], "error: add_tags[0]: at most 50 characters"),
        (["update", mid, "--add-tags", "ok," + "x" * 60], "error: add_tags[1]: at most 50"),
        (["update", mid, "--add-files", "f" * 100_000], "error: add_files[0]: at most 500 bytes"),
        (["consolidate", unknown], f"error: goal_id: no memory {unknown} is visible"),
    ]
    for args, line in cases:
        result = run(*args)
        assert result.exit_code == 2 and result.stderr.startswith(line), (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1
    bad_link = run("memorize", "-t", "Rate limits v2", "-c", "Limits are per key now.",
                   "--related-to", "d0e2", "--supersedes", other)  # fmt: skip
    assert bad_link.stderr.startswith("error: related_to[0].target_id: must be a memory id")


def test_minus_zero_is_stored_and_shown_as_zero(env: dict[str, str]) -> None:
    a = memorize("Primary database", "Postgres 16 is the primary database.", "-i", "-0")
    b = memorize("Rate limiting decision", "API rate limiting uses a token bucket per key.")
    stored = json.loads(run("get", a, "--format", "json").output)["importance"]
    assert (stored, str(stored)) == (0.0, "0.0")
    assert "Importance: stored 0.00 " in run("get", a).output
    updated = run("update", b, "-i", "-0", "--format", "json")
    assert str(json.loads(updated.output)["importance"]) == "0.0"
    link = run("relate", a, b, "-s", "-0", "--format", "json")
    assert str(json.loads(link.output)["strength"]) == "0.0"
    (edge,) = json.loads(run("graph", a, "--format", "json").output)["relationships"]
    assert str(edge["strength"]) == "0.0"


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
