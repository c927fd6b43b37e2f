"""A small MediaWiki Action API stand-in on 127.0.0.1 for tests.

It replays the real recorded responses in tests/fixtures/wikipedia/ (their README names the request each one
answers), serves responses a test constructs explicitly (`respond`), and injects faults (`fault`): 429 with
Retry-After, 5xx, 404, timeouts and truncated bodies, and hostile answers: a body or headers dripped one byte at a
time ("drip", "drip-headers") and an endless or huge body ("huge"). Every request is recorded so tests can count
retries; `bytes_sent` counts the body bytes written, so tests can see where a client stopped reading.

Matching: a request is answered by the recording with the same action, the same list= and the same
titles / pageids / srsearch (titles compared the way MediaWiki normalises them); among those, the one whose
prop= and other parameters overlap most. No match -> HTTP 404 with a `replay-error` body (listed in `unmatched`).

Use: `with WikiReplayServer() as server: settings = Settings(wikipedia_api=server.url_template)`.
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from tests.protocol_server import ThreadedServer

FIXTURES = Path(__file__).parent / "fixtures" / "wikipedia"

_ROW_RE = re.compile(r"^\| `(?P<file>[^`]+)` .*?\| `GET (?P<url>\S+)` \| (?P<status>\d{3}) / (?P<ctype>[^|]+?) \|", re.M)
_KEY_PARAMS = ("titles", "pageids", "srsearch", "search", "page")
_IGNORED = {"action", "list", "prop", "format"} | set(_KEY_PARAMS)


@dataclass(frozen=True)
class Recording:
    """One recorded response and the request it answered (from the fixtures README)."""

    file: str
    params: dict
    body: bytes
    status: int
    content_type: str


@dataclass
class Rule:
    """A fault or a constructed response for requests matching `match` (None = all), `remaining` times."""

    kind: str  # "respond" | "429" | "5xx" | "status" | "timeout" | "truncated" | "file" | "drip" | "drip-headers" | "huge"
    match: dict | None = None
    remaining: int | None = 1  # None: forever
    status: int = 200
    body: bytes = b""
    headers: dict = field(default_factory=dict)
    delay: float = 0.0
    file: str = ""
    size: int = 0  # "huge": body bytes to send
    announce: bool = False  # "huge": send a Content-Length (else the body is chunked)


@dataclass(frozen=True)
class Seen:
    """One request the server received and how it answered."""

    lang: str
    params: dict
    outcome: str  # "file:NAME" | "respond" | "fault:KIND" | "unmatched"
    status: int | None
    user_agent: str


def load_recordings(folder: Path = FIXTURES) -> list[Recording]:
    """The Action API recordings listed in the folder's README table."""
    out = []
    for m in _ROW_RE.finditer((folder / "README.md").read_text(encoding="utf-8")):
        url = urlsplit(m.group("url"))
        if not url.path.endswith("/w/api.php"):
            continue  # REST recordings: not used by rag_core.sources.wikipedia
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        ctype = m.group("ctype").replace("(assumed)", "").strip()
        out.append(Recording(m.group("file"), params, (folder / m.group("file")).read_bytes(), int(m.group("status")),
                             ctype))
    return out


def norm_title(title: str) -> str:
    """MediaWiki's title normalisation for comparison: underscores -> spaces, first letter upper-case."""
    t = " ".join(title.replace("_", " ").split())
    return t[:1].upper() + t[1:]


def _key(name: str, value: str) -> tuple:
    parts = value.split("|")
    if name == "titles":
        return tuple(sorted(norm_title(p) for p in parts))
    if name in ("srsearch", "search", "page"):
        return (" ".join(value.lower().split()),)
    return tuple(sorted(parts))


def _score(req: dict, rec: dict) -> float | None:
    """How well a recording answers a request; None if it is a different request altogether."""
    if req.get("action", "query") != rec.get("action", "query"):
        return None
    if req.get("list"):
        if _key("list", req["list"]) != _key("list", rec.get("list", "")):
            return None
    elif rec.get("list") and not rec.get("prop"):
        return None  # a pure list= recording (search) does not answer a prop= request
    for name in _KEY_PARAMS:
        if (name in req) != (name in rec):
            return None
        if name in req and _key(name, req[name]) != _key(name, rec[name]):
            return None
    want, have = set(req.get("prop", "").split("|")) - {""}, set(rec.get("prop", "").split("|")) - {""}
    score = len(want & have) - 0.5 * len(want ^ have)
    for name, value in rec.items():
        if name not in _IGNORED:
            score += 0.1 if req.get(name) == value else -0.2
    return score


