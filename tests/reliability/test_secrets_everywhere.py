"""Every text octobrain stores for later sessions is screened for credentials with one policy:
tags, related files, link descriptions, imported rows and knowledge notes, not just title and
content; and an AWS secret access key is recognised by its name."""

from __future__ import annotations

import io
import itertools
import json
import re
import shutil
from pathlib import Path

import pytest

from octobrain.config import Config, MemoryConfig
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.knowledge import Knowledge
from octobrain.memory.brain import Brain
from octobrain.memory.export import export_jsonl
from octobrain.memory.transfer import import_jsonl
from octobrain.secrets import find_secrets
from tests.reliability.test_storage_faults import memorize, octobrain, one_clear_line
from tests.server_support import outside_env

AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_" + "a1B2c3D4e5" * 4
SCOPE = "github.com/acme/api"


def _brain(db: Path, secrets: str = "refuse") -> Brain:
    config = Config(memory=MemoryConfig(secrets=secrets))
    return Brain(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=db)


@pytest.mark.parametrize(
    "line",
    [
        f"aws_secret_access_key = {AWS_SECRET}",
        f'export AWS_SECRET_ACCESS_KEY="{AWS_SECRET}"',
        f'{{"aws_secret_access_key": "{AWS_SECRET}"}}',
    ],
)
def test_an_aws_secret_access_key_is_found_by_its_name(line: str) -> None:
    [found] = find_secrets(line)
    assert found.kind == "AWS secret access key"
    assert line[found.start : found.end] == AWS_SECRET  # only the value is redacted


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("key sk-" + "a" * 24 + " here", ["sk-" + "a" * 24]),
        ("sk-proj-" + "b" * 30 + "-tail", ["sk-proj-" + "b" * 30]),  # a short last part stays
        ("sk-proj-" + "c_" * 12, ["sk-proj-" + "c_" * 12]),
        ("task-" + "d" * 25 + " x_sk-" + "e" * 25, []),  # no word boundary before sk-
        ("x_y-sk-" + "f" * 21, ["sk-" + "f" * 21]),
        ("sk-" * 3 + "g" * 19, []),
    ],
)
def test_an_sk_key_is_found_in_every_shape_the_pattern_names(text: str, keys: list[str]) -> None:
    found = [text[f.start : f.end] for f in find_secrets(text) if f.kind == "API key"]
    assert found == keys


