"""What a person typing `octobrain memory …` for the first time sees: trust, confirmations,
options after the subcommand, short ids, honest delete wording, importance, files kept safe."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main
from tests.export_lines import ended

SCOPE = "github.com/acme/api"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:256")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, ["memory", "--scope", SCOPE, *args], input=input)


def bare(*args: str) -> Result:
    """`octobrain memory <args>`, no scope option before the subcommand."""
    return CliRunner().invoke(main, ["memory", *args])


def whole_store(*args: str) -> Result:
    """`octobrain memory <args>` for a command on every scope: it takes no `--scope`."""
    return CliRunner().invoke(main, ["memory", *args])


def memorize(title: str, content: str, *extra: str) -> str:
    done = run("memorize", "-t", title, "-c", content, "--format", "json", *extra)
    assert done.exit_code == 0, done.output
    return str(json.loads(done.output)["id"])


def test_a_person_is_trusted_and_told_what_was_stored(env: Path) -> None:
    done = run("memorize", "-t", "Primary database", "-c", "Postgres 16 is the primary database.")
    assert done.exit_code == 0, done.output
    first, second = done.output.strip().splitlines()
    assert re.fullmatch(f"Memory stored: {UUID}", first), first
    assert second == (
        f"[CONFIRMED] Primary database | Type: code | Importance: 0.50 | Scope: {SCOPE}"
    )
    (stored,) = json.loads(run("recent", "--format", "json").output)
    assert stored["source"] == "user_confirmed" and first.endswith(stored["id"])
    inferred = memorize("Cache choice", "Redis caches sessions.", "--source", "agent_inferred")
    assert "[INFERRED] Cache choice" in run("get", inferred).output
    machine = json.loads(
        run(
            "memorize", "-t", "Queue choice", "-c", "Jobs go through SQS.", "--format", "json"
        ).output
    )
    assert set(machine) == {"id", "scope", "relationships", "findings_left", "already_stored"}
    assert machine["scope"] == SCOPE and machine["already_stored"] is None


def test_scope_options_work_after_the_subcommand(env: Path) -> None:
    done = bare("memorize", "-t", "Tabs or spaces", "-c", "The user wants four spaces.", "--global")
    assert done.exit_code == 0 and "Scope: (global)" in done.output, done.output
    other = CliRunner().invoke(
        main, ["memory", "remember", "four spaces", "--scope", "github.com/acme/web"]
    )
    assert other.exit_code == 0 and "Tabs or spaces" in other.output  # global is read by all
    private = memorize("Deploy key", "The api deploys with a per-env key.")
    assert bare("get", private, "--scope", "github.com/acme/web").exit_code == 2
    assert bare("get", private, "--global").exit_code == 2
    elsewhere = bare("get", private[:8], "--scope", "github.com/acme/web")  # prefixes too
    assert elsewhere.exit_code == 2 and "no memory id starting with" in elsewhere.output
    both = bare("get", private, "--scope", SCOPE, "--global")
    assert both.exit_code == 2 and "--global: cannot be combined with --scope" in both.output
    # Before: a blank or "/" scope silently meant the global one.
    for blank in (" ", "/"):
        stored = CliRunner().invoke(
            main, ["memory", "memorize", "-t", "Blank scope", "-c", "Not global.", "--scope", blank]
        )
        assert stored.exit_code == 2 and "--scope: must name a project" in stored.output


def test_scoped_commands_take_the_scope_after_them_too(env: Path, tmp_path: Path) -> None:
    # `memory ingest FILE --scope S` and `knowledge search Q --scope S` were "no such option":
    # only the group's `--scope`, before the subcommand, worked there.
    chat = tmp_path / "chat.jsonl"
    turn = {"speaker": "ann", "text": "We moved the zebra hub to Postgres.", "time": "2026-05-01"}
    chat.write_text(json.dumps(turn) + "\n", encoding="utf-8")
    done = CliRunner().invoke(main, ["memory", "ingest", str(chat), "--scope", "acme/chat"])
    assert done.exit_code == 0 and "into acme/chat: 1 added" in done.stdout, done.output
    assert "zebra hub" in bare("remember", "zebra hub", "--scope", "acme/chat").output
    notes = tmp_path / "notes.md"
    notes.write_text("# Retries\nRetries back off exponentially, five tries at most.\n")
    index = CliRunner().invoke(main, ["knowledge", "index", str(notes), "--scope", "acme/docs"])
    assert index.exit_code == 0 and "scope acme/docs" in index.output, index.output
    for scope, found in (("acme/docs", True), ("acme/other", False)):
        search = CliRunner().invoke(main, ["knowledge", "search", "retries", "--scope", scope])
        assert search.exit_code == 0 and ("five tries" in search.output) is found, search.output


@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        (["memory", "--scope", SCOPE, "remember", "x", "--global"],
         f"error: --global: contradicts --scope {SCOPE}, given before `remember`"),
        (["memory", "--global", "remember", "x", "--scope", SCOPE],
         "error: --scope: contradicts --global, given before `remember`"),
        (["memory", "--scope", SCOPE, "recent", "--scope", "github.com/acme/web"],
         f"error: --scope: contradicts --scope {SCOPE}, given before `recent`"),
        (["memory", "recent", "--scope", SCOPE, "--scope", "github.com/acme/web"],
         f'error: --scope: given as "{SCOPE}" and as "github.com/acme/web"'),
        (["memory", "--scope", "github.com/acme/web", "--scope", SCOPE, "recent"],
         f'error: --scope: given as "github.com/acme/web" and as "{SCOPE}"'),
        (["knowledge", "--global", "stats", "--scope", SCOPE],
         "error: --scope: contradicts --global, given before `stats`"),
    ],
)  # fmt: skip
def test_contradictory_scope_options_are_refused_not_one_taken(
    env: Path, argv: list[str], refusal: str
) -> None:
    # The option after the subcommand silently won over the group's (a `--global` memory
    # written to the project, or the reverse); a repeated --scope kept its last.
    said = CliRunner().invoke(main, argv)
    assert said.exit_code == 2 and said.output.splitlines() == [
        f"{refusal}; give the scope once"
    ], said.output


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "--scope", SCOPE, "recent", "--scope", SCOPE],
        ["memory", "--global", "recent", "--global"],
        ["memory", "recent", "--scope", SCOPE, "--scope", SCOPE],
        ["knowledge", "--scope", SCOPE, "stats", "--scope", SCOPE],
    ],
)
def test_a_scope_option_given_twice_alike_is_fine(env: Path, argv: list[str]) -> None:
    said = CliRunner().invoke(main, argv)
    assert said.exit_code == 0, said.output


@pytest.mark.parametrize(
    "argv",
    [
        ["--scope", "a/b", "history", "-l", "3"],
        ["history", "-l", "3", "--scope", "a/b"],
        ["--global", "reindex"],
        ["reindex", "--global"],
        ["--scope", "a/b", "reembed"],
        ["restore", "1", "--yes", "--global"],
        ["--global", "migrate", "--to", "elsewhere"],
    ],
)
def test_whole_store_commands_refuse_a_scope_rather_than_ignore_it(
    env: Path, argv: list[str]
) -> None:
    # `memory --scope a/b history` and `memory --global reindex` ran on every scope, exit 0,
    # as if the option meant something.
    done = CliRunner().invoke(main, ["memory", *argv])
    option = "--global" if "--global" in argv else "--scope"
    command = next(a for a in argv if a in ("history", "reindex", "reembed", "restore", "migrate"))
    assert (done.exit_code, done.stdout) == (2, "")
    assert done.stderr == (
        f"error: {option}: `memory {command}` works on the whole store, every scope, and takes "
        f"no {option}\n"
    )


def test_short_ids_are_accepted_everywhere_and_ambiguity_lists_candidates(
    env: Path, tmp_path: Path
) -> None:
    goal = memorize("Goal: faster API", "Bring p95 latency of the API under 200 ms.", "-m", "goal")
    short = goal[:8]
    assert goal in run("get", short).output
    assert goal in run("get", short.upper()).output
    assert goal in run("get", goal.replace("-", "")[:12]).output  # hyphens are optional
    cache = memorize(
        "Cache hot endpoints", "Cache /prices for 30 s.", "--related-to", f"{short}:achieves"
    )
    assert run("relate", cache[:8], short, "-t", "related_to").exit_code == 0
    graph = json.loads(run("graph", short, "--format", "json").output)
    assert {m["id"] for m in graph["memories"]} == {goal, cache}
    assert (
        json.loads(run("update", cache[:10], "-i", "0.9", "--format", "json").output)["importance"]
        == 0.9
    )
    newer = memorize(
        "Cache the hot endpoints", "Cache /prices for 60 s.", "--supersedes", cache[:8]
    )
    assert newer != cache
    too_short = run("get", goal[:7])
    assert too_short.exit_code == 2
    assert "memory_id: must be a memory id (a UUID) or a unique prefix of at least 8 hex" in (
        too_short.output
    )
    missing = run("get", "ffffffff" if not goal.startswith("ffffffff") else "eeeeeeee")
    assert missing.exit_code == 2 and "no memory id starting with" in missing.output

    # Two memories whose ids share 8 digits (an import keeps the ids it is given).
    dump = tmp_path / "dump.jsonl"
    assert run("export", str(dump)).exit_code == 0
    header, *rows = (json.loads(line) for line in dump.read_text().splitlines())
    twins = []
    for i, row in enumerate(r for r in rows if r.get("kind") == "memory"):
        if i < 2:
            twins.append({**row, "id": f"abcdef12-0000-4000-8000-00000000000{i}"})
    other = tmp_path / "twins.jsonl"
    other.write_text("\n".join(ended([json.dumps(r) for r in [header, *twins]])) + "\n")
    assert run("import", str(other)).exit_code == 0
    ambiguous = run("get", "abcdef12")
    assert ambiguous.exit_code == 2
    assert "abcdef12 is ambiguous, 2 memories start with it" in ambiguous.output
    assert all(t["id"] in ambiguous.output for t in twins) and "give more digits" in (
        ambiguous.output
    )
    deleted = run("forget", "abcdef12-0000-4000-8000-000000000001", "--yes")
    assert deleted.exit_code == 0 and "Deleted 1 memory;" in deleted.output
    assert twins[0]["id"] in run("get", "abcdef12").output  # unique again


def test_forget_says_what_is_true_about_undo(env: Path) -> None:
    gone = memorize("Staging password rule", "Staging passwords rotate weekly.")
    done = run("forget", gone[:8], "--yes")
    assert done.exit_code == 0, done.output
    assert "permanently" not in done.output and "Will delete 1 memory:" in done.output
    # The version to go back to is named (before: "see `octobrain memory history`", which
    # lists versions by time and count, leaving the person to work out which was before).
    told = re.search(r"Deleted 1 memory; `octobrain memory restore (\d+) --yes` brings it back "
                     r"for 7 days", done.output)  # fmt: skip
    assert told is not None, done.output
    assert whole_store("restore", told[1], "--yes").exit_code == 0
    assert run("get", gone).exit_code == 0, "what the message promised"


def test_importance_is_named_stored_and_effective(env: Path) -> None:
    mid = memorize("Rate limiting decision", "API rate limiting uses a token bucket per key.")
    shown = run("get", mid).output
    assert "Importance: stored 0.50 |" in shown
    found = run("remember", "token bucket rate limiting").output
    effective = re.search(r"Importance: stored 0\.50, effective (\d\.\d\d) \|", found)
    assert effective is not None, found
    assert f"effective importance {effective[1]} (stored 0.50)" in found  # the Why: line agrees
    data = json.loads(run("remember", "token bucket rate limiting", "--format", "json").output)
    hit = data["results"][0]
    # The first search was a read: it raised the effective value, never the stored one.
    assert hit["importance"] == 0.5 and hit["effective_importance"] > float(effective[1])


def test_export_refuses_to_overwrite_and_says_how_many(env: Path, tmp_path: Path) -> None:
    memorize("Primary database", "Postgres 16 is the primary database.")
    dump = tmp_path / "backup.jsonl"
    dump.write_text("precious\n")
    refused = run("export", str(dump))
    assert refused.exit_code == 2
    assert refused.output.strip() == (
        f"error: output: {dump} already exists; pass --force to overwrite it"
    )
    assert dump.read_text() == "precious\n"
    done = run("export", str(dump), "--force")
    assert done.exit_code == 0 and f"exported 1 memory to {dump}" in done.stderr
    assert f"exporting up to 1 memory to {dump}" in done.stderr
    again = CliRunner().invoke(
        main,
        ["memory", "import", str(dump)],
        env={"OCTOBRAIN_DATA_DIR": str(tmp_path / "other")},
    )
    assert again.exit_code == 0, again.output
    assert f"checking {dump}" in again.stderr
    assert f"importing 1 memory from {dump}" in again.stderr
    assert again.stdout.startswith(  # run outside the project: it says where the memory went
        "imported 1 memory (1 in github.com/acme/api), skipped 0 already present, 0 relationships"
    )
    # From a pipe: read once, checked, then written; a second time, nothing is new.
    piped = CliRunner().invoke(
        main,
        ["memory", "import", "-"],
        input=run("export").stdout,
        env={"OCTOBRAIN_DATA_DIR": str(tmp_path / "other")},
    )
    assert piped.exit_code == 0, piped.output
    assert piped.stdout.startswith("imported 0 memories, skipped 1 already present")


def test_mcp_help_is_for_users() -> None:
    shown = CliRunner().invoke(main, ["mcp", "--help"]).output
    assert "Run the MCP server" in shown and "root group" not in shown
