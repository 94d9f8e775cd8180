"""Type stubs for the compiled core. Users import the wrappers in `octobrain`, not this module."""

__version__: str