@pytest.mark.parametrize(
    ("unit", "found"),
    [
        ("sk-", 0),
        ("a.", 0),
        ("glpat-", 1),
        ("xoxb-", 1),
        ("sk-a-", 0),
        ("eyJabcdefghi.", 1_048_576 // 13 // 3),  # a token of each three
        ("token", 0),
        ("password=a1", 1),
    ],
)
def test_screening_a_megabyte_of_a_repeated_key_prefix_reads_it_once(unit: str, found: int) -> None:
    # "sk-sk-sk-…" took 3.2 s at 32 kB, and "a.a.a.…" scanned its whole run for a URL scheme
    # at every word start: quadratic, with the GIL held, under the MCP pool's lock (an ingest
    # of 100 such turns held every other client up for 35 s, twice). A megabyte (an ingest
    # turn) of "eyJa….eyJa….": each of its 26,886 tokens was checked against every one found
    # before (12 s).
    text = unit * (1_048_576 // len(unit))
    findings = find_secrets(text)
    assert len(findings) == found
    assert all(a.end <= b.start for a, b in itertools.pairwise(findings))  # in order, apart


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"


@pytest.mark.parametrize("lead", ["eyJ-", "eyJabcdefgh-"])
def test_a_megabyte_of_token_starts_is_screened_and_the_token_after_it_found(lead: str) -> None:
    # A JSON web token was looked for from each `eyJ` of a run and read on to the run's end:
    # 64 kB of "eyJ-" took 0.8 s, a megabyte (an ingest's turn) minutes, with the GIL held.
    # A token that starts inside a run (after its `-`) is still one.
    text = lead * (1_048_576 // len(lead)) + " " + JWT + " and x-" + JWT
    found = [(f.kind, text[f.start : f.end]) for f in find_secrets(text)]
    assert found == [("JSON web token", JWT)] * 2


def test_every_memory_field_is_screened(tmp_path: Path) -> None:
    b = _brain(tmp_path / "db")
    attempts = {
        "tags[1]": {"tags": ["deploy", GITHUB]},
        "related_files[0]": {"related_files": [f"/tmp/{AWS_ID}.txt"]},
        "related_to[0].description": {},
    }
    target, _ = b.memorize("Deploy target", "Production deploys go through the CI runner.")
    attempts["related_to[0].description"] = {
        "related_to": [{"target_id": target.id, "description": f"key {GITHUB}"}]
    }
    for field, extra in attempts.items():
        with pytest.raises(InvalidInput, match=rf"^{re.escape(field)}: "):
            b.memorize("Deploy notes", "How the deploy works, without keys.", **extra)
    with pytest.raises(InvalidInput, match=r"^tags\[0\]: .*credential"):
        b.update(target.id, add_tags=[GITHUB])
    with pytest.raises(InvalidInput, match=r"^description: .*credential"):
        other, _ = b.memorize("Second target", "Another memory to link with a description.")
        b.relate(other.id, target.id, description=f"uses {AWS_ID}")
    assert b.store.count() == 2
    redacting = _brain(tmp_path / "db", "redact")
    m, _ = redacting.memorize("Tagged", "A memory with a tag.", tags=["ok", GITHUB])
    assert GITHUB not in json.dumps(m.tags) and "[REDACTED:GitHub token]" in m.tags


def test_import_rows_and_knowledge_notes_are_screened(tmp_path: Path) -> None:
    allowing = _brain(tmp_path / "leaky", "allow")
    allowing.memorize("AWS setup", f"aws_secret_access_key = {AWS_SECRET}", tags=[GITHUB])
    dump = io.StringIO()
    export_jsonl(allowing, dump)
    lines = dump.getvalue().splitlines(keepends=True)
    with pytest.raises(InvalidInput, match=r"^line 2\.content: .*AWS secret access key"):
        import_jsonl(_brain(tmp_path / "strict"), lines)
    assert _brain(tmp_path / "strict").store.count() == 0  # nothing written
    redacting = _brain(tmp_path / "redacted", "redact")
    import_jsonl(redacting, lines)
    [row] = redacting.store.scan("true")
    assert AWS_SECRET not in row["content"] and GITHUB not in row["tags"]

    notes = Knowledge(
        SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "k", session_id="s"
    )
    with pytest.raises(InvalidInput, match=r"^content: .*GitHub token"):
        notes.store("deploy", f"The deploy token is {GITHUB}.")
    with pytest.raises(InvalidInput, match=r"^source: no stored note"):
        notes.read("stored://deploy")


def test_a_refused_write_is_the_only_line_even_when_a_sleep_pass_is_due(tmp_path: Path) -> None:
    keep = outside_env()
    data = tmp_path / "data"
    env = {**keep, "OCTOBRAIN_DATA_DIR": str(data), "OCTOBRAIN_EMBEDDING_MODEL": "hash:64"}
    memorize(env, "Primary database", "Postgres 16 is the primary database.")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "bogus"}\n')
    for args in (("memorize", "-t", "Deploy key", "-c", f"The key is {AWS_ID}."),
                 ("import", str(bad))):  # fmt: skip
        shutil.rmtree(data / "sleep", ignore_errors=True)  # a sleep pass is due again
        done = octobrain(env, *args)
        assert done.returncode == 2, done.stderr
        assert [line for line in done.stderr.splitlines() if not line.startswith("checking")] == [
            one_clear_line(done.stderr)
        ], done.stderr
