"""The `octobrain` command line (click): one module per command group; `main` is the root."""
