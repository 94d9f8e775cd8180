"""`python -m octobrain` runs the command line (through the resident service where it can)."""

from octobrain.service.client import main

main(prog_name="octobrain")
