"""Security: scope isolation through every tool and facade call, HTTP refusals, SSRF, path rules,
bounded regex, and credentials kept out of memories."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from octobrain.config import Config, MemoryConfig
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.knowledge import Knowledge
from octobrain.knowledge.fetch import FetchError, resolve_checked
from octobrain.memory.brain import Brain
from octobrain.secrets import find_secrets
from tests.consolidation_support import twins
from tests.server_support import (
    PROJECT_A,
    PROJECT_B,
    call,
    free_port,
    hash_pool,
    http_server,
    run,
    server_for,
)

TOKEN = "reliability-token-0123456789"


def brain(db: Path, scope: str, **memory: Any) -> Brain:
    cfg = Config(memory=MemoryConfig(**memory)) if memory else Config()
    return Brain(scope, config=cfg, embedder=get_embedder("hash:64"), uri=db)


# ---- scope isolation ------------------------------------------------------------------------


def test_a_locked_session_cannot_reach_another_project_through_any_tool(tmp_path: Path) -> None:
    db = tmp_path / "db"
    pool = hash_pool(db)
    b = brain(db, PROJECT_B)
    secret, _ = b.memorize("Project B payroll", "Payroll runs zqpayroll on the 25th.")
    goal, _ = b.memorize("Project B goal", "Finish the zqpayroll migration.", memory_type="goal")
    knowledge_b = Knowledge(
        PROJECT_B, config=Config(), embedder=get_embedder("hash:64"), uri=db, session_id="sb"
    )
    knowledge_b.store("bnote", "Project B note: zqpayroll credentials rotate monthly.")
    doc = tmp_path / "b-runbook.md"
    doc.write_text("# Runbook\n\nThe zqpayroll export runs hourly and rotate monthly.\n")
    knowledge_b.index(str(doc))
    doc.unlink()  # A cannot simply index it itself
    server = server_for(pool, tmp_path, PROJECT_A)
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("remember", {"query": "zqpayroll", "min_relevance": 0}),
        ("remember", {"query": ["zqpayroll", "payroll 25th"], "tags": [], "min_relevance": 0}),
        ("remember", {"query": "zqpayroll", "scope": PROJECT_B}),
        ("forget", {"memory_id": secret.id, "confirm": True}),
        ("forget", {"query": "zqpayroll", "confirm": True}),
        ("forget", {"memory_id": secret.id, "confirm": True, "scope": PROJECT_B}),
        ("memorize", {"title": "Link attempt", "content": "Linking to B's row.",
                      "related_to": [{"target_id": secret.id}]}),
        ("memorize", {"title": "Close attempt", "content": "Closing B's goal now.",
                      "related_to": [{"target_id": goal.id, "relationship_type": "closes"}]}),
        ("memorize", {"title": "Write attempt", "content": "Writing into B.", "scope": PROJECT_B}),
        ("knowledge", {"command": "read", "source": "stored://bnote"}),
        ("knowledge", {"command": "search", "query": "zqpayroll credentials"}),
        ("knowledge", {"command": "match", "pattern": "zqpayroll"}),
        ("knowledge", {"command": "delete", "key": "bnote"}),
        ("knowledge", {"command": "search", "query": "zqpayroll export", "source": str(doc)}),
        ("knowledge", {"command": "match", "pattern": "hourly", "source": str(doc)}),
    ]  # fmt: skip
    replies = []

    async def body() -> None:
        async with Client(server) as client:
            for tool, arguments in attempts:
                replies.append((tool, arguments, *await call(client, tool, **arguments)))

    run(body)
    for tool, arguments, _error, reply in replies:
        for leak in ("25th", "Project B payroll", "Project B goal", "rotate monthly", "hourly"):
            assert leak not in reply, (tool, arguments, reply)
    # B's rows, goal and note are untouched.
    fresh = brain(db, PROJECT_B)
    assert fresh.get(secret.id).state.value == "working"
    assert fresh.get(goal.id).state.value == "working"
    assert fresh.store.relationships_of([secret.id, goal.id]) == []
    assert "rotate monthly" in knowledge_b.read("stored://bnote").text
    assert brain(db, PROJECT_A).store.count(f"scope = '{PROJECT_B}'") == 2


def test_facade_calls_from_a_project_never_touch_another(tmp_path: Path) -> None:
    db = tmp_path / "db"
    a, b = brain(db, PROJECT_A), brain(db, PROJECT_B)
    members = twins(b)
    theirs, _ = b.memorize("B decision", "B chose the zqother queue.")
    parent = b.sleep_consolidate().consolidations[0].parent.id
    mine, _ = a.memorize("A decision", "A chose the zqmine queue.")
    calls = [
        lambda: a.get(theirs.id),
        lambda: a.update(theirs.id, content="Overwritten from project A."),
        lambda: a.relate(mine.id, theirs.id),
        lambda: a.relate(theirs.id, mine.id),
        lambda: a.forget([theirs.id], confirm=True),
        lambda: a.forget([mine.id, theirs.id], confirm=True),
        lambda: a.graph(theirs.id),
        lambda: a.consolidate_goal(theirs.id),
        lambda: a.unconsolidate(parent),
    ]
    for i, attempt in enumerate(calls):
        with pytest.raises(
            InvalidInput, match=r"(memory_id|source_id|target_id|goal_id|parent_id)"
        ):
            attempt()
        assert b.get(theirs.id).content == "B chose the zqother queue.", i
    assert a.get(mine.id)  # the mixed forget deleted nothing at all
    a.sleep_consolidate()
    assert {b.get(m).state.value for m in members} == {"consolidated"}
    assert all(
        h.memory.scope != PROJECT_B for h in a.remember("zqother queue", min_relevance=0).hits
    )


# ---- HTTP -----------------------------------------------------------------------------------


def test_http_token_origin_and_body_cap_on_every_route(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    good = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    with (
        http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path, OCTOBRAIN_TOKEN=TOKEN),
        httpx.Client(base_url=base, timeout=30) as http,
    ):
        for method in ("GET", "POST", "DELETE", "PUT"):
            for path in ("/mcp", "/", "/mcp/", "/other"):
                for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                                 {"Authorization": f"Basic {TOKEN}"}):  # fmt: skip
                    r = http.request(method, path, headers=auth, json=listing)
                    assert r.status_code == 401, (method, path, auth, r.status_code)
        evil = http.post("/mcp", json=listing, headers={**good, "Origin": "http://evil.test"})
        assert evil.status_code == 403
        huge = b'{"pad": "' + b"x" * (2 << 20) + b'"}'
        declared = http.post("/mcp", content=huge, headers=good)
        assert declared.status_code == 413

        def chunks() -> Any:
            for _ in range(40):
                yield b"x" * 65536

        streamed = http.post("/mcp", content=chunks(), headers=good)
        assert streamed.status_code == 413
        ok = http.post("/mcp", json=listing, headers=good)
        assert ok.status_code != 413 and ok.status_code < 500, ok.text


# ---- knowledge --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answers",
    [["10.0.0.7"], ["93.184.216.34", "127.0.0.1"], ["::1"], ["169.254.169.254"],
     ["::ffff:192.168.1.1"], ["fd00::1"]],
)  # fmt: skip
def test_dns_names_resolving_to_private_addresses_are_refused(
    monkeypatch: pytest.MonkeyPatch, answers: list[str]
) -> None:
    def fake(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers
        ]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    with pytest.raises(FetchError, match=r"^source: refusing docs\.example\.com"):
        resolve_checked("docs.example.com", 443, ())


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "127.1", "0177.0.0.1", "[::]"])
def test_odd_spellings_of_loopback_are_refused(host: str) -> None:
    with pytest.raises(FetchError, match=r"^source: "):
        resolve_checked(host.strip("[]"), 80, ())


def test_path_rules_refuse_directories_symlinks_to_them_devices_and_big_files(
    tmp_path: Path,
) -> None:
    k = Knowledge(PROJECT_A, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "db")
    (tmp_path / "docs").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "docs")
    big = tmp_path / "big.txt"
    big.write_bytes(b"a " * (k.config.knowledge.max_source_bytes // 2 + 1))
    for source, rule in [
        (str(tmp_path / "docs"), "is a directory"),
        (str(tmp_path / "link"), "is a directory"),
        (f"file://{tmp_path / 'link'}", "is a directory"),
        ("/dev/zero", "not a regular file"),
        (str(big), "cap"),
        ("ftp://example.com/x.txt", "unsupported scheme"),
    ]:
        with pytest.raises(InvalidInput, match=rf"^source: .*{rule}"):
            k.index(source)


def test_regex_is_bounded_in_size_and_output(tmp_path: Path) -> None:
    k = Knowledge(
        PROJECT_A,
        config=Config(),
        embedder=get_embedder("hash:64"),
        uri=tmp_path / "db",
        session_id="s1",
    )
    log = tmp_path / "log.txt"  # over the note cap: a document, indexed from a file
    log.write_text(
        "\n".join(f"line {i} aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!" for i in range(3000))
    )
    k.index(str(log))
    with pytest.raises(InvalidInput, match=r"^pattern: "):
        k.match("(a{1000}){1000}")
    capped = k.match("(a*)*$", max_matches=5)
    assert len(capped.hits) == 5 and capped.truncated


# ---- secrets ----------------------------------------------------------------------------------

CREDENTIALS = {
    "API key": "sk-proj-4f9b2c7d1e8a6b3c5d7e9f0a1b2c3d4e",
    "AWS access key id": "AKIAIOSFODNN7EXAMPLE",
    "GitHub token": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIV",
    "password in a URL": "postgres://admin:hunter2@db.internal:5432/app",
    "Slack token": "xoxb-1234567890-abcdefghij",
    "webhook URL": "https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/abcdefghijkl",
    "named password or token": "DB_PASSWORD=S3cr3tP@ssw0rd99",
}


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
def test_memorize_refuses_credentials_by_default_and_says_why(tmp_path: Path, kind: str) -> None:
    b = brain(tmp_path / "db", PROJECT_A)
    secret = CREDENTIALS[kind]
    with pytest.raises(
        InvalidInput, match=rf"^content: looks like it contains a credential \({kind}\)"
    ) as exc:
        b.memorize("Deploy credentials", f"Use this to deploy: {secret} (from the vault).")
    assert secret not in str(exc.value)
    with pytest.raises(InvalidInput, match=r"^title: .*credential"):
        b.memorize(f"Key {secret}", "The deploy key used by CI.")
    ok, _ = b.memorize("Where the key lives", "The deploy key is the CI secret DEPLOY_KEY.")
    with pytest.raises(InvalidInput, match=r"^content: .*credential"):
        b.update(ok.id, content=f"Actually it is {secret} now.")
    assert b.store.count() == 1 and b.get(ok.id).content.startswith("The deploy key")


def test_redact_and_allow_policies(tmp_path: Path) -> None:
    secret = CREDENTIALS["AWS access key id"]
    redacting = brain(tmp_path / "db", PROJECT_A, secrets="redact")
    m, _ = redacting.memorize("AWS setup", f"The CI user has key {secret} for uploads.")
    assert secret not in m.content and "[REDACTED:AWS access key id]" in m.content
    assert secret not in redacting.get(m.id).content
    allowing = brain(tmp_path / "db", PROJECT_A, secrets="allow")
    m, _ = allowing.memorize("AWS setup", f"The CI user has key {secret} for uploads.")
    assert secret in allowing.get(m.id).content


def test_secrets_policy_is_a_checked_config_key(tmp_path: Path) -> None:
    from octobrain.config import load_config

    path = tmp_path / "config.toml"
    path.write_text('[memory]\nsecrets = "ignore"\n')
    with pytest.raises(InvalidInput, match=r"config\.toml: memory\.secrets: must be one of"):
        load_config(path)


@pytest.mark.parametrize(
    "text",
    ["Use git@github.com:acme/api.git for pushes.", "The task-runner skips flaky tests.",
     "Release v1.2.3 shipped; see https://github.com/acme/api/pull/42.", "uuid 0b6f1c1e-..."
     " and the sk- prefix is OpenAI's key format", "AKIA is the prefix of AWS key ids.",
     "Read it with password=os.environ['DB_PASSWORD2'] at start.", "token=get_token(2024)",
     "Set max_tokens=4096 for the summariser.", "password: see the vault entry db-prod",
     "DB_PASSWORD=$STAGING_PW2 in CI", "'password' + 'a' * 50_000"],
)  # fmt: skip
def test_ordinary_text_is_not_a_credential(text: str) -> None:
    assert find_secrets(text) == []
