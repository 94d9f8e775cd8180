"""An untrusted MCP client's local files: confined to the session's project and roots, never
octobrain's own (data directory, config, store), whatever links or roots it makes."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from octobrain.server import BrainPool, build_server
from tests.reliability.untrusted_client import (
    OUTSIDE,
    client_roots,
    knowledge_replies,
    pool_for,
    project_with_notes,
)
from tests.server_support import PROJECT_A, call, run, workspace

ESCAPES = [
    {"command": "read", "source": str(OUTSIDE)},
    {"command": "read", "source": "../../../../../../etc/hostname"},
    {"command": "read", "source": "link.md"},
    {"command": "read", "source": OUTSIDE.as_uri()},
    {"command": "read", "source": f"file:{OUTSIDE}"},  # (RFC 8089: one slash, absolute)
    {"command": "search", "query": "root", "source": str(OUTSIDE)},
    {"command": "match", "pattern": "root", "source": "link.md"},
]


def test_mcp_reads_no_local_file_outside_the_project(tmp_path: Path, monkeypatch: Any) -> None:
    project = project_with_notes(tmp_path)
    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project, PROJECT_A))
    inside = {"command": "read", "source": "notes.md"}
    *refused, allowed = knowledge_replies(server, [*ESCAPES, inside])
    for arguments, (error, reply) in zip(ESCAPES, refused, strict=True):
        assert error, (arguments, reply)
        assert "root:" not in reply, (arguments, reply)
        assert reply.startswith("source: ") and "knowledge.allow_paths" in reply, reply
    assert allowed == (False, allowed[1]) and "rotates every quarter" in allowed[1]


@pytest.mark.parametrize("swapped", ["the file", "a directory above it"])
def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    tmp_path: Path, monkeypatch: Any, swapped: str
) -> None:
    # The path is confined first and opened after: a client that can write in the project (a
    # checkout it controls) may put a link in the way in between. The swap runs right after
    # the check here, so the race is won every time.
    import octobrain.knowledge.core as core

    project = project_with_notes(tmp_path)
    (project / "docs").mkdir()
    (project / "docs" / "passwd").write_text("# Passwd\n\nNothing secret in this project.\n")
    checked = core.confine

    def swap_after_check(ref: Any, roots: Any, store: Any) -> Any:
        checked_ref = checked(ref, roots, store)
        if swapped == "the file":
            (project / "docs" / "passwd").unlink()
            (project / "docs" / "passwd").symlink_to(OUTSIDE)
        else:
            (project / "docs").rename(project / "docs.old")
            (project / "docs").symlink_to(OUTSIDE.parent)
        return checked_ref

    monkeypatch.setattr(core, "confine", swap_after_check)
    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project, PROJECT_A))
    [(error, reply)] = knowledge_replies(server, [{"command": "read", "source": "docs/passwd"}])
    assert error and "root:" not in reply, reply
    assert reply == (
        f"source: {project / 'docs' / 'passwd'} changed while it was opened "
        "(a symlink took its place); not read"
    )


def test_allow_paths_opens_a_directory_and_roots_replace_the_cwd(
    tmp_path: Path, monkeypatch: Any
) -> None:
    project = project_with_notes(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "guide.md").write_text("# Guide\n\nShared guide text about onboarding.\n")
    monkeypatch.chdir(project)
    pool = pool_for(tmp_path / "db", allow_paths=(str(shared),))
    server = build_server(pool, workspace(project))
    calls = [
        {"command": "read", "source": str(shared / "guide.md"), "scope": ""},
        {"command": "read", "source": str(OUTSIDE), "scope": ""},
    ]
    (ok, guide), (refused, _) = knowledge_replies(server, calls)
    assert not ok and "onboarding" in guide
    assert refused

    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# X\n\nText in the client's root directory.\n")

    roots = client_roots(other.as_uri())

    server = build_server(pool, workspace(project))
    calls = [
        {"command": "read", "source": str(other / "x.md")},
        {"command": "read", "source": str(project / "notes.md")},
    ]
    (in_root, text), (cwd_refused, reply) = knowledge_replies(
        server, calls, list_roots_callback=roots
    )
    assert not in_root and "client's root" in text
    assert cwd_refused and "knowledge.allow_paths" in reply


def _a_project_and_a_secret_config(tmp_path: Path, monkeypatch: Any) -> tuple[Path, Path]:
    """The project (the cwd) and octobrain's data directory, whose `config.toml` holds a
    token."""
    project = project_with_notes(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text("[mcp]\ntoken = 'a-secret-token-of-the-server'\n")
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(data))
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    monkeypatch.chdir(project)
    return project, data


def test_a_client_root_holding_octobrains_data_dir_reads_nothing_of_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # A client naming a root that holds the data directory (`/srv`, `/tmp`, the directory
    # itself) read its files: `config.toml` there may hold `mcp.token` and storage credentials.
    project, data = _a_project_and_a_secret_config(tmp_path, monkeypatch)
    (data / "notes.txt").write_text("Private notes kept beside the store.\n")

    roots = client_roots(tmp_path.as_uri())

    server = build_server(pool_for(tmp_path / "db"), workspace(project))
    calls = [
        {"command": "read", "source": str(data / "config.toml")},
        {"command": "read", "source": str(data / "notes.txt")},
        {"command": "read", "source": str(project / "notes.md")},
    ]
    (config, said), (notes, _), (ok, text) = knowledge_replies(
        server, calls, list_roots_callback=roots
    )
    assert config and notes and "secret" not in said and "octobrain's own" in said, said
    assert not ok and "deploy key" in text


def _a_store_beside_the_project(
    tmp_path: Path, monkeypatch: Any
) -> tuple[Path, BrainPool, list[Path]]:
    """The project (the cwd) and, beside it, a store kept outside the data directory holding a
    memory: the store's pool and its records (`_octobrain/**.json`)."""
    project = project_with_notes(tmp_path)
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(project)
    pool = pool_for(tmp_path / "store")
    pool.call(PROJECT_A, None, lambda b: b.remember("anything at all"))
    return project, pool, sorted((tmp_path / "store" / "_octobrain").rglob("*.json"))


