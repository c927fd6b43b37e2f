"""The root of DocChat's user-facing errors (rag_core.core.errors names them all) and the wording they share."""
from __future__ import annotations


class DocChatError(Exception):
    """Base class: str(error) is a friendly sentence for the user; `details` (when set) is the technical part, e.g.
    a variable name or an address, that the pages show in an expandable "Details" and the CLI after the sentence."""

    details: str = ""

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        for name, value in details.items():  # what the message was made from, for callers and tests
            setattr(self, name, value)


def duration(seconds: float) -> str:
    """300 -> "5 minutes", 90 -> "90 seconds", 1 -> "1 second"."""
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g} minutes"
    return "1 second" if seconds == 1 else f"{seconds:g} seconds"
