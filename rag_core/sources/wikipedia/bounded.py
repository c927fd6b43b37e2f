"""Bounded reading of an untrusted HTTP answer: a deadline over the whole request, a size cap, depth-safe JSON.

Used by rag_core.sources.wikipedia.client for every API call, so that no answer, however hostile (dripping one byte at a
time, hundreds of megabytes, a compression bomb, JSON nested a million levels deep), costs more than a known
amount of time and memory.

- `RequestTimer`: a timer thread that shuts the request's socket down when the time is up, so a read blocked on it
  returns at once. The socket comes from httpx's documented `trace` request extension (the connect/TLS events
  return the network stream); the client opens a new connection per request, so there is always one to cut,
  whether the server drips headers or body. (Not rag_core.core.deadline.Deadline: that is a file's budget that the
  ingest code checks between steps; this one acts by itself, on a socket, while the code waits in a read.)
- `read_body`: the body, decompressed here (gzip/deflate only) in steps that never exceed the cap.
- `as_dict`, `as_list`, `as_id`, `one_line`: a parsed field only if it has the expected type (else empty).
- `parse_json`: refuses nesting deeper than MAX_JSON_DEPTH and more than MAX_JSON_ITEMS values before parsing,
  with C-speed passes over the bytes, then parses.
"""
from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
import unicodedata
import zlib
from typing import Any

import httpx

from rag_core.core.errors import WikipediaBadResponse, WikipediaResponseTooLarge

log = logging.getLogger(__name__)

MAX_JSON_DEPTH = 64  # real Action API answers are at most ~6 levels deep
MAX_JSON_ITEMS = 200_000  # values in one answer; a search or 500 links is a few thousand
ACCEPTED_ENCODINGS = {"": None, "identity": None, "gzip": 32 + zlib.MAX_WBITS, "x-gzip": 32 + zlib.MAX_WBITS,
                      "deflate": 32 + zlib.MAX_WBITS}  # wbits: 32+ detects a gzip or zlib header

# One JSON string, or an unterminated one up to the end: possessive, and it matches at every opening quote, so the
# scan is linear whatever the input (an unterminated string makes the JSON invalid anyway; json.loads says so).
_STRING_RE = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.S)
_KEEP = b"[]{},"
_DROP_ALL_BUT_STRUCTURE = bytes(b for b in range(256) if b not in _KEEP)
_BRACES_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")


class RequestTimer:
    """Cuts one request off when `seconds` have passed: use as a context manager, pass `trace` to httpx."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(0.0, seconds)
        self.end = time.monotonic() + self.seconds
        self.expired = False
        self._streams: list[Any] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(self.seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> RequestTimer:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    @property
    def passed(self) -> bool:
        """True once the time is up (the timer may not have fired yet)."""
        return self.expired or time.monotonic() >= self.end

    def trace(self, event: str, info: dict) -> None:
        """httpx `trace` extension: remember each network stream the request opens (cut at once if already late)."""
        stream = info.get("return_value") if event.endswith(".complete") else None
        if stream is None or not hasattr(stream, "get_extra_info"):
            return
        with self._lock:
            self._streams.append(stream)
            late = self.expired
        if late:
            _shut(stream)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            streams = list(self._streams)
        for stream in streams:
            _shut(stream)


def _shut(stream: Any) -> None:
    """Shut a stream's socket down so a read blocked on it returns at once (closing is left to httpx)."""
    sock = stream.get_extra_info("socket")
    if not isinstance(sock, socket.socket):
        return
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket call, also for an SSLSocket
    except OSError as e:  # already closed or detached (the TLS stream replaced it): nothing left to cut
        log.debug("Socket already closed when the time was up: %s", e)


