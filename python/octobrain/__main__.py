"""`python -m octobrain` runs the command line."""

from octobrain.cli import main

main(prog_name="octobrain")
