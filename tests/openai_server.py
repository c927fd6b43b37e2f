"""A scriptable OpenAI-compatible HTTP server for tests: the wire protocol of LM Studio, llama.cpp's server, vLLM and
hosted endpoints on 127.0.0.1, no model.

It speaks what the official `openai` client and langchain-openai's ChatOpenAI use:
  GET  /v1/models             {"object": "list", "data": [{"id": …}]}
  POST /v1/chat/completions   `"stream": true`: Server-Sent Events (chunked), one chat.completion.chunk per delta,
                              a last chunk with finish_reason, then `data: [DONE]`; otherwise one chat.completion.
                              Unknown model -> 404 {"error": {"message", "type", "code": "model_not_found"}}.
Replies are scripted with tests.ollama_server.Reply (text, chunks, delays, a dropped connection, an error event,
an HTTP error, done_reason "stop" or "length"); every request is kept (`requests`, `chat_requests`).
`WebPageServer` answers every request with an HTML page: the wrong kind of server at the model's address.

    with OpenAIServer(models=["local-model"]) as srv:
        srv.script(Reply("Paris is the capital [1]."))
        settings = Settings(chat_model="openai:local-model", openai_base_url=srv.url + "/v1")
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from tests.ollama_server import Reply, Responder, ScriptedHandler, ScriptedServer
from tests.protocol_server import JSONHandler, ThreadedServer

WEB_PAGE = "<!doctype html><html><head><title>Router</title></head><body><h1>Welcome</h1></body></html>"


class OpenAIServer(ScriptedServer):
    """Threaded OpenAI-compatible look-alike on 127.0.0.1:<free port>; use as a context manager. `url` + "/v1" is
    the base URL a client is given."""

    thread_name = "openai-test-server"
    chat_path = "/v1/chat/completions"

    def __init__(self, models: Iterable[str] = ("local-model",), default: Reply | Responder | None = None,
                 token: str | None = None) -> None:
        super().__init__(models, default, token)

    @property
    def base_url(self) -> str:
        """The address an OpenAI client is given (OPENAI_BASE_URL)."""
        return f"{self.url}/v1"


def _error(message: str, kind: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(ScriptedHandler):
    owner: OpenAIServer
    unauthorised_body = _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key")

    def do_GET(self) -> None:  # http.server naming
        self._record(None)
        if not self._authorised():
            return
        if self.path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 1_760_000_000, "owned_by": "test"} for m in self.owner.models]})
        else:
            self._send_json(404, _error(f"Unknown path {self.path}", "invalid_request_error"))

    def do_POST(self) -> None:
        body = self._read_body()
        self._record(body)
        if not self._authorised():
            return
        if self.path != "/v1/chat/completions":
            self._send_json(404, _error(f"Unknown path {self.path}", "invalid_request_error"))
            return
        self._chat(body if isinstance(body, dict) else {})

    def _sse(self, obj: Any) -> None:
        """One Server-Sent Event as one HTTP chunk."""
        data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _chat(self, body: dict) -> None:
        owner = self.owner
        model = body.get("model", "")
        if model not in owner.models:
            self._send_json(404, _error(f"The model `{model}` does not exist.", "invalid_request_error",
                                        "model_not_found"))
            return
        reply = owner._next_reply(body)
        owner.sleep(reply.delay_first)
        if reply.status != 200:
            self._send_json(reply.status, _error(reply.error_body, "server_error"))
            return
        ident, created, deltas = f"chatcmpl-{time.monotonic_ns()}", int(time.time()), reply.deltas()
        reason = "length" if reply.done_reason == "length" else "stop"
        if not body.get("stream"):
            self._send_json(200, {
                "id": ident, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(deltas)},
                             "finish_reason": reason}],
                "usage": {"prompt_tokens": 10, "completion_tokens": len(deltas), "total_tokens": 10 + len(deltas)}})
            return

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._sse(chunk({"role": "assistant", "content": ""}))
            for i, delta in enumerate(deltas):
                if reply.disconnect_after is not None and i >= reply.disconnect_after:
                    self.close_connection = True  # no terminating chunk: the client sees a cut body
                    return
                if i:
                    owner.sleep(reply.delay_between)
                self._sse(chunk({"content": delta}))
            if reply.disconnect_after is not None:
                self.close_connection = True
                return
            if reply.error:
                self._sse(_error(reply.error, "server_error"))
            else:
                self._sse(chunk({}, reason))
                self._sse(b"[DONE]")
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):  # the client went away: fine
            owner.cut_streams += 1
            self.close_connection = True


OpenAIServer.handler = _Handler  # set here: the handler class is defined after the server


class _WebPageHandler(JSONHandler):
    def do_GET(self) -> None:  # http.server naming
        self._send_bytes(200, WEB_PAGE.encode(), "text/html; charset=utf-8")

    def do_POST(self) -> None:
        self._read_body()
        self.do_GET()


class WebPageServer(ThreadedServer):
    """Answers every request with a small HTML page (a router's or a website's): not a model server."""

    handler = _WebPageHandler
    thread_name = "web-page-test-server"


__all__ = ["OpenAIServer", "Reply", "WebPageServer"]
