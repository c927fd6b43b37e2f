"""Offline, proven at the system-call level: the ingest -> search -> ask flow and the app's start-up with one page load
run under `strace -f` inside a fresh network namespace (only loopback up), and every connect/sendto/sendmsg a process
of ours makes is checked: any address that is not loopback fails the test — DNS from native code included, which a
Python audit hook cannot see. The namespace also means nothing can actually leave this machine while we look."""
from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACE = ["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=connect,sendto,sendmsg"]
_ADDR = re.compile(r'sa_family=(AF_INET6?)\b.*?(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")')

pytestmark = [pytest.mark.linux_only("strace in a network namespace made with unshare -n"),
              pytest.mark.skipif(not (shutil.which("strace") and shutil.which("unshare") and shutil.which("ip")
                                      and os.geteuid() == 0),
                                 reason="needs root, strace, unshare and ip (make test installs strace)")]


def outside_attempts(trace: str) -> list[str]:
    """The traced calls that address anything but loopback (one line each)."""
    bad = []
    for line in trace.splitlines():
        m = _ADDR.search(line)
        if m is None:
            continue  # AF_UNIX, AF_NETLINK, or a call on an already-connected socket
        addr = m.group(2) or m.group(3)
        try:
            ip = ipaddress.ip_address(addr)
        except ValueError:
            bad.append(line)
            continue
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        if not (ip.is_loopback or (mapped is not None and mapped.is_loopback) or ip.is_unspecified):
            bad.append(line.strip())
    return bad