def read_body(resp: httpx.Response, limit_mb: int, timer: RequestTimer) -> bytes:
    """The decompressed body, read in steps: WikipediaResponseTooLarge past `limit_mb`; stops once `timer` has passed
    (the caller turns that into its error)."""
    cap = limit_mb * 1024 * 1024
    announced = resp.headers.get("Content-Length", "").strip()
    if announced.isdigit() and int(announced) > cap:
        raise WikipediaResponseTooLarge(limit_mb)
    coding = resp.headers.get("Content-Encoding", "").strip().lower()
    if coding not in ACCEPTED_ENCODINGS:
        raise WikipediaBadResponse(f"it is compressed as “{coding[:20]}”, which DocChat does not accept")
    wbits = ACCEPTED_ENCODINGS[coding]
    inflate = zlib.decompressobj(wbits) if wbits else None
    parts: list[bytes] = []
    size = raw_size = 0
    for raw in resp.iter_raw():
        raw_size += len(raw)
        if raw_size > cap:
            raise WikipediaResponseTooLarge(limit_mb)
        if inflate is None:
            size += len(raw)
            parts.append(raw)
        else:
            size = _inflate(inflate, raw, parts, size, cap, limit_mb)
        if size > cap:
            raise WikipediaResponseTooLarge(limit_mb)
        if timer.passed:
            break
    if inflate is not None and not inflate.eof and not timer.passed:
        raise WikipediaBadResponse("its compressed body was cut off")
    return b"".join(parts)


def _inflate(inflate: Any, raw: bytes, parts: list[bytes], size: int, cap: int, limit_mb: int) -> int:
    """Decompress `raw` into `parts` never producing more than the cap allows; the new size."""
    pending = raw
    try:
        while pending:
            data = inflate.decompress(pending, cap - size + 1)
            size += len(data)
            if size > cap:
                raise WikipediaResponseTooLarge(limit_mb)
            parts.append(data)
            tail = inflate.unconsumed_tail
            if not data and tail == pending:
                break  # no progress possible (cannot happen with a valid stream; never loop forever)
            pending = tail
    except zlib.error as e:
        raise WikipediaBadResponse("its compression is damaged") from e
    return size


def check_json_shape(body: bytes) -> None:
    """WikipediaBadResponse when the JSON text nests deeper than MAX_JSON_DEPTH or holds more than MAX_JSON_ITEMS
    values; linear in the size of `body` (strings removed, then at most MAX_JSON_DEPTH passes over the at most
    2 * MAX_JSON_ITEMS brackets)."""
    skeleton = _STRING_RE.sub(b"", body).translate(_BRACES_AS_BRACKETS, _DROP_ALL_BUT_STRUCTURE)
    brackets = skeleton.replace(b",", b"")
    if len(skeleton) - len(brackets) + len(brackets) // 2 > MAX_JSON_ITEMS:  # separators + containers
        raise WikipediaBadResponse(f"it holds more than {MAX_JSON_ITEMS:,} values")
    for _ in range(MAX_JSON_DEPTH):
        if not brackets:
            return
        inner = brackets.replace(b"[]", b"")  # removes the innermost level of every nest
        if len(inner) == len(brackets):
            raise WikipediaBadResponse("it is not valid JSON")  # unbalanced brackets
        brackets = inner
    if brackets:
        raise WikipediaBadResponse(f"it is nested more than {MAX_JSON_DEPTH} levels deep")


def parse_json(body: bytes) -> Any:
    """The JSON value of `body`, its shape checked first; any failure is WikipediaBadResponse."""
    check_json_shape(body)
    try:
        return json.loads(body)
    except RecursionError as e:  # not reachable after the depth check; kept so no stack can ever overflow here
        raise WikipediaBadResponse(f"it is nested more than {MAX_JSON_DEPTH} levels deep") from e
    except ValueError as e:  # JSONDecodeError, bad UTF-8, a number with too many digits
        raise WikipediaBadResponse("it is not valid JSON") from e


# -- reading parsed fields: the expected type or nothing ----------------------------------------
def as_dict(value: object) -> dict:
    """`value` if it is a JSON object, else {} (a field of the wrong type counts as missing)."""
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list:
    """`value` if it is a JSON array, else []."""
    return value if isinstance(value, list) else []


def as_id(value: object) -> int | None:
    """A positive id from a JSON number or digit string (MediaWiki sends both), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value) or None
    return None


def one_line(value: object, limit: int) -> str:
    """Text for a message: a string's words, control characters removed, at most `limit` characters."""
    text = value if isinstance(value, str) else ""
    return " ".join("".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text[:limit * 2]).split())[:limit]
