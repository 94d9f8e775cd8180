"""Consolidation from the terminal: sleep-consolidate, consolidate, unconsolidate, lazy passes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main
from tests.consolidation_support import TWINS


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    return tmp_path / "data"


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, ["memory", "--scope", "github.com/acme/api", *args])
    for thread in threading.enumerate():  # let a lazy pass this call started finish
        if thread.name == "octobrain-sleep":
            thread.join(timeout=60)
    return result


def ok(*args: str) -> object:
    result = run(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def memorize(title: str, content: str, *extra: str) -> str:
    out = ok("memorize", "-t", title, "-c", content, *extra)
    assert isinstance(out, dict)
    return str(out["id"])


def test_sleep_consolidate_dry_run_then_merge_then_unconsolidate(env: Path) -> None:
    ids = [memorize("Deploy pipeline", text) for text in TWINS]
    # The first command of the day started a lazy pass beside its write: a pass that found
    # the scope still empty recorded nothing (the next process runs the day's pass), one that
    # found the memory ran, with nothing to merge yet, and recorded that it succeeded.
    assert len(list((env / "sleep").glob("*.json"))) <= 1
    planned = run("sleep-consolidate", "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert "would merge 1 cluster" in planned.output and "planned" in planned.output
    assert {m["state"] for m in ok("recent")} == {"working"}  # type: ignore[attr-defined]

    merged = ok("sleep-consolidate", "--threshold", "0.9", "--min-size", "4")
    assert isinstance(merged, dict) and len(merged["consolidations"]) == 1
    done = merged["consolidations"][0]
    assert sorted(m["id"] for m in done["members"]) == sorted(ids)
    parent = done["parent"]["id"]
    found = ok("remember", "blue green deploy smoke test")
    assert isinstance(found, dict) and found["results"][0]["id"] == parent

    undone = ok("unconsolidate", parent)
    assert isinstance(undone, dict) and sorted(undone["restored"]) == sorted(ids)
    bad = run("sleep-consolidate", "--min-size", "1")
    assert bad.exit_code == 2 and "min_size: must be an integer >= 2" in bad.output


def test_forget_says_what_it_changed_in_a_merge(env: Path) -> None:
    ids = [memorize("Deploy pipeline", text) for text in TWINS]
    merged = ok("sleep-consolidate", "--threshold", "0.9", "--min-size", "4")
    parent = merged["consolidations"][0]["parent"]["id"]  # type: ignore[index]
    # (The fullest wording leads the merged memory: forgetting it changes what that says.)
    member = run("forget", ids[3], "--yes")
    assert member.exit_code == 0, member.output
    assert f"merged memories that held it): {parent}" in member.output
    gone = ok("forget", parent, "--yes")
    assert isinstance(gone, dict) and gone["deleted"] == 1 and gone["rewritten"] == []
    assert sorted(gone["restored"]) == sorted(ids[:3])
    assert {m["state"] for m in ok("recent")} == {"working"}  # type: ignore[attr-defined]


def test_goal_close_over_the_cli(env: Path) -> None:
    goal = memorize("Ship rate limiting", "Goal: rate limit the public API.", "-m", "goal")
    finding = memorize(
        "Token bucket",
        "Token bucket per key for rate limiting.",
        "--related-to",
        f"{goal}:achieves",
    )
    out = ok("consolidate", goal)
    assert isinstance(out, dict) and out["synthesised_parent"]
    assert [m["id"] for m in out["members"]] == [finding]
    assert ok("get", finding)["state"] == "consolidated"  # type: ignore[index]
    assert run("remember", "token bucket", "--include-archived").exit_code == 0


def test_a_closes_link_made_by_relate_closes_the_goal_and_only_a_goal(env: Path) -> None:
    # `relate NOTE GOAL -t closes` stored the link and closed nothing (memorize with the same
    # link closes the goal); a note could close a second goal that way, and a closes link to
    # a memory that is no goal was stored, meaning nothing.
    goal = memorize("Ship rate limiting", "Goal: rate limit the public API.", "-m", "goal")
    other = memorize("Cut API costs", "Goal: halve the cost per request.", "-m", "goal")
    finding = memorize(
        "Token bucket",
        "Token bucket per key for rate limiting.",
        "--related-to",
        f"{goal}:achieves",
    )
    note = memorize("Rate limiting shipped", "Every key is limited to 100 requests/min now.")
    out = ok("relate", note, goal, "-t", "closes")
    assert isinstance(out, dict) and (out["parent"], out["consolidated"]) == (note, [finding])
    assert ok("get", finding)["state"] == "consolidated"  # type: ignore[index]
    second = run("relate", note, other, "-t", "closes")
    assert second.exit_code == 2 and f"already closes goal {goal}" in second.stderr
    for refused in (
        run("relate", note, finding, "-t", "closes"),
        run(
            "memorize",
            "-t",
            "Closing note",
            "-c",
            "Closes a finding.",
            "--related-to",
            f"{finding}:closes",
        ),
    ):
        assert refused.exit_code == 2, refused.output
        assert f"'closes' links a note to the goal it completes, and {finding} is a code" in (
            refused.stderr
        )


def test_sleep_consolidate_reports_conflicts_and_disagreements(env: Path) -> None:
    def timeout(value: int) -> str:
        return f"The billing service request timeout is {value} seconds."

    user = memorize("Billing timeout", timeout(30), "--source", "user_confirmed")
    guess = memorize("Billing timeout", timeout(33), "--source", "agent_inferred")
    other = memorize("Billing timeout", timeout(45), "--source", "agent_inferred")
    text = run("sleep-consolidate", "--threshold", "0.7", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "would record 2 conflicts" in text.output
    assert f"{user} over {guess} (more trusted)" in text.output
    assert "Disagreements left to you" in text.output  # two agent claims made the same day

    report = ok("sleep-consolidate", "--threshold", "0.7")
    assert isinstance(report, dict)
    assert sorted(
        (c["prevails"], c["outranked"], c["reason"]) for c in report["conflicts"]
    ) == sorted([(user, guess, "more trusted"), (user, other, "more trusted")])
    assert report["disagreements"] == [sorted([guess, other])]
    found = ok("remember", "billing service request timeout")
    assert isinstance(found, dict)
    results = {r["id"]: r for r in found["results"]}
    assert found["results"][0]["id"] == user
    assert results[guess]["outranked_by"] == [user]


@pytest.mark.parametrize("days", ["1000000", "1e9", "1e300"])
def test_sleep_consolidate_refuses_a_window_past_a_century(env: Path, days: str) -> None:
    result = run("sleep-consolidate", "--max-age-days", days)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: max_age_days: must be a positive number of days, at")
    assert "36,500" in result.output and "Traceback" not in result.output


def test_unconsolidate_says_it_kept_a_merged_memory_the_user_edited(env: Path) -> None:
    # It deleted the merged memory, and the fact the user had added to it, without a word.
    ids = [memorize("Deploy pipeline", text) for text in TWINS]
    merged = ok("sleep-consolidate", "--threshold", "0.9", "--min-size", "4")
    parent = merged["consolidations"][0]["parent"]["id"]  # type: ignore[index]
    mine = "Deploys go blue green with a smoke test. Also: the switch needs two approvals."
    ok("update", parent, "-c", mine)
    undone = run("unconsolidate", parent)
    assert undone.exit_code == 0, undone.output
    assert f"kept the merged memory {parent} as an ordinary memory" in undone.output
    assert ok("get", parent)["content"] == mine  # type: ignore[index]
    recent = {m["id"]: m["state"] for m in ok("recent")}  # type: ignore[attr-defined]
    assert recent == dict.fromkeys([*ids, parent], "working")


def test_update_of_a_member_says_its_merged_memory_was_left_as_the_user_wrote_it(
    env: Path,
) -> None:
    # It printed the member alone: the merged memory, edited by the user, still said the old
    # wording and ranked above the correction, unsaid.
    ids = [memorize("Deploy pipeline", text) for text in TWINS]
    merged = ok("sleep-consolidate", "--threshold", "0.9", "--min-size", "4")
    parent = merged["consolidations"][0]["parent"]["id"]  # type: ignore[index]
    fixed = "Deploys run through the canary pipeline with a smoke test before the switch."
    rewritten = ok("update", ids[0], "-c", fixed)
    assert (rewritten["merged_rewritten"], rewritten["merged_kept"]) == ([parent], [])  # type: ignore[index]
    ok("update", parent, "-c", "Deploys go blue green. Also: the switch needs two approvals.")
    said = run("update", ids[1], "-c", fixed)
    assert said.exit_code == 0, said.output
    assert said.output.endswith(
        "Left as you wrote them (merged memories you edited since the merge; they may still say "
        f"what this memory said before): {parent}\n"
    )
    plain = run("update", ids[1], "-i", "0.9")  # no new words: nothing to say
    assert plain.exit_code == 0 and "merged" not in plain.output, plain.output


def test_sleep_consolidate_counts_the_memories_it_keeps_from_merging_again(env: Path) -> None:
    # After an unconsolidate the dry run said "0 recent working memories" (there were 4), and
    # the JSON gave the merged memory's importance as 0.7699999809265137 (`get`: 0.77).
    for text in TWINS:
        memorize("Deploy pipeline", text, "-i", "0.7")
    merged = ok("sleep-consolidate", "--threshold", "0.9", "--min-size", "4")
    parent = merged["consolidations"][0]["parent"]  # type: ignore[index]
    assert parent["importance"] == ok("get", parent["id"])["importance"] == 0.77  # type: ignore[index]
    ok("unconsolidate", parent["id"])
    planned = run("sleep-consolidate", "--threshold", "0.9", "--min-size", "4", "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert planned.output.startswith(
        "4 recent working memories in scope github.com/acme/api (4 of them not merged again: "
        "undone by `unconsolidate`"
    )
    assert "would merge 0 clusters" in planned.output