def _in_namespace(command: str, timeout: float) -> subprocess.CompletedProcess:
    """Run a shell command in a new network namespace with only loopback up."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "QDRANT_", "OLLAMA_",
                                                                      "DOCCHAT_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    return subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up && " + command], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


PIPELINE = textwrap.dedent('''
    import sys, tempfile
    from pathlib import Path
    from ollama_server import OllamaServer, Reply
    from openai_server import OpenAIServer
    from rag_core.answer import generation
    from rag_core.core.config import Settings
    from rag_core.service.library import Library
    from rag_core.demo.hub import DemoHub, new_session_id

    docs = Path(sys.argv[1]) / "tests" / "fixtures" / "documents"
    with OllamaServer(models=["llama3.2:3b"]) as srv, tempfile.TemporaryDirectory() as tmp:
        srv.script(Reply("Beautiful is better than ugly [1]."))
        settings = Settings(data_dir=Path(tmp) / "data", ollama_host=srv.url, ollama_model="llama3.2:3b")
        lib = Library(settings)
        assert lib.ingest_path(docs / "docx_headings_toc.docx").status == "added"
        assert lib.ingest_path(docs / "pdf_text_outline-bookmarks_4-pages.pdf").status == "added"
        for name in sys.argv[2:]:  # one file of every other kind DocChat reads (images through OCR)
            result = lib.ingest_path(docs / name)
            assert result.status == "added", (name, result.error)
        assert lib.search("Which is better, beautiful or ugly?", k=3)
        assert generation.answer(lib, "Which is better, beautiful or ugly?", settings).mode == "model"
        with OpenAIServer(models=["local-model"]) as compat:  # DOCCHAT_CHAT_MODEL=openai:… (LM Studio, vLLM, …)
            compat.script("Beautiful is better than ugly [1].")
            other = settings.with_overrides(chat_model="openai:local-model", openai_base_url=compat.base_url)
            assert generation.answer(lib, "Which is better, beautiful or ugly?", other).mode == "model"
            assert compat.chat_requests
        lib.close()
        demo = Library(settings.with_overrides(mode="demo", collection="demo"), embedder=lib.embedder)
        hub = DemoHub(demo)
        assert all(r.status == "added" for r in hub.load_samples())
        assert hub.session(new_session_id()).answer("What does the Zen of Python say about errors?").passages
        demo.close()
    print("PIPELINE OK")
''')


# One committed fixture of each kind besides PDF and Word (tests/fixtures/documents).
EVERY_KIND = ["office_slides_table-notes-untitled.pptx", "office_workbook_budget-formula-hidden.xlsx",
              "sheet_semicolon_latin1.csv", "odt_headings-lists-table-footnote.odt", "odp_four-slides_notes-table.odp",
              "ods_three-sheets_hidden-formulas.ods", "rtf_memo_headings-list-table.rtf", "image_page_harbour.png",
              "web_saved-page_nav-cookie-table.html", "epub_toc_three-chapters.epub", "eu_capitals.md"]


@pytest.mark.slow
def test_ingest_search_and_ask_make_no_outside_connection(tmp_path):
    log = tmp_path / "trace.log"
    script = tmp_path / "pipeline.py"
    script.write_text(PIPELINE)
    files = " ".join(EVERY_KIND)
    proc = _in_namespace(f"{' '.join(TRACE)} -o {log} {sys.executable} {script} {ROOT} {files}", timeout=900)
    assert "PIPELINE OK" in proc.stdout, proc.stderr[-3000:]
    trace = log.read_text()
    assert "connect(" in trace  # the trace really saw our sockets (the loopback Ollama server)
    assert outside_attempts(trace) == []


APP = textwrap.dedent('''
    import os, signal, subprocess, sys, time, urllib.request
    from pathlib import Path
    import psutil
    from playwright.sync_api import sync_playwright
    root, log, data, port = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    trace = ["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o", log]

    def group_alive(pgid):
        # True while a live (not zombie) process of the group remains.
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                    return True
            except (OSError, psutil.Error):
                continue  # gone meanwhile
        return False

    def end_group(pgid, sig, seconds):
        # Send `sig` to the whole group and wait until none of it is left; False if some is still there.
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + seconds
        while group_alive(pgid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    # Its own process group: terminated, strace detaches and would leave the traced server running.
    app = subprocess.Popen(trace + [sys.executable, "-m", "streamlit", "run", str(root / "app.py"),
                                    "--server.port", port, "--server.address", "127.0.0.1"],
                           cwd=root, env={**os.environ, "DOCCHAT_DATA_DIR": data},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.2)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
            page = browser.new_page()
            page.goto(url)
            page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=120_000)
            page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=120_000)
            print("TITLE", page.inner_text('[data-testid="stMainBlockContainer"] h1'))
            browser.close()
        time.sleep(2)  # idle for a moment: nothing may phone home after the page is drawn either
    finally:
        if not end_group(app.pid, signal.SIGTERM, 30):
            end_group(app.pid, signal.SIGKILL, 30)
        app.wait(timeout=30)
        if not group_alive(app.pid):
            print("GROUP GONE")
''')


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed")
def test_app_start_and_a_page_load_make_no_outside_connection(tmp_path):
    log = tmp_path / "app-trace.log"
    script = tmp_path / "app.py"
    script.write_text(APP)
    data = tmp_path / "data"
    try:
        proc = _in_namespace(f"{sys.executable} {script} {ROOT} {log} {data} 8765", timeout=600)
    finally:
        left = _servers_of(data)
        for p in left:  # never leave a Streamlit server running after the test, whatever happened
            p.kill()
    assert left == [], "the traced Streamlit server outlived the test"
    assert "TITLE Chat with your documents" in proc.stdout, (proc.stdout[-2000:], proc.stderr[-3000:])
    assert "GROUP GONE" in proc.stdout, proc.stdout[-2000:]
    trace = log.read_text()
    assert outside_attempts(trace) == []


def _servers_of(data: Path) -> list[psutil.Process]:
    """The live (not zombie) processes started with DOCCHAT_DATA_DIR=data: the app server and anything it started."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get("DOCCHAT_DATA_DIR") == str(data):
                found.append(p)
        except psutil.Error:
            continue  # gone meanwhile, or not ours to read
    return found


def test_the_check_catches_native_dns_and_outside_connections(tmp_path):
    """The same trace and check flag a process that looks a name up (libc's resolver, native code) or connects out."""
    log = tmp_path / "bad.log"
    code = ("import socket\n"
            "for call in (lambda: socket.getaddrinfo('example.com', 80),\n"
            "             lambda: socket.create_connection(('192.0.2.1', 443), timeout=1)):\n"
            "    try:\n        call()\n    except OSError:\n        pass\n")
    script = tmp_path / "bad.py"
    script.write_text(code)
    # The namespace has no route out, so the lookup and the connection fail locally; the trace still sees them.
    proc = _in_namespace(f"{' '.join(TRACE)} -o {log} {sys.executable} {script}", timeout=60)
    assert proc.returncode == 0, proc.stderr
    bad = outside_attempts(log.read_text())
    assert any("192.0.2.1" in line for line in bad), bad
    assert outside_attempts('123 connect(3, {sa_family=AF_INET, sin_port=htons(11434), '
                            'sin_addr=inet_addr("127.0.0.1")}, 16) = 0') == []
    assert outside_attempts('9 sendto(5, "x", 1, 0, {sa_family=AF_INET6, sin6_port=htons(53), '
                            'inet_pton(AF_INET6, "2001:db8::1", &sin6_addr)}, 28) = -1') != []