def test_a_client_root_holding_the_store_reads_nothing_of_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # The store may live outside the data directory (`storage.uri`, a team's under `/srv`): a
    # root holding it read the store's files (its records, of every project's memories).
    project, pool, records = _a_store_beside_the_project(tmp_path, monkeypatch)
    assert records
    server = build_server(pool, workspace(project))
    calls = [{"command": "read", "source": str(record)} for record in records]
    calls.append({"command": "match", "pattern": "scope", "source": str(records[0])})
    replies = knowledge_replies(server, calls, list_roots_callback=client_roots(tmp_path.as_uri()))
    for refused, said in replies:
        assert refused and "octobrain's own" in said and "tables" not in said, said


def test_a_hit_whose_file_is_now_in_the_store_is_not_looked_at(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # A hit's file is looked at (a `stat`) to mark it stale; the store was not left out there:
    # a client that indexed `d/<name of a store record>` and then made `d` a link into the
    # store learned from the mark whether that record exists and changed.
    project, pool, (record, *_) = _a_store_beside_the_project(tmp_path, monkeypatch)
    decoy = project / "d" / record.name
    decoy.parent.mkdir()
    decoy.write_text("# Decoy\n\nA page about lighthouses.\n")
    roots = client_roots(tmp_path.as_uri())
    indexed = {"command": "search", "query": "lighthouses", "source": str(decoy)}
    [(error, _)] = knowledge_replies(
        build_server(pool, workspace(project)), [indexed], list_roots_callback=roots
    )
    assert not error
    shutil.rmtree(decoy.parent)
    decoy.parent.symlink_to(record.parent)
    calls = [
        {"command": "search", "query": "lighthouses"},
        {"command": "match", "pattern": "lighth"},
    ]
    replies = knowledge_replies(
        build_server(pool, workspace(project)), calls, list_roots_callback=roots
    )
    for error, said in replies:
        assert not error and "lighthouses" in said and "Stale" not in said, said


def test_a_hard_link_to_octobrains_config_in_the_project_is_not_read(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # `confine` compares paths: a hard link in the project to the config file (which may hold
    # `mcp.token` and storage credentials) was read as a project file. A hard link to any
    # other file is that file, read as a copy would be (pnpm's node_modules are such links).
    project, data = _a_project_and_a_secret_config(tmp_path, monkeypatch)
    (project / "settings.md").hardlink_to(data / "config.toml")
    elsewhere = Path(tempfile.mkdtemp(dir=tmp_path))
    (elsewhere / "shared.md").write_text("# Shared\n\nA guide kept in a package store.\n")
    (project / "shared.md").hardlink_to(elsewhere / "shared.md")
    server = build_server(pool_for(tmp_path / "db"), workspace(project, PROJECT_A))
    calls = [
        {"command": "read", "source": "settings.md"},
        {"command": "search", "query": "token secret", "source": "settings.md"},
        {"command": "match", "pattern": "token", "source": "settings.md"},
        {"command": "read", "source": "shared.md"},
    ]
    *refused, (error, shared) = knowledge_replies(server, calls)
    for refusal, reply in refused:
        assert refusal and "secret-token" not in reply, reply
        assert reply == (
            f"source: {project / 'settings.md'} is octobrain's config file under another name "
            "(a hard link; it may hold tokens and credentials): an MCP session never reads it"
        )
    assert not error and "package store" in shared, shared


def test_a_client_naming_thousands_of_roots_is_read_from_its_first_64(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # Every file read resolves each root again (and, where roots come with each call, every
    # call checks them all): 15,000 roots made each call of the session cost 1.4 s of CPU.
    from octobrain.server.scoping import MAX_ROOTS

    project = project_with_notes(tmp_path)
    dirs = [tmp_path / "roots" / f"r{i}" for i in range(200)]
    last, first_past = MAX_ROOTS - 2, MAX_ROOTS - 1  # the project is the first root
    for i in (0, last, first_past, 199):
        dirs[i].mkdir(parents=True)
        (dirs[i] / "doc.md").write_text(f"# Doc\n\nRoot {i} of the client.\n")

    roots = client_roots(project.as_uri(), *(d.as_uri() for d in dirs))

    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project))
    calls = [
        {"command": "read", "source": str(dirs[i] / "doc.md")} for i in (0, last, first_past, 199)
    ]
    replies = knowledge_replies(server, calls, list_roots_callback=roots)
    assert [error for error, _ in replies] == [False, False, True, True], replies
    assert f"Root {last} of the client" in replies[1][1]
    refused = f"source: {dirs[first_past] / 'doc.md'} is outside the directories"
    assert replies[2][1].startswith(refused), replies[2][1]


def _a_home_with_a_key(tmp_path: Path, monkeypatch: Any) -> Path:
    """A home directory (`$HOME`) holding a private key, `.ssh/id.md`."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id.md").write_text("# Key\n\nthe private key text\n")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.parametrize("where", ["/", "home", "home/.ssh"])
def test_a_server_started_in_no_project_reads_no_local_file(
    tmp_path: Path, monkeypatch: Any, where: str
) -> None:
    # A desktop client may start its servers in `/` or the home directory: that working
    # directory made every file below it readable by the session, /etc/passwd and ~/.ssh too.
    home = _a_home_with_a_key(tmp_path, monkeypatch)
    cwd = Path("/") if where == "/" else tmp_path / where
    monkeypatch.chdir(cwd)
    server = build_server(pool_for(tmp_path / "db"), workspace(cwd))
    calls = [
        {"command": "read", "source": "/etc/passwd", "scope": ""},
        {"command": "read", "source": str(home / ".ssh" / "id.md"), "scope": ""},
    ]
    (etc, passwd), (ssh, key) = knowledge_replies(server, calls)
    assert etc and "root:" not in passwd, passwd
    assert ssh and "private key" not in key, key
    assert "knowledge.allow_paths" in key, key


def test_a_project_in_a_home_below_a_system_directory_reads_its_files(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # root's home is /root, a system directory: its projects (`/root/app`, a container's) were
    # read from as `/root` itself is not, so `knowledge read README.md` there was refused.
    # (The directory holding tmp_path stands for /root: files cannot be written there.)
    from octobrain.server import scoping

    monkeypatch.setattr(scoping, "_SYSTEM_DIRS", scoping._SYSTEM_DIRS | {tmp_path.parts[1]})
    home = _a_home_with_a_key(tmp_path, monkeypatch)
    project = project_with_notes(home)
    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project))
    calls = [
        {"command": "read", "source": str(project / "notes.md"), "scope": ""},
        {"command": "read", "source": str(home / ".ssh" / "id.md"), "scope": ""},
        {"command": "read", "source": str(OUTSIDE), "scope": ""},
    ]
    (refused, notes), (ssh, key), (etc, passwd) = knowledge_replies(server, calls)
    assert not refused and "deploy key rotates" in notes, notes
    assert ssh and "private key" not in key, key
    assert etc and "root:" not in passwd, passwd
    # The same for a client's roots, and for root's own home as it is.
    monkeypatch.setenv("HOME", "/root")
    assert scoping.readable_root(Path("/root/app"))
    assert not any(map(scoping.readable_root, [Path("/root"), Path("/root/.ssh"), Path("/etc")]))
    monkeypatch.setenv("HOME", "/")  # (a home of `/` makes nothing below it a project's)
    assert not any(map(scoping.readable_root, [Path("/"), Path("/etc"), Path("/root/app")]))


def test_a_server_started_in_a_project_inside_a_system_directory_reads_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # A container's project often sits in /usr/src/app or /var/www/site. The directory a
    # server was started in is its user's choice: a project's when it lies inside a system
    # directory, though a client's root there is not (nor the system directory itself).
    with tempfile.TemporaryDirectory(dir="/var/tmp") as base:
        project = project_with_notes(Path(base))
        monkeypatch.chdir(project)
        server = build_server(pool_for(tmp_path / "db"), workspace(project))
        calls = [
            {"command": "read", "source": str(project / "notes.md"), "scope": ""},
            {"command": "read", "source": "/etc/passwd", "scope": ""},
        ]
        (error, notes), (etc, passwd) = knowledge_replies(server, calls)
        assert not error and "rotates every quarter" in notes, notes
        assert etc and "root:" not in passwd, passwd

        roots = client_roots(project.as_uri())

        server = build_server(pool_for(tmp_path / "db2"), workspace(project))
        [(refused, _)] = knowledge_replies(
            server,
            [{"command": "read", "source": str(project / "notes.md")}],
            list_roots_callback=roots,
        )
        assert refused
    for system in ("/var", "/etc/ssl", "/proc/1"):
        monkeypatch.chdir(system)
        server = build_server(pool_for(tmp_path / "db3"), workspace(Path(system)))
        [(error, reply)] = knowledge_replies(
            server, [{"command": "read", "source": "/etc/passwd", "scope": ""}]
        )
        assert error and "root:" not in reply, (system, reply)


def test_an_http_server_reads_no_local_file_unless_configured(
    tmp_path: Path, monkeypatch: Any
) -> None:
    project = project_with_notes(tmp_path)
    monkeypatch.chdir(project)
    remote = dataclasses.replace(workspace(project, PROJECT_A), http=True)
    server = build_server(pool_for(tmp_path / "db"), remote)
    [(error, reply)] = knowledge_replies(server, [{"command": "read", "source": "notes.md"}])
    assert error and "no local directory" in reply and "knowledge.allow_paths" in reply
    server = build_server(pool_for(tmp_path / "db2", allow_paths=(str(project),)), remote)
    [(error, reply)] = knowledge_replies(server, [{"command": "read", "source": "notes.md"}])
    assert not error and "rotates every quarter" in reply


@pytest.mark.parametrize(
    "hostile",
    [
        "file:///",
        "file:///etc",
        "file://{repo}/../../../../../",
        "file:///%2e%2e/%2e%2e/etc",
        "file://{home}",
        "file://{home}/.ssh",
        "file://{home}/.config/gcloud",
    ],
)
def test_a_client_root_that_is_the_system_or_home_is_not_read_from(
    tmp_path: Path, monkeypatch: Any, hostile: str
) -> None:
    # Before: every file:// root the client named became readable: /etc/passwd was read.
    project = project_with_notes(tmp_path)
    monkeypatch.chdir(project)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "secret.md").write_text("# Key\n\nthe private key text\n")
    # A home's hidden directories hold its credentials (~/.ssh, ~/.aws, ~/.config/gcloud).
    for hidden in (".ssh", ".config/gcloud"):
        (tmp_path / "home" / hidden).mkdir(parents=True)
        (tmp_path / "home" / hidden / "id.md").write_text("# Key\n\nthe private key text\n")
    uri = hostile.format(repo=project.as_posix(), home=(tmp_path / "home").as_posix())

    roots = client_roots(project.as_uri(), uri)

    server = build_server(pool_for(tmp_path / "db"), workspace(project))
    calls = [
        {"command": "read", "source": "/etc/passwd"},
        {"command": "read", "source": str(tmp_path / "home" / "secret.md")},
        {"command": "read", "source": str(tmp_path / "home" / ".ssh" / "id.md")},
        {"command": "read", "source": str(tmp_path / "home" / ".config" / "gcloud" / "id.md")},
        {"command": "read", "source": str(project / "notes.md")},
    ]
    (etc, passwd), (home, secret), (ssh, key), (cloud, token), (ok, notes) = knowledge_replies(
        server, calls, list_roots_callback=roots
    )
    assert etc and "root:" not in passwd, passwd
    assert home and "private key" not in secret, secret
    assert ssh and cloud and "private key" not in key + token, (key, token)
    assert not ok and "rotates every quarter" in notes  # the project root still reads


@pytest.mark.parametrize("root", ["named before it exists", "the project, replaced"])
def test_a_root_swapped_for_a_link_to_the_home_later_is_not_read_from(
    tmp_path: Path, monkeypatch: Any, root: str
) -> None:
    # Roots were checked once, when the session took them: a client writing in its own
    # directory made a root it named a link to ~/.ssh afterwards, and the key was read.
    home = _a_home_with_a_key(tmp_path, monkeypatch)
    project = project_with_notes(tmp_path)
    later = tmp_path / "later" if root == "named before it exists" else project
    monkeypatch.chdir(tmp_path)
    server = build_server(pool_for(tmp_path / "db"), workspace(tmp_path))
    replies: list[tuple[bool, str]] = []

    async def body() -> None:
        roots = client_roots(project.as_uri(), later.as_uri())
        async with Client(server, mode="legacy", list_roots_callback=roots) as c:
            replies.append(await call(c, "knowledge", command="read", source="notes.md"))
            if later == project:
                project.rename(tmp_path / "project.old")
            later.symlink_to(home / ".ssh")
            for source in (later / "id.md", home / ".ssh" / "id.md"):
                replies.append(await call(c, "knowledge", command="read", source=str(source)))

    run(body)
    (first, notes), *swapped = replies
    assert not first and "rotates every quarter" in notes, notes
    for error, reply in swapped:
        assert error and "private key" not in reply, reply
        assert reply.startswith("source: ") and "knowledge.allow_paths" in reply, reply


def test_a_root_with_a_nul_is_ignored_not_the_end_of_the_session(
    tmp_path: Path, monkeypatch: Any
) -> None:
    project = project_with_notes(tmp_path)
    monkeypatch.chdir(project)

    roots = client_roots(project.as_uri() + "%00x")

    server = build_server(pool_for(tmp_path / "db"), workspace(project))

    async def body() -> None:
        async with Client(server, mode="legacy", list_roots_callback=roots) as c:
            # Before: "internal error (ValueError: embedded null byte)" on every call.
            error, reply = await call(c, "memorize", title="Plain fact", content="x" * 20,
                                      scope=PROJECT_A)  # fmt: skip
            assert not error, reply

    run(body)
