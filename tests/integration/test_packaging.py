"""DocChat as an installed package: the wheel carries the web app's files and declares pyproject's dependencies, and
`docchat app` serves the app from a folder outside the checkout with the project's Streamlit settings."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from email.parser import Parser
from pathlib import Path

import psutil
import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PROJECT_CONFIG = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
PROJECT_OPTIONS = {f"{section}.{key}": value for section, table in PROJECT_CONFIG.items() for key, value in table.items()}


def _source_tree(dest: Path) -> Path:
    """A copy of the checkout as `pip install <checkout>` sees it (tracked and new files, without the ignored ones),
    so that building leaves nothing (build/, *.egg-info) in the shared checkout."""
    try:
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                                capture_output=True, timeout=60).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"needs git to list the checkout's files: {e}")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.mark.slow
def test_the_wheel_carries_the_app_and_declares_the_dependencies(tmp_path):
    source = _source_tree(tmp_path / "src")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("docchat-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(z.read(metadata).decode())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert "docchat = rag_core.__main__:main" in z.read(entry_points).decode()
        assert z.read("docchat_app/.streamlit/config.toml") == (ROOT / ".streamlit" / "config.toml").read_bytes()
    app = {"docchat_app/app.py", "docchat_app/pages/chat.py", "docchat_app/pages/library.py",
           "docchat_app/pages/settings.py", *(f"docchat_app/samples/{p.name}" for p in (ROOT / "samples").iterdir()
                                              if p.is_file())}
    assert app <= names, f"missing from the wheel: {sorted(app - names)}"
    code = {p.relative_to(source).as_posix() for top in ("rag_core", "ui") for p in (source / top).rglob("*.py")}
    assert code <= names, f"missing from the wheel: {sorted(code - names)}"
    assert "rag_core/injection/weights.json" in names
    assert not {n for n in names if n.startswith(("tests/", "data/", "benchmarks/", "docchat_app/tests/"))}

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    every = meta.get_all("Requires-Dist") or []
    requires = [r for r in every if "extra ==" not in r]  # the optional extras (docchat[torch]) apart
    assert {str(Requirement(r)) for r in requires} == {str(Requirement(d)) for d in declared}
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert {Requirement(r).name for r in every if "extra ==" in r} == {Requirement(d).name for d in extras["torch"]}
    assert len(requires) == len(declared) > 20


def test_streamlit_takes_the_projects_settings_whatever_the_folder_and_environment(tmp_path):
    # Started from a folder with its own, contrary .streamlit/config.toml and a contrary STREAMLIT_* variable, the
    # command `docchat app` builds must still give Streamlit the project's values (its CLI parses the flags; only
    # the server start is replaced).
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "config.toml").write_text(
        '[runner]\npostScriptGC = true\n[server]\nmaxUploadSize = 1\nfileWatcherType = "auto"\n'
        '[client]\nshowErrorDetails = "full"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    env.update(HOME=str(tmp_path), STREAMLIT_CLIENT_TOOLBAR_MODE="developer", PYTHONPATH=str(ROOT))
    script = ("import json, sys\nfrom unittest import mock\nfrom streamlit import config\n"
              "from streamlit.web import bootstrap, cli\n"
              "from rag_core.adapters.cli.app import streamlit_command\nfrom rag_core.core.app_files import app_dir\n"
              "keys = json.loads(sys.argv[1])\n"
              "def report(*args, **kwargs):\n"
              "    print(json.dumps({k: config.get_option(k) for k in keys}))\n"
              "with mock.patch.object(bootstrap, 'run', report):\n"
              "    cli.main(streamlit_command(app_dir(), 8599, '0.0.0.0')[3:], standalone_mode=False)\n")
    keys = [*PROJECT_OPTIONS, "server.port"]
    out = subprocess.run([sys.executable, "-c", script, json.dumps(keys)], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    applied = json.loads(out.strip().splitlines()[-1])
    assert applied == {**PROJECT_OPTIONS, "server.address": "0.0.0.0", "server.port": 8599}
    assert applied["runner.postScriptGC"] is False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except OSError:
        return None


def _docchat() -> list[str]:
    script = Path(sys.executable).parent / ("docchat.exe" if os.name == "nt" else "docchat")
    return [str(script)] if script.exists() else [sys.executable, "-m", "rag_core"]


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="Ctrl-C is sent as a terminal does: SIGINT to the process group")
def test_docchat_app_serves_from_a_folder_outside_the_checkout_and_stops_on_ctrl_c(tmp_path):
    port, work = _free_port(), tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMLIT_", "DOCCHAT_"))}
    env["HOME"] = str(tmp_path)
    # Started as from a terminal, where Ctrl-C is not ignored (a test run in the background inherits SIGINT ignored,
    # and an ignored signal stays ignored across exec): SIG_DFL, then exec `docchat app` in the same process.
    from_a_terminal = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                       "os.execvp(sys.argv[1], sys.argv[1:])"]
    proc = subprocess.Popen([*from_a_terminal, *_docchat(), "app", "--port", str(port), "--data-dir",
                             str(tmp_path / "lib")], cwd=work,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        started = time.monotonic()
        while _get(f"http://127.0.0.1:{port}/_stcore/health") != (200, "ok"):
            assert proc.poll() is None, f"docchat app exited with code {proc.returncode}"
            assert time.monotonic() - started < 120, "the app did not become healthy within 120 s"
            time.sleep(0.2)
        page = _get(f"http://127.0.0.1:{port}/")
        assert page is not None and page[0] == 200 and '<div id="root">' in page[1], "not the app's page"
        (streamlit,) = psutil.Process(proc.pid).children(recursive=True)
        assert Path(streamlit.cwd()) == work
        assert streamlit.environ()["DOCCHAT_DATA_DIR"] == str(tmp_path / "lib")
        assert str(ROOT / "app.py") in streamlit.cmdline() and "--runner.postScriptGC=false" in streamlit.cmdline()

        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: SIGINT to the whole foreground process group
        assert proc.wait(timeout=30) == 0
        assert not streamlit.is_running(), "Streamlit outlived docchat app"
        assert _get(f"http://127.0.0.1:{port}/_stcore/health") is None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
