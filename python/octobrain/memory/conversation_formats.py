"""The conversation formats `memory ingest --format-in` takes, named apart from their parsers
(`memory.conversation`), so that the command line lists them without importing those: every
`octobrain` process imports the command line, few of them ingest."""

from __future__ import annotations

__all__ = ["EXPORTS", "FORMATS", "WHATSAPP"]

EXPORTS = ("claude-ai", "chatgpt")  # chat exports (`memory.chat_exports`)
WHATSAPP = ("whatsapp", "whatsapp-dmy", "whatsapp-mdy")  # `whatsapp` tells the date order
FORMATS = ("auto", "claude", "chat", "locomo", *EXPORTS, *WHATSAPP)
