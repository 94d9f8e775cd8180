"""The resident service: `client` (the `octobrain` entry point; standard library only, so
importing this package stays cheap) and `daemon` (the warm process that runs the commands)."""
