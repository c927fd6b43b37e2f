"""The shared plumbing of the test HTTP servers (tests/ollama_server.py, tests/llm_server.py, tests/wiki_server.py).

`ThreadedServer` runs a `ThreadingHTTPServer` on a background thread (start/stop, context manager, `url`);
`JSONHandler` is a quiet HTTP/1.1 request handler with JSON bodies, JSON answers and chunked NDJSON streams.

    class MyServer(ThreadedServer):
        handler = MyHandler            # a JSONHandler subclass; `self.owner` is the server inside it
        thread_name = "my-test-server"
"""
from __future__ import annotations

import json
import sys
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


def now_iso() -> str:
    """The current UTC time the way Ollama writes created_at (…Z)."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class JSONHandler(BaseHTTPRequestHandler):
    """Request handler base: HTTP/1.1, no access log, JSON in and out, chunked NDJSON streaming."""

    protocol_version = "HTTP/1.1"
    owner: Any  # the ThreadedServer that runs this handler (set by ThreadedServer.make_handler)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _read_body(self) -> Any:
        """The request body as JSON; text if it is not JSON; None if there is none."""
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw.decode("utf-8", "replace")

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_bytes(status, json.dumps(obj).encode(), "application/json; charset=utf-8")

    def _send_text(self, status: int, text: str) -> None:
        self._send_bytes(status, text.encode(), "text/plain; charset=utf-8")

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _line(self, obj: Any) -> None:
        """One NDJSON line as one HTTP chunk."""
        data = json.dumps(obj).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _QuietHTTPServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that says nothing when a client hangs up (a test that stops a stream, a client that
    gives up): socketserver would print a traceback into the test output for what is expected there."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about a connection the client closed; report anything else as usual."""
        if isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            return
        super().handle_error(request, client_address)


class ThreadedServer:
    """A threaded HTTP server on host:port (port 0 = a free one) serving `handler`; use as a context manager."""

    handler: type[BaseHTTPRequestHandler] = JSONHandler
    thread_name = "test-http-server"

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """http://host:port of the running server."""
        assert self._httpd is not None, "server not started"
        return f"http://{self.host}:{self._httpd.server_address[1]}"

    def make_handler(self) -> type[BaseHTTPRequestHandler]:
        """The handler class bound to this server (as `owner`)."""
        return type("Handler", (self.handler,), {"owner": self})

    def start(self) -> Self:
        """Listen and serve on a daemon thread."""
        self._httpd = _QuietHTTPServer((self.host, self.port), self.make_handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["JSONHandler", "ThreadedServer", "now_iso"]
