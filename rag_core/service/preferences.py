"""The Settings page's choices, kept: in the data dir for local use (next start uses them), in memory per demo session.

Only known choices are kept, and each saved value is checked again on load: a hand-edited or damaged file loses the
bad values (logged), never the app.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError
from rag_core.core.files import write_atomic
from rag_core.core.safe_files import read_json
from rag_core.service.conversations import lock_for

log = logging.getLogger(__name__)

# Settings fields a person may change on the page
SETTING_CHOICES = ("ollama_host", "ollama_model", "chat_model", "openai_base_url", "top_k")
UI_CHOICES: dict[str, type] = {"use_llm": bool, "scope_default": str}
SCOPES = ("all", "pick")
MAX_BYTES = 64 * 1024
FILE_NAME = "preferences.json"


def clean(base: Settings, choices: dict[str, Any]) -> dict[str, Any]:
    """Only the known choices whose values are valid for `base` (invalid ones are dropped and logged)."""
    out: dict[str, Any] = {}
    for name, value in choices.items():
        if value is None:
            continue
        if name in UI_CHOICES:
            if isinstance(value, UI_CHOICES[name]) and (name != "scope_default" or value in SCOPES):
                out[name] = value
            else:
                log.warning("Ignoring saved choice %s=%r", name, value)
        elif name in SETTING_CHOICES:
            try:
                base.with_overrides(**{name: value})
            except (DocChatError, ValueError, TypeError) as e:
                log.warning("Ignoring saved setting %s: %s", name, e)
                continue
            out[name] = value
        else:
            log.warning("Ignoring unknown saved choice %r", name)
    return out


class Preferences(Protocol):
    """Where one person's Settings-page choices are kept."""

    def load(self) -> dict[str, Any]: ...

    def save(self, choices: dict[str, Any]) -> None: ...

    def update(self, changes: Mapping[str, Any]) -> dict[str, Any]: ...


class MemoryPreferences:
    """Choices kept in memory (the hosted demo: per browser session)."""

    def __init__(self, base: Settings) -> None:
        self.base = base
        self._choices: dict[str, Any] = {}

    def load(self) -> dict[str, Any]:
        """The choices made so far."""
        return dict(self._choices)

    def save(self, choices: dict[str, Any]) -> None:
        """Replace the kept choices."""
        self._choices = clean(self.base, choices)

    def update(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Change some choices, keeping the others; returns the choices now kept."""
        self._choices = clean(self.base, {**self._choices, **changes})
        return dict(self._choices)


class FilePreferences:
    """Choices kept in `<data dir>/preferences.json` (local mode): they last until changed again."""

    def __init__(self, base: Settings, path: Path | None = None) -> None:
        self.base = base
        self.path = path or base.library.data_dir / FILE_NAME
        self._lock = lock_for(self.path)  # shared by every FilePreferences of this file in this process

    def load(self) -> dict[str, Any]:
        """The saved choices (empty when none, or when the file is unreadable)."""
        try:
            data = read_json(self.path, MAX_BYTES)  # a regular file only, read up to the limit whatever stat says
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError, MemoryError) as e:
            log.warning("Ignoring unreadable %s: %s", self.path, e)
            return {}
        if not isinstance(data, dict):
            log.warning("Ignoring %s: it holds a JSON %s, not an object of choices", self.path, type(data).__name__)
            return {}
        return clean(self.base, data)

    def save(self, choices: dict[str, Any]) -> None:
        """Write the choices atomically (OSError when the disk fails)."""
        data = json.dumps(clean(self.base, choices), indent=1).encode("utf-8")
        with self._lock:
            write_atomic(self.path, data)

    def update(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Change some choices, keeping the others as saved (read and written under the file's one lock, so a
        change made meanwhile by another session is kept); returns the choices now saved. OSError when the disk
        fails."""
        with self._lock:
            kept = clean(self.base, {**self.load(), **changes})
            self.save(kept)
            return kept
