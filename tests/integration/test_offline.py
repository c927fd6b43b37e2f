"""Offline, proven: a full ingest -> search -> ask (and the demo's sample library) runs in a fresh Python process in
which every DNS lookup and every connection to a non-loopback address is refused by an audit hook installed before
anything is imported. The hook also records each attempt, so an attempt that some library would swallow (and fall
back from silently) still fails the test. The scripted Ollama-compatible server runs on 127.0.0.1 in that process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

GUARD = r'''
import ipaddress, socket, sys

ATTEMPTS = []

class OfflineViolation(ConnectionRefusedError):
    """Raised instead of any network access that leaves this machine."""

def _loopback(host):
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False

def _hook(event, args):
    if event == "socket.getaddrinfo":
        host = args[0]
    elif event in ("socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr"):
        host = args[0]
    elif event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        address = args[1]
        if not isinstance(address, tuple):  # AF_UNIX and friends: local by definition
            return
        host = address[0]
    else:
        return
    if not _loopback(host):
        ATTEMPTS.append(f"{event} {host!r}")
        raise OfflineViolation(f"offline test: {event} to {host!r} blocked")

sys.addaudithook(_hook)
'''

CHILD = GUARD + r'''
import json, os, sys, tempfile
from pathlib import Path

ROOT = Path(sys.argv[1])
out = {}

# 1. the guard works: a lookup and a direct connection to the internet both fail and are recorded
for probe in (lambda: socket.getaddrinfo("en.wikipedia.org", 443),
              lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("1.1.1.1", 443))):
    try:
        probe()
        out.setdefault("probe_failures", []).append("not blocked")
    except OfflineViolation:
        pass
out["probes_recorded"] = list(ATTEMPTS)
ATTEMPTS.clear()

# 2. rag_core switches the Hugging Face libraries to offline by itself
assert "HF_HUB_OFFLINE" not in os.environ and "TRANSFORMERS_OFFLINE" not in os.environ
import rag_core.store.embeddings  # noqa: E402
out["hf_offline"] = [os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE")]

# 3. the whole pipeline against the scripted Ollama on loopback
from ollama_server import OllamaServer, Reply  # noqa: E402
from rag_core.answer import generation  # noqa: E402
from rag_core.core.config import Settings  # noqa: E402
from rag_core.service.library import Library  # noqa: E402
from rag_core.retrieve.search import retrieve  # noqa: E402
from rag_core.demo.hub import DemoHub, new_session_id  # noqa: E402

docs = ROOT / "tests" / "fixtures" / "documents"
with OllamaServer(models=["llama3.2:3b"]) as srv, tempfile.TemporaryDirectory() as tmp:
    srv.script(Reply("Beautiful is better than ugly [1]."), Reply("Beautiful is better than ugly [1]."))
    settings = Settings(data_dir=Path(tmp) / "data", ollama_host=srv.url, ollama_model="llama3.2:3b",
                        llm_timeout_s=30)
    lib = Library(settings)
    out["ingest"] = [lib.ingest_path(docs / n).status
                     for n in ("docx_headings_toc.docx", "pdf_text_outline-bookmarks_4-pages.pdf")]
    hits = retrieve(lib.store, "Which is better, beautiful or ugly?", k=3)
    out["top_hit"] = hits[0].chunk.text[:80] if hits else None
    ans = generation.answer(lib, "Which is better, beautiful or ugly?", settings)
    out["answer"] = {"mode": ans.mode, "text": ans.text, "citations": len(ans.citations)}
    # the hosted demo: shared samples from local files, a private session, an answer with the API key
    demo = settings.with_overrides(mode="demo", ollama_api_key="k", collection="demo")
    lib.close()
    demo_lib = Library(demo, embedder=lib.embedder)
    hub = DemoHub(demo_lib)
    out["samples"] = [r.status for r in hub.load_samples()]
    s = hub.session(new_session_id())
    out["demo_answer"] = s.answer("Which is better, beautiful or ugly?").mode
    demo_lib.close()
    out["chat_requests"] = len(srv.chat_requests)

out["attempts"] = list(ATTEMPTS)
print("RESULT " + json.dumps(out))
'''


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "QDRANT_", "OLLAMA_", "DOCCHAT_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    return env


def _run(code: str, *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=_child_env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_full_pipeline_runs_with_the_network_blocked():
    proc = _run(CHILD, str(ROOT))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    out = json.loads(lines[-1][len("RESULT "):])

    assert "probe_failures" not in out
    assert out["probes_recorded"] == ["socket.getaddrinfo 'en.wikipedia.org'", "socket.connect '1.1.1.1'"]
    assert out["hf_offline"] == ["1", "1"]
    assert out["ingest"] == ["added", "added"]
    assert out["top_hit"] and "Beautiful is better than ugly" in out["top_hit"]
    assert out["answer"]["mode"] == "model" and out["answer"]["citations"] == 1
    assert out["samples"] == ["added", "added", "added"]
    assert out["demo_answer"] == "model"
    assert out["chat_requests"] == 2
    assert out["attempts"] == [], f"network access outside loopback was attempted: {out['attempts']}"


def test_the_guard_fails_a_process_that_goes_online():
    """The same guard stops (and records) code that does try the network, even when the caller swallows the error."""
    code = GUARD + r'''
import urllib.request
try:
    urllib.request.urlopen("http://example.com/", timeout=2)
except OSError:
    pass  # a library that silently falls back
print("ATTEMPTS", ATTEMPTS)
'''
    proc = _run(code, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "ATTEMPTS [\"socket.getaddrinfo 'example.com'\"]" in proc.stdout


def test_streamlit_does_not_phone_home():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["browser"]["gatherUsageStats"] is False
    app = (ROOT / "app.py").read_text()
    assert app.index('os.environ.setdefault("HF_HUB_OFFLINE", "1")') < app.index("import streamlit")
