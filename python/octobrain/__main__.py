"""`python -m octobrain` runs the command line (through the resident service where it can)."""

from octobrain.cli.launch import main

main(prog_name="octobrain")
