"""Domain errors. Each subclasses a builtin so callers may catch either."""

from __future__ import annotations


class OctobrainError(Exception):
    """Base class of every error octobrain raises on purpose."""


class InvalidInput(OctobrainError, ValueError):
    """An argument broke a rule. The message names the field and the rule."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule
