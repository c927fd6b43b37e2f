"""Where DocChat runs besides a Linux checkout, checked here as far as this machine can: the compose profile that uses
the host's Ollama, the Streamlit Community Cloud entry point deployed from main, and the wheel check for macOS and
Windows (scripts/check_wheels.sh, run by .ci/run)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CLOUD = ROOT / "deploy" / "streamlit-cloud"
ENTRY = CLOUD / "streamlit_app.py"
UV = ROOT / ".venv" / "bin" / "uv"
# Community Cloud's dependency files, in the order it prefers them within one folder (docs.streamlit.io, "App
# dependencies"); it looks in the entry point's folder first, then at the repository's root.
DEPENDENCY_FILES = ("uv.lock", "Pipfile", "environment.yml", "requirements.txt", "pyproject.toml")


# -- docker compose: the host's Ollama ------------------------------------------------------------------------------
def test_the_host_ollama_profile_points_the_app_at_the_host():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    host = services["app-host-ollama"]
    assert host["profiles"] == ["host-ollama"]
    assert host["environment"]["OLLAMA_HOST"] == "http://host.docker.internal:11434"
    assert "host.docker.internal:host-gateway" in host["extra_hosts"]
    assert set(host["depends_on"]) == {"qdrant"}, "no Ollama container: the host's Ollama answers"
    app = services["app"]
    same = ("build", "image", "ports", "volumes")
    assert {k: host[k] for k in same} == {k: app[k] for k in same}, "the same image, port and library as `app`"
    shared = {k: v for k, v in app["environment"].items() if k != "OLLAMA_HOST"}
    assert {k: host["environment"][k] for k in shared} == shared
    default = {name for name, s in services.items() if not s.get("profiles")}
    assert "app-host-ollama" not in default and "app" in default


# -- Streamlit Community Cloud from main ----------------------------------------------------------------------------
def test_the_cloud_entry_point_has_its_own_requirements_chosen_first():
    """Community Cloud takes the first dependency file in the entry point's folder: ours is requirements.txt with
    nothing it would prefer beside it, so the root's requirements.txt (CUDA torch on Linux) is never read."""
    assert ENTRY.is_file()
    present = [name for name in DEPENDENCY_FILES if (CLOUD / name).exists()]
    assert present == ["requirements.txt"]
    assert any(line.startswith("torch @ https://download.pytorch.org/whl/cpu/")
               for line in (CLOUD / "requirements.txt").read_text().splitlines())


def test_the_cloud_entry_point_reaches_main_s_own_code():
    """rag_core, ui and pages beside the entry point are links to the repository's folders (no copies, no sys.path
    edits), and the entry point runs the repository's app.py."""
    for name in ("rag_core", "ui", "pages"):
        link = CLOUD / name
        assert link.is_symlink() and os.readlink(link) == f"../../{name}", name  # relative: works in any clone
        assert link.resolve() == (ROOT / name).resolve()
    # Streamlit puts the entry point's folder first on the import path: there, the packages are found through the links
    where = subprocess.run([sys.executable, "-c", "import rag_core, ui; print(rag_core.__file__); print(ui.__file__)"],
                           cwd=CLOUD, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert [Path(line).parent.parent for line in where.stdout.split()] == [CLOUD, CLOUD]
    source = ENTRY.read_text()
    assert "sys.path" not in source and 'parents[2] / "app.py"' in source and "runpy.run_path" in source
    assert (ROOT / ".streamlit" / "config.toml").is_file(), "Community Cloud reads the root's config only"


# -- wheels for macOS and Windows -----------------------------------------------------------------------------------
def test_ci_runs_the_wheel_check_and_make_lint_checks_macos_and_windows():
    assert "sh scripts/check_wheels.sh" in (ROOT / ".ci" / "run").read_text()
    lint = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "mypy --platform darwin" in lint and "mypy --platform win32" in lint
    assert any(line.startswith("uv==") for line in (ROOT / "requirements-dev.txt").read_text().splitlines())


@pytest.mark.slow
@pytest.mark.skipif(not UV.exists() or shutil.which("sh") is None, reason="uv not installed (make install-dev)")
def test_a_pin_without_a_wheel_fails_the_check_naming_it(tmp_path):
    """torch 2.13 has no wheel for Intel Macs (DocChat no longer needs it there): a requirements file pinning it fails
    the check, which says which platform and which pin (needs PyPI)."""
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("numpy==2.4.6\ntorch==2.13.0\n")
    done = subprocess.run(["sh", "scripts/check_wheels.sh", str(reqs)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TARGETS": "x86_64-apple-darwin", "PYTHONS": "3.11",
                                            "UV": str(UV)})
    if "Failed to fetch" in done.stderr or "dns error" in done.stderr.lower():
        pytest.skip("the package registry cannot be reached")
    assert done.returncode == 1
    assert f"FAILED: {reqs} does not install from wheels on macOS on Intel (x86_64), Python 3.11" in done.stderr
    assert "torch==" in done.stderr and "no wheels with a matching platform tag" in done.stderr


def test_requirements_install_from_wheels_on_intel_macs():
    """Without torch, every pin of requirements.txt has a wheel for Intel Macs again (issue 38; needs PyPI)."""
    done = subprocess.run(["sh", "scripts/check_wheels.sh"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TARGETS": "x86_64-apple-darwin", "PYTHONS": "3.11",
                               "MACOSX_DEPLOYMENT_TARGET": "13.0", "UV": str(UV)})
    if "Failed to fetch" in done.stderr or "dns error" in done.stderr.lower():
        pytest.skip("the package registry cannot be reached")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ok: every pin in requirements.txt has a wheel for macOS on Intel (x86_64), Python 3.11" in done.stdout


_RESOLVED = """
import json, sys
from streamlit import config
config._main_script_path = sys.argv[1]
opts = config.get_config_options(force_reparse=True)
print(json.dumps({k: opts[k].value for k in ("server.address", "runner.postScriptGC", "server.maxUploadSize")}))
"""


@pytest.mark.parametrize(("entry", "address"), [(ENTRY, "0.0.0.0"), (ROOT / "app.py", "127.0.0.1")])
def test_the_cloud_entry_listens_in_its_container_while_a_laptop_stays_on_loopback(entry, address):
    """Run from the root as Community Cloud does: the entry point's script-level config makes it listen on every
    interface of its container, while `streamlit run app.py` on a laptop keeps the root's 127.0.0.1; every other
    option of the root file applies to both."""
    import json
    proc = subprocess.run([sys.executable, "-c", _RESOLVED, str(entry)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")})
    assert proc.returncode == 0, proc.stderr
    resolved = json.loads(proc.stdout.strip().splitlines()[-1])
    assert resolved == {"server.address": address, "runner.postScriptGC": False, "server.maxUploadSize": 200}
