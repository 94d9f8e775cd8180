"""Configuration: one TOML file, typed frozen dataclasses, every key with a default.

`schema` holds the keys (sections as frozen dataclasses, each key with its default, doc and
rule; the rules are in `rules`); `loader` finds the file and the data root, applies the
environment overrides, checks every rule and renders a config back as TOML. Everything a
caller needs is importable from here.
"""

from octobrain.config.loader import (
    check_config,
    config_path,
    data_dir,
    default_config_toml,
    env_var_for,
    file_said,
    file_state,
    ignored_env,
    load_config,
    render_toml,
    resolve_storage_uri,
    storage_options,
)
from octobrain.config.schema import (
    BRIEF_TOKENS,
    CONFIG_VERSION,
    MAX_DAYS,
    BriefConfig,
    Config,
    ConsolidationConfig,
    EmbeddingConfig,
    HydeConfig,
    KnowledgeConfig,
    McpConfig,
    MemoryConfig,
    SearchConfig,
    ServiceConfig,
    StorageConfig,
)

__all__ = [
    "BRIEF_TOKENS",
    "CONFIG_VERSION",
    "MAX_DAYS",
    "BriefConfig",
    "Config",
    "ConsolidationConfig",
    "EmbeddingConfig",
    "HydeConfig",
    "KnowledgeConfig",
    "McpConfig",
    "MemoryConfig",
    "SearchConfig",
    "ServiceConfig",
    "StorageConfig",
    "check_config",
    "config_path",
    "data_dir",
    "default_config_toml",
    "env_var_for",
    "file_said",
    "file_state",
    "ignored_env",
    "load_config",
    "render_toml",
    "resolve_storage_uri",
    "storage_options",
]
