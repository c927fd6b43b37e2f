"""Helpers shared by the CLI commands."""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from .config import Settings

if TYPE_CHECKING:  # pragma: no cover
    from .library import Library


def emit(args: argparse.Namespace, payload: dict, human: Callable[[], None]) -> None:
    """Print `payload` as JSON with --json, else call `human` to print it for people."""
    if args.json:
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        human()


def open_library(settings: Settings) -> Library:
    """Open the library (imported lazily so `--help` stays fast)."""
    from .library import Library

    return Library(settings)
