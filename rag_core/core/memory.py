"""Giving freed memory back to the operating system after a large, one-off allocation (loading the embedding model)."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import sys
from typing import Any

log = logging.getLogger(__name__)


@functools.cache
def _libc_trim() -> Any:
    """glibc's malloc_trim, or None where there is none (macOS, Windows, musl): there the allocator is left alone."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # no C library by that name, or one without malloc_trim (musl)
        return None


def release_free_memory() -> bool:
    """Hand the C allocator's free pages back to the system (glibc keeps them otherwise); False where not possible."""
    trim = _libc_trim()
    if trim is None:
        return False
    trim(0)
    return True
