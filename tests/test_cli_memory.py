"""`octobrain memory …` through click's runner and through the real console script: memorize,
remember, forget, update and relate, and what a mistaken command line is told (export, import,
migrate, history: `test_cli_memory_store.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from tests.cli_memory_support import memorize, memory_env, run  # noqa: F401  (a fixture)


@pytest.fixture
def env(memory_env: dict[str, str]) -> dict[str, str]:  # noqa: F811
    """A data dir of its own, the hash embedder, no config file."""
    return memory_env


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
