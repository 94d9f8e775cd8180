"""The `octobrain` command line (click). Thin: parse, call the library, format."""

from __future__ import annotations

import click

from octobrain import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="octobrain")
def main() -> None:
    """octobrain: long-term memory for AI agents, served over MCP."""