def matches(req: dict, lang: str, match: dict | None) -> bool:
    """Does a request satisfy a rule's match? prop/list: listed values are a subset; titles: normalised."""
    for name, value in (match or {}).items():
        if name == "lang":
            if lang != value:
                return False
        elif name in ("prop", "list"):
            if not set(str(value).split("|")) <= set(req.get(name, "").split("|")):
                return False
        elif name in ("titles", "srsearch", "pageids"):
            if name not in req or _key(name, req[name]) != _key(name, str(value)):
                return False
        elif req.get(name) != str(value):
            return False
    return True


class WikiReplayServer(ThreadedServer):
    """Start with `with WikiReplayServer() as s:`; point Settings.wikipedia_api at `s.url_template`."""

    thread_name = "wiki-replay"

    def __init__(self, folder: Path = FIXTURES) -> None:
        super().__init__()
        self.folder = folder
        self.recordings = load_recordings(folder)
        self.by_file = {r.file: r for r in self.recordings}
        self.requests: list[Seen] = []
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)  # notified whenever an answer ends
        self.bytes_sent = 0  # body bytes written by "drip" and "huge" answers
        self.answering = 0  # requests being answered right now

    def make_handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler, bound to this server."""
        return _make_handler(self)

    @property
    def url_template(self) -> str:
        """Value for Settings.wikipedia_api / DOCCHAT_WIKIPEDIA_API."""
        return f"{self.url}/{{lang}}/w/api.php"

    # -- configuration ---------------------------------------------------------
    def respond(self, match: dict, body: dict | bytes, status: int = 200, times: int | None = None,
                headers: dict | None = None) -> None:
        """Answer matching requests with a body the test constructed (newest rule wins); `headers` are added, e.g.
        {"Content-Encoding": "gzip"} for a body the test compressed."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        with self._lock:
            self._rules.insert(0, Rule("respond", match, times, status, data, headers=dict(headers or {})))

    def serve_file(self, file: str, match: dict | None = None, times: int | None = 1) -> None:
        """Answer matching requests with a named recording (e.g. the recorded API-error body)."""
        with self._lock:
            self._rules.insert(0, Rule("file", match, times, file=file))

    def fault(self, kind: str, times: int | None = 1, match: dict | None = None, retry_after: str | None = None,
              status: int | None = None, delay: float = 1.0, size: int = 0, announce: bool = False) -> None:
        """Inject a fault: "429" (with Retry-After), "5xx"/"status" (given status), "timeout" (no answer for
        `delay` s), "truncated" (half the body, then the connection closes), "drip" (headers at once, then the
        answer's body one byte every `delay` s), "drip-headers" (the status line and headers one byte every `delay`
        s), "huge" (a JSON-looking body of `size` bytes that never closes its string, with a Content-Length if
        `announce`, else chunked; written until done or the client hangs up)."""
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        code = status or {"429": 429, "5xx": 503}.get(kind, 200)
        with self._lock:
            self._rules.insert(0, Rule(kind, match, times, code, headers=headers, delay=delay, size=size,
                                       announce=announce))

    def _sent(self, n: int) -> None:
        with self._lock:
            self.bytes_sent += n

    def _answering(self, change: int) -> None:
        with self._lock:
            self.answering += change
            self._done.notify_all()

    def wait_answered(self, timeout: float = 30.0) -> bool:
        """Wait until no request is being answered any more (e.g. a "huge" answer has noticed that the client hung
        up and stopped writing); False if that takes longer than `timeout` s."""
        with self._done:
            return self._done.wait_for(lambda: self.answering == 0, timeout)

    def clear(self) -> None:
        """Forget rules and the request log."""
        with self._lock:
            self._rules.clear()
            self.requests.clear()
            self.bytes_sent = 0

    # -- inspection ------------------------------------------------------------
    def seen(self, match: dict | None = None) -> list[Seen]:
        """Requests received (optionally only those matching)."""
        with self._lock:
            return [s for s in self.requests if matches(s.params, s.lang, match)]

    def count(self, match: dict | None = None) -> int:
        """How many requests matched."""
        return len(self.seen(match))

    @property
    def unmatched(self) -> list[Seen]:
        """Requests no recording or rule answered (a test-setup problem)."""
        with self._lock:
            return [s for s in self.requests if s.outcome == "unmatched"]

    # -- answering -----------------------------------------------------------------
    def best_recording(self, params: dict) -> Recording | None:
        """The closest recording for a request, or None."""
        scored = [(s, r) for r in self.recordings if (s := _score(params, r.params)) is not None]
        return max(scored, key=lambda x: x[0])[1] if scored else None

    def _take_rule(self, params: dict, lang: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if (rule.remaining is None or rule.remaining > 0) and matches(params, lang, rule.match):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    return rule
        return None

    def _log(self, seen: Seen) -> None:
        with self._lock:
            self.requests.append(seen)

    def answer(self, lang: str, params: dict) -> tuple[str, Rule | None, int, bytes, str]:
        """(outcome, rule, status, body, content type) for a request, before any fault is applied."""
        rule = self._take_rule(params, lang)
        if rule and rule.kind == "respond":
            return "respond", rule, rule.status, rule.body, "application/json; charset=utf-8"
        if rule and rule.kind in ("drip", "drip-headers", "huge"):
            rec = self.best_recording(params)
            return f"fault:{rule.kind}", rule, 200, rec.body if rec else b"{}", "application/json; charset=utf-8"
        if rule and rule.kind == "file":
            rec = self.by_file[rule.file]
            return f"file:{rec.file}", rule, rec.status, rec.body, rec.content_type
        rec = self.best_recording(params)
        if rec is None:
            body = json.dumps({"replay-error": f"no recording matches {params}"}).encode()
            return "unmatched", rule, 404, body, "application/json"
        return f"file:{rec.file}", rule, rec.status, rec.body, rec.content_type


def _make_handler(server: WikiReplayServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def handle(self) -> None:
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client hung up, e.g. closed its connection without reading an error page

        def _send(self, status: int, body: bytes, ctype: str, headers: dict | None = None, cut: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if cut:  # the promised length never arrives
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(body)

        def _drip(self, body: bytes, delay: float) -> None:
            """The headers at once, then the body one byte every `delay` s (until done or the client hangs up)."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for i in range(len(body)):
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                server._sent(1)
                time.sleep(delay)

        def _drip_headers(self, body: bytes, delay: float) -> None:
            """The status line and headers one byte every `delay` s."""
            head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                    .encode())
            for i in range(len(head)):
                self.wfile.write(head[i:i + 1])
                self.wfile.flush()
                time.sleep(delay)
            self.wfile.write(body)

        def _huge(self, size: int, announce: bool) -> None:
            """`size` bytes of an unterminated JSON string, in 64 KiB writes (chunked unless `announce`)."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            if announce:
                self.send_header("Content-Length", str(size))
            else:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            head = b'{"batchcomplete":"","query":{"search":[{"title":"'
            block = b"x" * 65536
            sent = 0
            while sent < size:
                data = (head if sent == 0 else block)[: size - sent]
                self.wfile.write(data if announce else f"{len(data):x}\r\n".encode() + data + b"\r\n")
                sent += len(data)
                server._sent(len(data))
            if not announce:
                self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True

        def do_GET(self) -> None:  # http.server's naming
            server._answering(+1)
            try:
                self._answer()
            finally:
                server._answering(-1)

        def _answer(self) -> None:
            url = urlsplit(self.path)
            m = re.fullmatch(r"/([^/]+)/w/api\.php", url.path)
            params = dict(parse_qsl(url.query, keep_blank_values=True))
            agent = self.headers.get("User-Agent", "")
            if not m:
                server._log(Seen("", params, "unmatched", 404, agent))
                self._send(404, b'{"replay-error": "unknown path"}', "application/json")
                return
            lang = m.group(1)
            outcome, rule, status, body, ctype = server.answer(lang, params)
            try:
                if rule is None or rule.kind in ("respond", "file"):
                    server._log(Seen(lang, params, outcome, status, agent))
                    self._send(status, body, ctype, rule.headers if rule else None)
                elif rule.kind == "timeout":
                    server._log(Seen(lang, params, "fault:timeout", None, agent))
                    time.sleep(rule.delay)
                    self.close_connection = True
                elif rule.kind in ("drip", "drip-headers", "huge"):
                    server._log(Seen(lang, params, outcome, 200, agent))
                    if rule.kind == "drip":
                        self._drip(body, rule.delay)
                    elif rule.kind == "drip-headers":
                        self._drip_headers(body, rule.delay)
                    else:
                        self._huge(rule.size, rule.announce)
                    self.close_connection = True
                elif rule.kind == "truncated":
                    server._log(Seen(lang, params, "fault:truncated", status, agent))
                    self._send(status, body, ctype, cut=True)
                else:  # "429", "5xx", "status"
                    server._log(Seen(lang, params, f"fault:{rule.status}", rule.status, agent))
                    text = f"<html><body>Fault injected by the test: HTTP {rule.status}</body></html>".encode()
                    self._send(rule.status, text, "text/html; charset=utf-8", rule.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (e.g. after its read timeout)

    return Handler
