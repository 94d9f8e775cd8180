"""Configuration: locations, defaults, partial files, validation, env overrides, template."""

from __future__ import annotations

import dataclasses
import logging
import sys
import tomllib
from pathlib import Path

import pytest

from octobrain.config import (
    Config,
    config_path,
    data_dir,
    default_config_toml,
    env_var_for,
    load_config,
    render_toml,
    resolve_storage_uri,
)
from octobrain.errors import ConfigError, InvalidInput


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the real user config or inherits OCTOBRAIN_* variables."""
    import os

    for name in list(os.environ):
        if name.startswith("OCTOBRAIN_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def leaf_keys() -> list[str]:
    def walk(obj: object, prefix: str) -> list[str]:
        out: list[str] = []
        for f in dataclasses.fields(obj):  # type: ignore[arg-type]
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                out += walk(value, f"{prefix}{f.name}.")
            else:
                out.append(f"{prefix}{f.name}")
        return out

    return walk(Config(), "")


# ---- locations -------------------------------------------------------------------------------


def test_data_dir_and_config_path_follow_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert data_dir() == tmp_path / "data"
    assert config_path() == tmp_path / "data" / "config.toml"
    monkeypatch.setenv("OCTOBRAIN_CONFIG_PATH", str(tmp_path / "elsewhere.toml"))
    assert config_path() == tmp_path / "elsewhere.toml"


def test_data_dir_defaults_to_platform_user_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("OCTOBRAIN_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    root = data_dir()
    assert root.name == "octobrain"
    if sys.platform.startswith("linux"):
        assert root == tmp_path / "xdg" / "octobrain"
    assert not root.exists(), "locating the data dir must not create it"


def test_storage_uri_defaults_under_data_dir(tmp_path: Path):
    assert resolve_storage_uri(Config()) == str(tmp_path / "data" / "db")
    s3 = load_config(write(tmp_path, '[storage]\nuri = "s3://bucket/brain"\n'))
    assert resolve_storage_uri(s3) == "s3://bucket/brain"


# ---- loading ---------------------------------------------------------------------------------


def test_missing_file_gives_defaults(tmp_path: Path):
    assert load_config(tmp_path / "absent.toml") == Config()
    assert load_config() == Config()  # default location, not created
    assert Config().embedding.model == "minilm"
    assert Config().embedding.allow_download is False


def test_partial_file_keeps_other_defaults(tmp_path: Path):
    cfg = load_config(write(tmp_path, "[search]\nmin_relevance = 0.42\n[search.hyde]\ntop_k = 5\n"))
    assert cfg.search.min_relevance == 0.42
    assert cfg.search.hyde.top_k == 5
    assert cfg.search.hyde.alpha == Config().search.hyde.alpha
    assert cfg.memory == Config().memory


def test_template_lists_every_key_and_loads_to_defaults(tmp_path: Path):
    text = default_config_toml()
    assert load_config(write(tmp_path, text)) == Config()
    for key in leaf_keys():
        section, _, name = key.rpartition(".")
        assert f"\n{name} = " in text, key
        if section:
            assert f"[{section}]" in text
    assert text.count("\n# ") > len(leaf_keys()), "every key carries a comment"


def test_render_round_trips_non_default_values(tmp_path: Path):
    text = (
        '[embedding]\nmodel = "hash:64"\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[mcp]\nallowed_origins = ["https://a.example", "quote\\"d", "del\\u007f csi\\u009b"]\n'
        '[search]\nfusion = "zscore"\nvector_weight = 2.5\n'
    )
    cfg = load_config(write(tmp_path, text))
    assert cfg.mcp.allowed_origins == ("https://a.example", 'quote"d', "del\x7f csi\x9b")
    # DEL was written raw, which TOML refuses ("Illegal character"): `config show` saved was
    # no config; the C1 CSI went raw to the terminal.
    assert not {"\x7f", "\x9b"} & set(render_toml(cfg))
    again = load_config(write(tmp_path, render_toml(cfg)))
    assert again == cfg
    assert tomllib.loads(render_toml(cfg))["search"]["fusion"] == "zscore"


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().search.min_relevance = 0.9  # type: ignore[misc]


def test_unknown_keys_warn_with_their_dotted_name(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    path = write(
        tmp_path, "colour = 1\n[search]\nfoo = 1\n[search.hyde]\nbar = 2\n[extra]\nx = 1\n"
    )
    with caplog.at_level(logging.WARNING, logger="octobrain.config"):
        cfg = load_config(path)
    assert cfg == Config()
    text = caplog.text
    for key in ("'colour'", "'search.foo'", "'search.hyde.bar'", "'extra'"):
        assert key in text
    assert str(path) in text


def test_a_config_path_named_but_missing_is_said_and_a_bom_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    # A typo in OCTOBRAIN_CONFIG_PATH lost every setting without a word; a file saved with a
    # byte order mark (Notepad) was "invalid TOML … (at line 1, column 1)".
    missing = tmp_path / "nope.toml"
    monkeypatch.setenv("OCTOBRAIN_CONFIG_PATH", str(missing))
    with caplog.at_level(logging.WARNING, logger="octobrain.config"):
        assert load_config() == Config()
    assert f"OCTOBRAIN_CONFIG_PATH: {missing} does not exist; the defaults apply" in caplog.text
    marked = tmp_path / "bom.toml"
    marked.write_bytes("\ufeff[search]\ndefault_limit = 7\n".encode())
    assert load_config(marked).search.default_limit == 7


def test_a_data_dir_that_is_a_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "data").write_text("")
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    with pytest.raises(ConfigError, match=rf"cannot be read: {tmp_path}/data is a file, not a"):
        load_config()


def test_a_briefing_budget_a_call_takes_is_one_the_setting_takes(tmp_path: Path):
    # `brief --max-tokens 60` briefed, while `brief.max_tokens = 60` was refused ("between
    # 100 and 100000"): the setting's floor was not the one every call is held to.
    from octobrain.config import BRIEF_TOKENS

    low, high = BRIEF_TOKENS
    for budget in (low, 60, high):
        given = write(tmp_path, f"[brief]\nmax_tokens = {budget}\n")
        assert load_config(given).brief.max_tokens == budget
    for budget in (low - 1, high + 1):
        with pytest.raises(ConfigError, match=f"brief.max_tokens: must be between {low} and"):
            load_config(write(tmp_path, f"[brief]\nmax_tokens = {budget}\n"))


def test_int_given_for_float_is_accepted(tmp_path: Path):
    cfg = load_config(write(tmp_path, "[memory]\ndecay_half_life_days = 30\n"))
    assert cfg.memory.decay_half_life_days == 30.0
    assert isinstance(cfg.memory.decay_half_life_days, float)


@pytest.mark.parametrize(
    ("text", "key", "rule"),
    [
        ('[search]\nmax_results = "ten"\n', "search.max_results", "must be an integer"),
        ("[search]\nmax_results = 1.5\n", "search.max_results", "must be an integer"),
        ("[search]\nmax_results = true\n", "search.max_results", "must be an integer"),
        ('[search]\nmin_relevance = "high"\n', "search.min_relevance", "must be a number"),
        ("[search]\nmin_relevance = 1.5\n", "search.min_relevance", "between 0 and 1"),
        ("[search]\nmin_relevance = nan\n", "search.min_relevance", "finite"),
        # (before: "OverflowError: int too large to convert to float", a traceback)
        (f"[search]\nmin_relevance = 1{'0' * 400}\n", "search.min_relevance", "finite"),
        ("[search.hyde]\nenabled = 1\n", "search.hyde.enabled", "true or false"),
        ('[search]\nfusion = "max"\n', "search.fusion", "one of rrf, minmax, zscore"),
        ("[embedding]\nbatch_size = 0\n", "embedding.batch_size", "between 1 and 2048"),
        ("[embedding]\ntimeout_secs = 0\n", "embedding.timeout_secs", "between 0 and 600"),
        ('[embedding]\nmodel = "word2vec:x"\n', "embedding.model", "unknown provider"),
        ('[embedding]\nmodel = "hash:3"\n', "embedding.model", "8..4096"),
        ('[embedding]\nbase_url = "http://api.example.com/v1"\n', "embedding.base_url", "https"),
        ('[embedding]\nbase_url = "ftp://x"\n', "embedding.base_url", "http(s) URL"),
        # a port of full-width digits, which `\d` took
        ('[embedding]\nbase_url = "https://a.b:\uff18\uff10/v1"\n', "embedding.base_url", "URL"),
        ("[consolidation]\nmin_cluster_size = 1\n", "consolidation.min_cluster_size", "between 2"),
        ("[consolidation]\ninterval_hours = 0.5\n", "consolidation.interval_hours", ">= 1"),
        ('[consolidation]\nlinkage = "single"\n', "consolidation.linkage", "average, complete"),
        ("[consolidation]\nmax_age_days = 1e9\n", "consolidation.max_age_days", "36500"),
        ("[consolidation]\narchive_after_days = 1e9\n", "consolidation.archive_after_days", "365"),
        ('[mcp]\nbind = "localhost"\n', "mcp.bind", "HOST:PORT"),
        ('[mcp]\nbind = "127.0.0.1:70000"\n', "mcp.bind", "HOST:PORT"),
        ('[mcp]\nbind = "127.0.0.1:\uff10\uff18\uff10"\n', "mcp.bind", "port of ASCII digits"),
        ('[mcp]\nbind = "127.0.0.1:\u00b2"\n', "mcp.bind", "port of ASCII digits"),
        # (before: int's "Exceeds the limit (4300 digits)" ValueError, a traceback)
        (f'[mcp]\nbind = "127.0.0.1:{"9" * 5000}"\n', "mcp.bind", "port of ASCII digits"),
        ('[mcp]\ntoken = "short"\n', "mcp.token", "at least 16"),
        ('[mcp]\ntoken = "0123456789abcdef\\r"\n', "mcp.token", "printable ASCII with no"),
        ('[mcp]\ntoken = "0123456789abcdef "\n', "mcp.token", "holds a space at its"),
        ("[mcp]\nallowed_origins = [1]\n", "mcp.allowed_origins", "list of strings"),
        ("[mcp]\nunread_seconds = 0\n", "mcp.unread_seconds", "must be between 0"),
        ('[mcp]\nunread_seconds = "long"\n', "mcp.unread_seconds", "must be a number"),
        ("search = 3\n", "search", "must be a table"),
        ("[search]\nhyde = 1\n", "search.hyde", "must be a table"),
        (
            '[knowledge]\nallow_private_hosts = ["10.0.0.0/8", "bad host!"]\n',
            "knowledge.allow_private_hosts",
            '"bad host!" is not a host name, an IP address or a CIDR network, alone',
        ),
        ("[knowledge]\nmax_redirects = -1\n", "knowledge.max_redirects", "must be between 0"),
        (
            "[knowledge]\nmcp_max_source_chunks = 0\n",
            "knowledge.mcp_max_source_chunks",
            "must be between 1",
        ),
        # Accepted: 5e-324 put every memory at the decay floor at once, 1e300 stopped decay.
        ("[memory]\ndecay_half_life_days = 5e-324\n", "memory.decay_half_life_days", "an hour"),
        ("[memory]\ndecay_half_life_days = 1e300\n", "memory.decay_half_life_days", "century"),
    ],
)
def test_invalid_values_name_file_key_and_rule(tmp_path: Path, text: str, key: str, rule: str):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert isinstance(err, InvalidInput) and isinstance(err, ValueError)
    assert err.field == key
    assert str(err).startswith(f"{path}: {key}: ")
    assert rule in str(err)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[knowledge]\nchunk_size = 500\nchunk_overlap = 500\n", "knowledge.chunk_overlap"),
        ("[knowledge]\nchunk_size = 5000\n", "knowledge.parent_size"),
        ("[search]\ndefault_limit = 60\n", "search.default_limit"),
        ("[search]\nvector_weight = 0\nbm25_weight = 0\n", "search.bm25_weight"),
        ("version = 2\n", "version"),
    ],
)
def test_cross_key_rules(tmp_path: Path, text: str, key: str):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == key
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("env", "text", "key", "place"),
    [
        # The file holds a valid 300; the variable's 2000 broke the rule.
        (
            {"OCTOBRAIN_KNOWLEDGE_CHUNK_OVERLAP": "2000"},
            "[knowledge]\nchunk_overlap = 300\n",
            "knowledge.chunk_overlap",
            "OCTOBRAIN_KNOWLEDGE_CHUNK_OVERLAP",
        ),
        ({"OCTOBRAIN_VERSION": "2"}, "", "version", "OCTOBRAIN_VERSION"),
        # One key from each: both places are named.
        (
            {"OCTOBRAIN_KNOWLEDGE_CHUNK_SIZE": "400"},
            "[knowledge]\nchunk_overlap = 500\n",
            "knowledge.chunk_overlap",
            "{path} and OCTOBRAIN_KNOWLEDGE_CHUNK_SIZE",
        ),
    ],
)
def test_a_cross_key_rule_broken_by_a_variable_names_the_variable(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    text: str,
    key: str,
    place: str,
):
    """The file was blamed (`config.toml: knowledge.chunk_overlap: must be less than …`) for
    a value it did not hold, and a variable with no file named no place at all."""
    path = write(tmp_path, text)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == key
    assert str(info.value).startswith(f"{place.format(path=path)}: {key}: "), str(info.value)


def test_non_loopback_bind_with_token_is_fine(tmp_path: Path):
    cfg = load_config(write(tmp_path, '[mcp]\nbind = "0.0.0.0:8765"\ntoken = "0123456789abcdef"\n'))
    assert cfg.mcp.bind == "0.0.0.0:8765"
    assert load_config(write(tmp_path, '[mcp]\nbind = "[::1]:8765"\n')).mcp.token == ""


def test_corrupt_toml_names_file_and_line(tmp_path: Path):
    path = write(tmp_path, '[search]\nmin_relevance = 0.3\nfusion = "rrf\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid TOML")
    assert "line 3" in message
    # An integer Python will not read (over 4,300 digits) was a ValueError traceback.
    path = write(tmp_path, f"[search]\nmax_results = 1{'0' * 5000}\n")
    with pytest.raises(ConfigError, match=r": invalid TOML: an integer too long to read"):
        load_config(path)


def test_unreadable_file_is_a_config_error(tmp_path: Path):
    path = tmp_path / "config.toml"
    path.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(path)


def test_a_config_path_that_is_no_regular_file_is_refused_without_reading_it(tmp_path: Path):
    # A pipe held every command until something wrote to it; /dev/zero grew without end.
    import os

    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_config(fifo)
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_config(Path("/dev/zero"))
    big = write(tmp_path, "# x\n" * 300_000)
    with pytest.raises(ConfigError, match="is over 1 MiB"):
        load_config(big)


@pytest.mark.parametrize("name", ["OCTOBRAIN_DATA_DIR", "OCTOBRAIN_CONFIG_PATH"])
def test_a_location_whose_home_does_not_exist_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str
):
    from octobrain.config import config_path

    monkeypatch.setenv(name, "~no-such-user-here/octobrain")
    with pytest.raises(ConfigError, match=f'^{name}: "~no-such-user-here/octobrain": its ~ names'):
        config_path()


@pytest.mark.parametrize("name", ["OCTOBRAIN_DATA_DIR", "OCTOBRAIN_CONFIG_PATH"])
def test_a_relative_location_is_refused_not_read_from_each_directory(
    monkeypatch: pytest.MonkeyPatch, name: str
):
    # Before: `OCTOBRAIN_DATA_DIR=rel/dd` made a new, empty store under every directory a
    # command ran from; a relative config path read another file (or none) in each.
    from octobrain.config import config_path

    monkeypatch.setenv(name, "rel/dd")
    with pytest.raises(ConfigError, match=f'^{name}: must be an absolute path .*got "rel/dd"'):
        config_path()


def test_a_storage_uri_with_a_nul_or_an_unknown_home_names_the_key(tmp_path: Path):
    from octobrain.config import resolve_storage_uri

    for uri, rule in (
        ("/tmp/a\x00b", "must not contain NUL"),
        ("~no-such-user-here/db", "its ~"),
        ("/tmp/caf\udcff", "must be valid UTF-8"),  # before: a traceback from the snapshot key
        ("relative/dir", "must be an absolute path"),  # before: a store in every cwd
    ):
        config = dataclasses.replace(
            Config(), storage=dataclasses.replace(Config().storage, uri=uri)
        )
        with pytest.raises(ConfigError, match=f"^storage.uri: .*{rule}"):
            resolve_storage_uri(config)


# ---- environment overrides -------------------------------------------------------------------


def test_env_var_names_are_unique_and_do_not_shadow_locations():
    names = [env_var_for(k) for k in leaf_keys()]
    assert len(set(names)) == len(names)
    assert "OCTOBRAIN_DATA_DIR" not in names and "OCTOBRAIN_CONFIG_PATH" not in names
    assert env_var_for("search.hyde.alpha") == "OCTOBRAIN_SEARCH_HYDE_ALPHA"


def test_env_overrides_every_type_and_beats_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    path = write(tmp_path, "[search]\nmax_results = 20\nmin_relevance = 0.1\n")
    monkeypatch.setenv("OCTOBRAIN_SEARCH_MAX_RESULTS", " 30 ")
    monkeypatch.setenv("OCTOBRAIN_SEARCH_HYDE_ALPHA", "0.25")
    monkeypatch.setenv("OCTOBRAIN_SEARCH_HYDE_ENABLED", "off")
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:32")
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_ALLOW_DOWNLOAD", "YES")
    monkeypatch.setenv("OCTOBRAIN_MCP_ALLOWED_ORIGINS", "https://a, https://b,")
    cfg = load_config(path)
    assert cfg.search.max_results == 30
    assert cfg.search.min_relevance == 0.1  # from the file
    assert cfg.search.hyde.alpha == 0.25
    assert cfg.search.hyde.enabled is False
    assert cfg.embedding.model == "hash:32"
    assert cfg.embedding.allow_download is True
    assert cfg.mcp.allowed_origins == ("https://a", "https://b")
    # A list also as the config file and the README write it (it was taken as one odd value).
    monkeypatch.setenv("OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS", '["127.0.0.1", "10.0.0.0/8"]')
    assert load_config(path).knowledge.allow_private_hosts == ("127.0.0.1", "10.0.0.0/8")


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [
        ("OCTOBRAIN_SEARCH_MAX_RESULTS", "many", "must be an integer"),
        ("OCTOBRAIN_SEARCH_HYDE_ALPHA", "half", "must be a number"),
        ("OCTOBRAIN_SEARCH_HYDE_ALPHA", "2", "between 0 and 1"),
        ("OCTOBRAIN_MEMORY_DECAY_ENABLED", "maybe", "must be one of 1, 0, true"),
        ("OCTOBRAIN_SEARCH_FUSION", "sum", "must be one of rrf"),
        ("OCTOBRAIN_MCP_UNREAD_SECONDS", "forever", "must be a number"),
        ("OCTOBRAIN_MCP_ALLOWED_ORIGINS", "[1, 2]", "or a TOML array of strings"),
        ("OCTOBRAIN_MCP_ALLOWED_ORIGINS", '["https://a"', "or a TOML array of strings"),
        # Bytes that are not UTF-8: accepted, then every command failed opening the store with
        # "'utf-8' codec can't encode character '\udcff'", naming no variable.
        ("OCTOBRAIN_STORAGE_OPTIONS", "region=eu\udcff", "must be valid UTF-8"),
        ("OCTOBRAIN_KNOWLEDGE_ALLOW_PATHS", "/srv/caf\udce9", "must be valid UTF-8"),
    ],
)
def test_bad_env_value_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, rule: str
):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.toml")
    assert str(info.value).startswith(f"{name}: ")
    assert rule in str(info.value)


def test_knowledge_allow_list_accepts_addresses_networks_and_hosts(tmp_path: Path):
    entries = ("127.0.0.1", "10.0.0.0/8", "::1", "docs.internal", "127.0.0.1:8000",
               "[::1]:8000", "[fd00::/8]:443", "10.0.0.0/8:443", "docs.internal:8080")  # fmt: skip
    text = f"[knowledge]\nallow_private_hosts = {list(entries)!r}\n".replace("'", '"')
    cfg = load_config(write(tmp_path, text))
    assert cfg.knowledge.allow_private_hosts == entries
