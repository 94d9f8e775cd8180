"""`octobrain knowledge …` through click's runner: every command, JSON output, errors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main

from .conftest import HTML_PAGE, Server, write_pdf

DOC = (
    "# Ops\n\n## Backups\n\nBackups run nightly to cold storage.\n\n"
    "## Paging\n\nThe on-call rota changes on Mondays.\n"
)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.md").write_text(DOC)
    return tmp_path


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(
        main, ["knowledge", "--scope", "github.com/acme/ops", *args], input=input
    )


def test_index_search_match_read_list_stats_delete(workdir: Path) -> None:
    out = run("index", "ops.md")
    assert out.exit_code == 0 and "✓ Indexed" in out.output and "2 chunks created" in out.output
    assert "✓ Cached" in run("index", "ops.md").output
    found = run("search", "nightly backups cold storage")
    assert "Ops > Backups" in found.output and "Relevance:" in found.output
    data = json.loads(run("search", "on-call rota Mondays", "--format", "json").output)
    assert data["hits"][0]["section_path"] == ["Ops", "Paging"]
    assert "     9: The on-call rota changes on Mondays." in run("match", "rota").output
    assert "Type: markdown" in run("read", "ops.md").output
    listing = json.loads(run("list", "--format", "json").output)
    assert [s["uri"] for s in listing] == [(workdir / "ops.md").resolve().as_uri()]
    assert "Sources: 1" in run("stats").output
    assert "Scope: github.com/acme/ops (plus global)" in run("stats").output
    whole = CliRunner().invoke(main, ["knowledge", "--global", "stats"]).output
    assert "Scope: (global)\n" in whole  # before: "(global) (plus global)"
    # An empty answer says what left the chunks out: the threshold, or nothing indexed (before,
    # both blamed the threshold).
    strict = run("search", "nightly backups", "--min-relevance", "1").output
    assert "nothing passed the relevance threshold" in strict, strict
    assert "Deleted" in run("delete-source", "ops.md").output
    gone = run("search", "nightly backups")
    assert "No knowledge found: nothing is indexed in" in gone.output, gone.output
    assert json.loads(run("search", "backups", "--format", "json").output)["empty"] == (
        "nothing_indexed"
    )


def test_read_prints_the_whole_text_or_a_page_of_it(workdir: Path) -> None:
    whole = run("read", "ops.md")
    assert whole.exit_code == 0 and whole.output.endswith("The on-call rota changes on Mondays.\n")
    paged = run("read", "ops.md", "--from-line", "5", "--max-bytes", "40")
    assert paged.exit_code == 0, paged.output
    assert "\nBackups run nightly to cold storage.\n\n=" in paged.output
    # The next page named as this command takes it (it said `from_line 7`, the MCP tool's
    # argument, and `--from_line 7` is no option).
    assert paged.output.endswith("Lines 5–6 of 9 (37 of 104 bytes). Next page: --from-line 7.\n")
    cut = run("read", "ops.md", "--from-line", "5", "--max-bytes", "10")  # a line longer
    assert cut.output.endswith("Next page: --from-line 5 --from-byte 10.\n"), cut.output
    data = json.loads(run("read", "ops.md", "--from-line", "7", "--format", "json").output)
    assert data["text"] == "## Paging\n\nThe on-call rota changes on Mondays."
    assert (data["first_line"], data["last_line"], data["next_line"]) == (7, 9, None)
    past = run("read", "ops.md", "--from-line", "10")
    assert past.exit_code == 2 and past.output == (
        "error: from_line: is past the end: the text has 9 lines\n"
    )


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        (("--session-id", "s" * 120_000), "session_id: must be 0–256 bytes"),
        (("--session-id", "evil\x1b[31m\nline"), "session_id: must not contain control"),
        (("--session-id", "caf\udcff"), "session_id: must be valid Unicode"),
        # (a session named by nothing that shows; " " was taken as no session, a store refused)
        (("--session-id", "\u0301"), "session_id: must hold visible text, not only spaces or"),
        (("--session-id", " "), "session_id: must hold visible text, not only spaces or"),
    ],
)
def test_a_session_id_from_the_cli_is_checked_as_one_from_a_client(
    workdir: Path, args: tuple[str, str], rule: str
) -> None:
    # Before: each was written into every row of the note (120 kB; ESC and a line break; a
    # traceback for the byte that is not UTF-8).
    for command in (("store", "todo", "Rotate the signing keys."), ("search", "keys")):
        refused = run(*command, *args)
        assert refused.exit_code == 2 and refused.output.startswith(f"error: {rule}"), (
            refused.output
        )
    bad = run("store", "todo", "caf\udcff keys")
    assert bad.exit_code == 2 and "content: must be valid Unicode" in bad.output, bad.output
    empty = run("store", "todo", "\x00\x00")  # before: an empty note of 0 chunks
    assert empty.exit_code == 2 and "content: must not be empty" in empty.output, empty.output


def test_an_error_quoting_a_hostile_path_is_one_line_a_terminal_does_not_act_on(
    workdir: Path,
) -> None:
    # Before: the CR, BEL and line break of the name went to stderr as they were.
    done = run("read", "/tmp/a\rEVIL\x07\nsecond line\x1b]0;title\x07")
    assert done.exit_code == 2, done.output
    assert (
        done.output.startswith("error: source: no such file: /tmp/a")
        and done.output.count("\n") == 1
    )
    assert not any(c in done.output for c in "\r\x07\x1b")


def test_notes_share_the_cli_session_by_default(workdir: Path) -> None:
    stored = run("store", "todo", "-", input="Rotate the signing keys before the audit.\n")
    assert stored.exit_code == 0 and "stored://todo" in stored.output
    assert "[SESSION]" in run("search", "rotate signing keys audit").output
    assert (
        "No knowledge found: nothing is indexed"
        in run("search", "rotate signing keys", "--session-id", "other").output
    )
    assert run("delete", "todo").output.strip() == "Deleted stored knowledge 'todo'"


def test_bad_input_is_one_line_and_exit_2(workdir: Path) -> None:
    for args, message in [
        (("index", str(workdir)), "error: source: "),
        (("match", "("), "error: pattern: invalid regular expression: unclosed group"),
        (("match", "a{9999}{9999}"), "error: pattern: invalid regular expression: Compiled"),
        (("delete", "missing"), 'error: key: no stored note "missing"'),
        (("store", "\u0301", "Rotate the keys."), "error: key: must hold a visible character"),
        (("search", "x"), "error: query: "),
        # An empty --source meant some source: it was taken for every one.
        (("search", "rollback steps", "--source", ""), "error: --source: must name a file or"),
        (("match", "rollback", "--source", " "), "error: --source: must name a file or an"),
        (("match", "rollback", "--source", "gone.md"), "error: --source: no such file: "),
    ]:
        result = run(*args)
        assert result.exit_code == 2, args
        assert result.output.startswith(message) and result.output.count("\n") == 1, result.output


def test_large_document_shows_progress_on_stderr(workdir: Path) -> None:
    # (not a page number in each line: the line at a page's edge would be a running header)
    line = "Line {} of the manual talks about turbine maintenance."
    pages = [[line.format(40 * p + i) for i in range(40)] for p in range(30)]
    write_pdf(workdir / "manual.pdf", pages)
    result = CliRunner().invoke(
        main, ["knowledge", "--global", "index", "manual.pdf", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert "embedding chunks" in result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "indexed" and report["embedded"] > 64
    assert report["source"]["scope"] == ""


def test_match_context_separates_groups_like_grep(workdir: Path) -> None:
    assert run("index", "ops.md").exit_code == 0
    apart = run("match", "Backups run|rota", "-C", "1").output
    assert "     5: Backups run nightly" in apart and "     9: The on-call rota" in apart
    lines = apart.splitlines()
    assert lines[lines.index("     6- ") + 1] == "--", apart  # 4–6, then 8–10: not adjacent
    overlapping = run("match", "Ops|Backups", "-C", "1").output
    numbers = [line[:6].strip() for line in overlapping.splitlines() if line[6:7] in (":", "-")]
    assert numbers == ["1", "2", "3", "4", "5", "6"], overlapping  # each line once, no "--"
    assert "     3: ## Backups" in overlapping and "--" not in overlapping.splitlines()


def test_a_file_name_or_key_that_is_not_utf8_is_one_line(workdir: Path) -> None:
    # As the shell passes them under a UTF-8 locale: the bytes as lone surrogates.
    name = os.fsdecode(b"caf\xe9.txt")
    with open(os.fsencode(workdir) + b"/caf\xe9.txt", "wb") as handle:  # the file exists
        handle.write(b"Backups run at two.\n")
    for args, field in [
        (("index", name), "source"),
        (("read", name), "source"),
        (("match", "x", "--source", name), "--source"),
        (("store", os.fsdecode(b"k\xff"), "-"), "key"),
    ]:
        result = run(*args, input="A note about the backups.\n")
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"error: {field}: must be valid Unicode")
        assert result.output.count("\n") == 1


def test_index_takes_several_sources_and_goes_on_past_one_that_fails(workdir: Path) -> None:
    # Before, a folder's documents were one command each: `index docs/*.md` was refused
    # ("got unexpected extra argument"), and a folder said only "give one file".
    (workdir / "docs").mkdir()
    (workdir / "docs" / "b.md").write_text("# Paging\n\nThe rota changes on Mondays.\n")
    out = run("index", "ops.md", "missing.md", "docs/b.md")
    assert out.exit_code == 2, out.output
    # A failed command leaves stdout empty: what was indexed is said on stderr, with the
    # error (before, on stdout, then the error).
    assert out.stdout == "", out.stdout
    assert out.stderr.count("✓ Indexed") == 2, out.stderr
    assert "error: source: no such file" in out.stderr
    assert out.stderr.splitlines()[-1].startswith("error: source: 1 of 3 sources not indexed")
    failed_json = run("index", "ops.md", "missing.md", "--format", "json")
    assert failed_json.exit_code == 2 and failed_json.stdout == "", failed_json.stdout
    data = json.loads(run("index", "ops.md", "docs/b.md", "--format", "json").stdout)
    assert [r["status"] for r in data] == ["unchanged", "unchanged"]
    folder = run("index", "docs")
    assert folder.exit_code == 2
    assert "docs is a directory; name its files (octobrain knowledge index docs/*.md)" in (
        folder.output
    )


def test_a_folder_named_by_uri_among_sources_is_refused_before_any_is_indexed(
    workdir: Path,
) -> None:
    # Before: only a plain path was looked at first; `index ops.md file:///…/docs` indexed
    # ops.md, then refused the folder ("1 of 2 sources not indexed"), exit 2.
    (workdir / "docs").mkdir()
    folder = (workdir / "docs").as_uri()
    refused = run("index", "ops.md", folder)
    assert refused.exit_code == 2, refused.output
    said = f"error: source: {folder} is a directory; give one file (index each file separately)"
    assert said in refused.output, refused.output
    assert "Sources: 0" in run("stats").output  # nothing of ops.md was embedded


def test_a_refused_local_server_says_where_to_allow_it(
    workdir: Path, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: "add it to knowledge.allow_private_hosts", with no word of where that is set.
    server.routes["/guide.html"] = (200, {"Content-Type": "text/html"}, HTML_PAGE)
    refused = run("index", server.url("/guide.html"))
    assert refused.exit_code == 2
    told = re.search(
        r"(OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS)=(\S+) in the environment", refused.output
    )
    assert told is not None and "`octobrain config path`" in refused.output, refused.output
    monkeypatch.setenv(told[1], told[2])  # doing as it says indexes the page
    assert "✓ Indexed" in run("index", server.url("/guide.html")).output


def test_ctrl_c_in_index_of_several_sources_says_which_were_indexed(workdir: Path) -> None:
    # Before: "Aborted!" alone, exit 1: which of the sources were indexed, and whether the one
    # cut kept half of itself, was for the user to find out.
    for name in ("a", "b", "d"):
        (workdir / f"{name}.md").write_text(
            f"# {name}\n\nThe {name} service listens on 84{ord(name)}.\n"
        )
    (workdir / "c.md").write_text(
        "".join(f"## Part {i}\n\n{'cache deploy queue ' * 40}\n\n" for i in range(3000))
    )
    args = ["knowledge", "--scope", "github.com/acme/ops", "index", "a.md", "b.md", "c.md", "d.md"]
    with subprocess.Popen(
        [sys.executable, "-m", "octobrain", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as proc:  # fmt: skip
        assert proc.stderr is not None and proc.stdout is not None
        said = b""
        while b"of c.md" not in said:  # its progress label: c.md under way
            line = proc.stderr.readline()
            assert line, said
            said += line
        proc.send_signal(signal.SIGSTOP)  # (held there while the Ctrl-C is sent)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGCONT)
        said += proc.stderr.read()
        assert proc.wait(60) == 1
    lines = [line for line in said.decode().splitlines() if line]
    assert lines[-4:] == [
        "interrupted: c.md not indexed (nothing of it kept: an earlier index of it, if any, "
        "stands)",
        "indexed: a.md, b.md",
        "not reached: d.md",
        "Aborted!",
    ], lines
    listed = run("list", "--format", "json")
    assert sorted(Path(s["uri"]).name for s in json.loads(listed.output)) == ["a.md", "b.md"]


def test_ctrl_c_after_a_source_is_switched_to_its_new_chunks_says_it_stands(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a Ctrl-C after the commit that makes a source's new chunks its own (while its
    # old ones were dropped, or its report made) said "ops.md not indexed (nothing of it
    # kept …)", though a search found it.
    from octobrain.knowledge.store import KnowledgeStore

    switch = KnowledgeStore._flip

    def switch_then_stop(self: KnowledgeStore, source_row: dict[str, object]) -> None:
        switch(self, source_row)
        raise KeyboardInterrupt  # (right after the commit)

    (workdir / "b.md").write_text("# Paging\n\nThe rota changes on Mondays.\n")
    with monkeypatch.context() as patched:
        patched.setattr(KnowledgeStore, "_flip", switch_then_stop)
        cut = run("index", "ops.md", "b.md")
    assert cut.exit_code == 1 and cut.stdout == "", cut.output
    assert [line for line in cut.stderr.splitlines() if line][-4:] == [
        "interrupted: after ops.md was indexed (it stands)",
        "indexed: ops.md",
        "not reached: b.md",
        "Aborted!",
    ], cut.stderr
    listed = run("list", "--format", "json")
    assert [Path(s["uri"]).name for s in json.loads(listed.stdout)] == ["ops.md"]
