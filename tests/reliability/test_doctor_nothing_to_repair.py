"""Every `doctor` repair says what it did, nothing included, as `--drop-dangling-edges` says
"0 dangling edge(s) deleted": on an absent store (left unmade) and on a sound one."""

from __future__ import annotations

from pathlib import Path

from tests.reliability.damage_support import run_cli

# What each repair says when it finds nothing to do.
NOTHING = {
    "--forget-damaged": "0 damaged memory(ies) and 0 damaged record(s) "
    "(consolidations, forgotten_turns) deleted\n",
    "--abandon-imports": "imports: 0 cut-short import(s) abandoned\n",
    "--rewrite-manifest": "manifest: not damaged, not written again\n",
    "--drop-dangling-edges": "relationships: 0 dangling edge(s) deleted\n",
    "--drop-self-links": "relationships: 0 self-link(s) deleted\n",
    "--drop-orphan-chunks": "knowledge_chunks: 0 orphan chunk(s) deleted\n",
}


def test_each_repair_with_nothing_to_do_says_so(env: dict[str, str]) -> None:
    # `--forget-damaged`, `--abandon-imports` and `--rewrite-manifest` printed nothing at all:
    # a script (or a person) could not tell "nothing to do" from "did not run".
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    for flag, said in NOTHING.items():
        rc, out, err = run_cli(env, "doctor", flag)
        assert (rc, err) == (0, said), (flag, out, err)
    assert not store.exists()  # (absent: nothing made)
    rc, _, err = run_cli(env, "memory", "--scope", "github.com/acme/api", "memorize",
                         "-t", "Primary database", "-c", "Postgres 16 is the primary.")  # fmt: skip
    assert rc == 0, err
    for flag, said in NOTHING.items():
        rc, out, err = run_cli(env, "doctor", flag)
        assert (rc, err) == (0, said) and "ok: nothing is wrong" in out, (flag, out, err)
