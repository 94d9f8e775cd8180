"""Scope derivation from real git repositories, URL normalisation, user scope validation."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from octobrain.errors import InvalidInput
from octobrain.scope import (
    GLOBAL_SCOPE,
    MAX_SCOPE_LENGTH,
    ProjectScope,
    derive_scope,
    find_project_scopes,
    normalize_remote_url,
    validate_scope,
)


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def make_repo(path: Path, origin: str | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", str(path))
    if origin is not None:
        git("-C", str(path), "remote", "add", "origin", origin)
    return path


# ---- URL forms -------------------------------------------------------------------------------

URL_TABLE = [
    ("git@github.com:Acme/Billing.git", "github.com/acme/billing"),
    ("git@github.com:acme/billing", "github.com/acme/billing"),
    ("github.com:acme/billing.git", "github.com/acme/billing"),
    ("ssh://git@github.com/acme/billing.git", "github.com/acme/billing"),
    ("ssh://git@github.com:22/acme/billing", "github.com/acme/billing"),
    ("git+ssh://git@GitHub.com:2222/acme/billing.git/", "github.com/acme/billing"),
    ("https://github.com/acme/billing.git", "github.com/acme/billing"),
    ("https://user@github.com/acme/billing.git", "github.com/acme/billing"),
    ("https://user:ghp_token@github.com/acme/billing.git", "github.com/acme/billing"),
    ("https://github.com:443/Acme/Billing/", "github.com/acme/billing"),
    ("http://gitlab.example.org/group/sub/project.git", "gitlab.example.org/group/sub/project"),
    ("git://host.xz/acme/billing.git", "host.xz/acme/billing"),
    ("  https://github.com/acme/billing.git/  ", "github.com/acme/billing"),
    ("https://github.com/acme/billing.git//", "github.com/acme/billing"),
    ("ssh://host.xz/~alice/repo.git", "host.xz/alice/repo"),
    ("git@gitlab.com:acme/My Repo.git", "gitlab.com/acme/my-repo"),
]


@pytest.mark.parametrize(("url", "scope"), URL_TABLE)
def test_remote_url_forms_normalise_to_host_owner_repo(url: str, scope: str):
    assert normalize_remote_url(url) == scope


@pytest.mark.parametrize(
    "url",
    ["", "   ", "/srv/git/billing.git", "../billing", "file:///srv/git/billing.git", r"C:\repo"],
)
def test_local_paths_and_empty_urls_are_not_project_identities(url: str):
    assert normalize_remote_url(url) is None


_name = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789-_.", min_size=1).filter(
    lambda s: s.strip(".") != "" and not s.lower().endswith(".git")
)


@given(owner=_name, repo=_name, port=st.integers(1, 65535), user=st.sampled_from(["git", "u"]))
def test_every_url_form_of_one_repo_gives_one_scope(owner: str, repo: str, port: int, user: str):
    forms = [
        f"{user}@github.com:{owner}/{repo}.git",
        f"ssh://{user}@github.com:{port}/{owner}/{repo}",
        f"https://{user}:secret@github.com/{owner}/{repo}.git/",
        f"https://GitHub.com/{owner}/{repo}",
        f"git://github.com/{owner}/{repo}.git",
    ]
    scopes = {normalize_remote_url(f) for f in forms}
    assert scopes == {f"github.com/{owner.lower()}/{repo.lower()}"}


# ---- derivation from real repositories ---------------------------------------------------------


def test_derive_from_origin_remote(tmp_path: Path):
    repo = make_repo(tmp_path / "billing", "git@github.com:Acme/Billing.git")
    assert derive_scope(repo) == "github.com/acme/billing"
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    assert derive_scope(sub) == "github.com/acme/billing", "a subdirectory belongs to its repo"


def test_derive_with_token_in_https_remote_does_not_leak_it(tmp_path: Path):
    repo = make_repo(tmp_path / "r", "https://x-access-token:ghs_SECRET@github.com/acme/r.git")
    scope = derive_scope(repo)
    assert scope == "github.com/acme/r"
    assert "secret" not in scope


def test_repo_without_remote_is_local_parent_dir_of_its_root(tmp_path: Path):
    repo = make_repo(tmp_path / "Projects" / "My App")
    assert derive_scope(repo) == "local/projects/my-app"
    (repo / "lib").mkdir()
    assert derive_scope(repo / "lib") == "local/projects/my-app"


def test_repo_with_local_path_remote_falls_back_to_local(tmp_path: Path):
    repo = make_repo(tmp_path / "work" / "clone", str(tmp_path / "bare.git"))
    assert derive_scope(repo) == "local/work/clone"


def test_plain_directory_is_local(tmp_path: Path):
    plain = tmp_path / "notes" / "ideas"
    plain.mkdir(parents=True)
    assert derive_scope(plain) == "local/notes/ideas"
    assert derive_scope(plain) != GLOBAL_SCOPE


def test_a_name_spelt_decomposed_or_of_dots_is_its_own_scope(tmp_path: Path):
    # macOS stores "café" decomposed (e + U+0301): it became `cafe-`, as "cafè" did (two
    # projects, one scope), and `--scope` refused the same text; a folder `...` was dropped
    # and shared its parent's scope.
    acute, grave, composed = "cafe\u0301", "cafe\u0300", "caf\u00e9"
    for name in (acute, grave, "...", "api"):
        (tmp_path / "dirs" / name).mkdir(parents=True)
    assert derive_scope(tmp_path / "dirs" / acute) == f"local/dirs/{composed}"
    assert derive_scope(tmp_path / "dirs" / grave) == "local/dirs/caf\u00e8"
    assert validate_scope(f"local/dirs/{acute}") == f"local/dirs/{composed}"
    assert derive_scope(tmp_path / "dirs" / "...") == "local/dirs/..."
    assert derive_scope(tmp_path / "dirs") != derive_scope(tmp_path / "dirs" / "...")


def test_a_remote_spelt_fullwidth_or_with_its_hosts_final_dot_is_the_one_project(tmp_path: Path):
    # The fullwidth letters an input method types (`ｇｉｔｈｕｂ.com`, which git's resolver reads
    # as github.com) and the host's final dot (`github.com.`, the same name in DNS) made a
    # scope of their own: the project's memories looked gone, and those stored so went to a
    # store no checkout reads. A local folder's name is kept as it is.
    for name, url in [
        ("wide", "https://ｇｉｔｈｕｂ.com/ａｃｍｅ/api.git"),
        ("dot", "git@github.com.:acme/api"),
    ]:
        assert derive_scope(make_repo(tmp_path / name, url)) == "github.com/acme/api"
    for typed in ("ｇｉｔｈｕｂ.com/acme/api", "github.com./acme/api", "GITHUB.COM./Acme/API.git"):
        assert validate_scope(typed) == "github.com/acme/api", typed
    assert validate_scope("local/dirs/ｆｏｏ") == "local/dirs/ｆｏｏ"
    (tmp_path / "dirs" / "ｆｏｏ").mkdir(parents=True)
    assert derive_scope(tmp_path / "dirs" / "ｆｏｏ") == "local/dirs/ｆｏｏ"


def test_a_remote_host_spelt_in_punycode_is_the_project_its_unicode_spelling_is(tmp_path: Path):
    # `xn--bcher-kva.example` is `bücher.example` as DNS carries it (git and curl send either
    # as that): the two spellings made two scopes, so a checkout cloned from one link did not
    # see what one cloned from the other stored. An A-label that is not one stays as written.
    for name, url in [
        ("ace", "https://xn--bcher-kva.example/acme/api.git"),
        ("scp", "git@XN--BCHER-KVA.example:acme/api"),
        ("unicode", "https://bücher.example/acme/api.git"),
    ]:
        assert derive_scope(make_repo(tmp_path / name, url)) == "bücher.example/acme/api", name
    assert validate_scope("xn--bcher-kva.example/acme/api") == "bücher.example/acme/api"
    assert validate_scope("git.xn--mnchen-3ya.de/a/b") == "git.münchen.de/a/b"
    assert validate_scope("xn--zz.example/acme/api") == "xn--zz.example/acme/api"
    assert validate_scope("local/dirs/xn--bcher-kva") == "local/dirs/xn--bcher-kva"
    assert validate_scope("example.com/xn--bcher-kva/api") == "example.com/xn--bcher-kva/api"


def test_derive_defaults_to_cwd_without_changing_it(tmp_path: Path, monkeypatch):
    repo = make_repo(tmp_path / "cwdrepo", "https://example.com/a/b.git")
    monkeypatch.chdir(repo)
    assert derive_scope() == "example.com/a/b"
    assert Path.cwd() == repo


def test_missing_git_binary_falls_back_to_local(tmp_path: Path, monkeypatch):
    repo = make_repo(tmp_path / "p" / "q", "git@github.com:acme/q.git")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin-here"))
    assert derive_scope(repo) == "local/p/q"


def test_derived_scopes_are_valid_user_scopes(tmp_path: Path):
    odd = tmp_path / "Ünïcode dir" / "x'; DROP TABLE memories; --"
    odd.mkdir(parents=True)
    scope = derive_scope(odd)
    assert validate_scope(scope) == scope
    assert "'" not in scope and " " not in scope


def test_find_project_scopes_lists_root_and_child_repos(tmp_path: Path):
    root = make_repo(tmp_path / "ws", "git@github.com:acme/ws.git")
    make_repo(root / "billing", "git@github.com:acme/billing.git")
    make_repo(root / "api")
    make_repo(root / ".hidden", "git@github.com:acme/hidden.git")
    (root / "docs").mkdir()
    (root / "README").write_text("x")
    found = find_project_scopes(root)
    assert found == [
        ProjectScope(root, "github.com/acme/ws"),
        ProjectScope(root / "api", "local/ws/api"),
        ProjectScope(root / "billing", "github.com/acme/billing"),
    ]


def test_a_fifo_named_git_is_no_project_and_the_scan_has_a_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # git blocked on each such FIFO for its timeout, twice: 36 s of server start for three.
    make_repo(tmp_path / "real", "https://example.com/o/real")
    (tmp_path / "trap").mkdir()
    os.mkfifo(tmp_path / "trap" / ".git")
    assert find_project_scopes(tmp_path) == [ProjectScope(tmp_path / "real", "example.com/o/real")]
    import octobrain.scope

    monkeypatch.setattr(octobrain.scope, "SCAN_SECONDS", 0.0)
    assert find_project_scopes(tmp_path) == []  # out of time before the first subdirectory


def test_find_project_scopes_in_a_plain_dir(tmp_path: Path):
    make_repo(tmp_path / "one", "https://example.com/o/one")
    assert find_project_scopes(tmp_path) == [ProjectScope(tmp_path / "one", "example.com/o/one")]
    assert find_project_scopes(tmp_path / "missing") == []


# ---- validating user-supplied scopes -----------------------------------------------------------


@pytest.mark.parametrize(
    ("given_scope", "canonical"),
    [
        ("", ""),
        ("  ", ""),
        ("/", ""),
        ("github.com/acme/billing", "github.com/acme/billing"),
        ("GitHub.com/Acme/Billing/", "github.com/acme/billing"),
        ("local/projects/my-app", "local/projects/my-app"),
        ("git@github.com:Acme/Billing.git", "github.com/acme/billing"),
        ("https://user@github.com/acme/billing.git", "github.com/acme/billing"),
        ("local/données/app_v2.1~x", "local/données/app_v2.1~x"),
        # a remote's spelling without its scheme: kept, it named a project no cwd derives
        ("github.com/acme/billing.git", "github.com/acme/billing"),
        ("GitHub.com/Acme/Billing.GIT/", "github.com/acme/billing"),
        ("local/srv/mirror.git", "local/srv/mirror.git"),  # a folder's name is its own
    ],
)
def test_valid_scopes_are_normalised(given_scope: str, canonical: str):
    assert validate_scope(given_scope) == canonical


@pytest.mark.parametrize(
    ("bad", "rule"),
    [
        ("acme billing", 'may contain only letters, digits and . _ - ~ / (found " ")'),
        ("acme/'billing", """(found "'")"""),
        ("a;b", "may contain only"),
        ('a"b', "may contain only"),
        ("a\\b", "may contain only"),
        ("a\nb", '(found "\\n")'),  # (one line: JSON's escape)
        # what was typed, and what a scope made of it (not a dot the user never typed)
        ("İstanbul", '(found "İ", read as "i" + U+0307 COMBINING DOT ABOVE)'),
        ("github.com/acme/½", '(found "½", read as "1" + "⁄" + "2")'),
        ("local/a/⁄", '(found "⁄")'),  # (a folder's name is not folded)
        # an invisible character named, not printed (a terminal would act on it)
        ("a\u202eb", "(found U+202E RIGHT-TO-LEFT OVERRIDE)"),
        ("a//b", "empty"),
        ("a/../b", "'..'"),
        ("./a", "'.'"),
        ("x" * (MAX_SCOPE_LENGTH + 1), f"at most {MAX_SCOPE_LENGTH}"),
        ("file:///srv/x.git", "neither a scope nor a git remote URL"),
        ("a:", "neither a scope nor a git remote URL"),
        # (a project called "global", which no project reads: an agent's cross-project facts)
        ("global", '"global" names no project; the global scope is ""'),
        (" Global/ ", '"global" names no project'),
    ],
)
def test_invalid_scopes_are_rejected_with_field_and_rule(bad: str, rule: str):
    with pytest.raises(InvalidInput) as info:
        validate_scope(bad)
    assert info.value.field == "scope"
    assert str(info.value).startswith("scope: ")
    assert rule in str(info.value)


def test_validate_scope_names_the_given_field():
    with pytest.raises(InvalidInput, match=r"^session\.scope: "):
        validate_scope("a b", field="session.scope")
    with pytest.raises(InvalidInput, match="must be a string"):
        validate_scope(3)  # type: ignore[arg-type]


@given(st.text(max_size=60))
def test_validation_is_idempotent_and_output_is_safe(text: str):
    try:
        canonical = validate_scope(text)
    except InvalidInput:
        return
    assert validate_scope(canonical) == canonical
    assert all(c.isalnum() or c in "._-~/" for c in canonical)
    assert canonical == canonical.lower()
