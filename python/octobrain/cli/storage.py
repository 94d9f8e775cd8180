"""`octobrain memory migrate`: move the whole store to another location (e.g. S3 for a team)."""

from __future__ import annotations

import click

from octobrain.cli.common import FORMAT_OPTION, emit_json
from octobrain.cli.progress import progress_bar


@click.command("migrate")
@click.option(
    "--to",
    "target",
    required=True,
    metavar="URI",
    help="Destination: a local directory or an object-store URI (s3://bucket/path, ...).",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Storage option for the destination (repeatable); default: storage.options.",
)
@FORMAT_OPTION
def migrate_cmd(target: str, options: tuple[str, ...], fmt: str) -> None:
    """Copy every table of the configured store to URI, then verify rows and ids.

    Writers are held off the source while it is copied. Afterwards set `storage.uri` (or
    OCTOBRAIN_STORAGE_URI) to URI on every machine; the source is left as it was.
    """
    from pathlib import Path

    from octobrain.config import load_config, resolve_storage_uri, storage_options
    from octobrain.config.rules import storage_options_problem
    from octobrain.errors import InvalidInput
    from octobrain.knowledge.store import table_schemas
    from octobrain.store.location import StoreLocation, is_remote
    from octobrain.store.migrate import check_target_text, migrate, open_target, plan

    check_target_text(target)
    config = load_config()
    configured = storage_options(config)
    problem = storage_options_problem(list(options))  # (the rules of storage.options)
    if problem:
        raise InvalidInput("--option", problem)
    target_options = dict(configured)
    for item in options:
        key, _, value = item.partition("=")
        target_options[key.strip()] = value.strip()
    uri = target if is_remote(target) else str(Path(target).expanduser().resolve())
    source = StoreLocation(resolve_storage_uri(config), configured)
    destination = StoreLocation(uri, target_options)
    open_target(source, destination)  # refused before the progress bar starts
    schemas = table_schemas()  # (the knowledge tables', which the store layer does not know)
    total = sum(plan(source, schemas).values())
    with progress_bar(total, f"copying to {destination}") as progress:
        copied = migrate(source, destination, schemas=schemas, progress=progress)
    if fmt == "json":
        tables = {c.table: c.rows for c in copied}
        payload = {"from": str(source), "to": str(destination), "tables": tables}
        emit_json(payload)
        return
    width = max((len(c.table) for c in copied), default=0)
    for c in copied:
        click.echo(f"{c.table:<{width}} {c.rows:>8} rows  verified")
    click.echo(f"copied {source} -> {destination}; set {_settings_to_use(uri, options)} to use it")


def _settings_to_use(uri: str, options: tuple[str, ...]) -> str:
    """The settings that open the copy: the URI, and the `--option` keys it was written with.

    The keys alone, never their values, which may be credentials; without them the copy
    was opened with the old storage.options (an endpoint missing, the bucket not found).
    """
    keys = list(dict.fromkeys(item.partition("=")[0].strip() for item in options))
    if not keys:
        return f"storage.uri = {uri!r}"
    named = ", ".join(keys)
    return f"storage.uri = {uri!r} and, in storage.options, the --option values given ({named})"
