"""The options every `octobrain bench …` command shares, each checked before the benchmark
runs: where its report goes (`--output`, `--update`) and the model it measures (`--model`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["CACHE_DIR_OPTION", "OUTPUT_OPTION", "model_option", "update_option"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _writable(path: Path, param_hint: str) -> None:
    """Refuse, before a benchmark runs, a file its report could not be written to at the end:
    one that is there and not a regular file (a device, a FIFO), or in a folder that cannot
    be made or written (its file is written beside it, then moved over it)."""
    import os
    import stat

    from octobrain.files import replaced_by_write

    target = replaced_by_write(path)
    with contextlib.suppress(OSError):  # (not there: made at the end)
        if not stat.S_ISREG(target.stat().st_mode):
            raise click.BadParameter(f"{path} is not a regular file", param_hint=param_hint)
    folder = target.absolute().parent
    while not folder.exists() and folder != folder.parent:  # (made at the end: --output)
        folder = folder.parent
    if not folder.is_dir():
        raise click.BadParameter(f"{folder} is not a directory", param_hint=param_hint)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise click.BadParameter(f"{folder} is not writable", param_hint=param_hint)


def _apart(output: Path | None, update: Path | None) -> None:
    """Refuse `--output` naming the README `--update` rewrites (whichever click read first):
    the JSON replaced the README, whose markers were then gone."""
    import os

    if output is None or update is None:
        return
    if os.path.realpath(output) == os.path.realpath(update):
        raise click.BadParameter(
            f"--output and --update name one file ({update}); write the JSON elsewhere"
        )


def _output_checked(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None:
        _writable(value, "--output")
        _apart(value, ctx.params.get("update"))
    return value


def _model_checked(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """`--model` read as the config's `embedding.model` is, refused naming `--model` before
    anything runs (the error named `--embedding.model`, an option there is not)."""
    from octobrain.errors import InvalidInput
    from octobrain.modelspec import parse_model_spec

    try:
        parse_model_spec(value)
    except InvalidInput as err:
        raise click.BadParameter(err.rule, ctx, param_hint="--model") from None
    return value


def model_option(help_text: str) -> Callable[[_F], _F]:
    """`--model` (default: the bundled model), checked as `_model_checked` says."""
    return click.option(
        "--model", default="minilm", show_default=True, callback=_model_checked, help=help_text
    )


# Where `CachedEmbedder` keeps the corpus vectors when none is named (`embed.cache`).
CACHE_DIR_OPTION = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Embedding cache. Default: <data dir>/cache/embeddings.",
)

OUTPUT_OPTION = click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=_output_checked,
    help="Also write JSON here.",
)


def update_option(marker: str, what: str) -> Callable[[_F], _F]:
    """`--update README`: rewrite the `marker` table of that README (its markers checked
    before the benchmark runs, not after minutes of it)."""

    def checked(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
        from octobrain.bench.tables import check_readme
        from octobrain.errors import InvalidInput

        if value is not None:
            try:
                check_readme(value, marker)
            except InvalidInput as err:
                raise click.BadParameter(err.rule, ctx, param_hint="--update") from err
            _writable(value, "--update")
            _apart(ctx.params.get("output"), value)
        return value

    return click.option(
        "--update",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        callback=checked,
        help=f"Rewrite the {what} between <!-- {marker}:start/end --> in this README.",
    )
