"""`docchat app`: its options, the Streamlit command and environment it builds, how it stops Streamlit, and where the
app's files are found (rag_core/adapters/cli/app.py, rag_core/core/app_files.py); the package list in pyproject.toml."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from rag_core.adapters.cli import app as app_cmd
from rag_core.adapters.cli.main import build_parser, main
from rag_core.core import app_files
from rag_core.demo.samples import SAMPLES_DIR

ROOT = Path(__file__).resolve().parents[2]
PROJECT_CONFIG = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))


def _project_options() -> dict[str, object]:
    return {f"{section}.{key}": value for section, table in PROJECT_CONFIG.items() for key, value in table.items()}


def test_defaults_and_options_are_parsed():
    args = build_parser().parse_args(["app"])
    assert (args.port, args.address, args.data_dir, args.demo) == (8501, "127.0.0.1", None, False)
    args = build_parser().parse_args(["app", "--port", "9000", "--address", "0.0.0.0", "--data-dir", "lib", "--demo"])
    assert (args.port, args.address, args.data_dir, args.demo) == (9000, "0.0.0.0", "lib", True)


@pytest.mark.parametrize("port", ["0", "65536", "-1", "eighty"])
def test_a_port_that_is_no_port_is_refused(port, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["app", "--port", port])
    assert exit_.value.code == 2 and "is not a port" in capsys.readouterr().err


def test_config_flags_set_every_option_and_the_overrides_win():
    config = {"server": {"address": "127.0.0.1", "headless": True}, "runner": {"postScriptGC": False},
              "theme": {"sidebar": {"base": "dark"}}, "server2": {"watch": ["a", "b"]}}
    assert app_cmd.config_flags(config, {"server.address": "0.0.0.0", "server.port": 9}) == [
        "--server.address=0.0.0.0", "--server.headless=true", "--runner.postScriptGC=false",
        "--theme.sidebar.base=dark", "--server2.watch=a", "--server2.watch=b", "--server.port=9"]


def test_the_command_runs_the_apps_script_with_the_projects_config():
    command = app_cmd.streamlit_command(ROOT, 9123, "0.0.0.0")
    assert command[:5] == [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py")]
    flags = dict(flag[2:].split("=", 1) for flag in command[5:])
    assert len(flags) == len(command) - 5  # each option once
    expected = {key: str(value).lower() if isinstance(value, bool) else str(value)
                for key, value in _project_options().items()}
    expected.update({"server.port": "9123", "server.address": "0.0.0.0"})
    assert flags == expected
    assert flags["runner.postScriptGC"] == "false" and flags["server.fileWatcherType"] == "none"


def test_the_environment_names_the_library_folder_absolutely_and_the_mode(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = {"PATH": "/bin", "DOCCHAT_MODE": "local"}
    env = app_cmd.app_environment(base, Path("lib"), demo=False)
    assert env == {"PATH": "/bin", "DOCCHAT_MODE": "local", "DOCCHAT_DATA_DIR": str(tmp_path / "lib")}
    assert app_cmd.app_environment(base, tmp_path, demo=True)["DOCCHAT_MODE"] == "demo"
    assert base == {"PATH": "/bin", "DOCCHAT_MODE": "local"}  # not changed


def test_main_starts_streamlit_with_the_options_given(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(app_cmd, "run_streamlit", lambda command, env: started.append((command, env)) or 7)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DOCCHAT_MODE", raising=False)
    assert main(["app", "--port", "8777", "--data-dir", "my library", "--demo"]) == 7
    ((command, env),) = started
    assert command[4] == str(ROOT / "app.py")
    assert "--server.port=8777" in command and "--server.address=127.0.0.1" in command
    assert env["DOCCHAT_DATA_DIR"] == str(tmp_path / "my library") and env["DOCCHAT_MODE"] == "demo"
    started.clear()
    monkeypatch.setenv("DOCCHAT_DATA_DIR", str(tmp_path / "from env"))
    assert main(["app"]) == 7
    assert started[0][1]["DOCCHAT_DATA_DIR"] == str(tmp_path / "from env") and "DOCCHAT_MODE" not in started[0][1]


def test_missing_app_files_are_one_sentence(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(app_cmd, "app_dir", lambda: tmp_path)
    assert main(["app"]) == 2
    err = capsys.readouterr().err
    assert "web app's files" in err and "Reinstall DocChat" in err and "Traceback" not in err


def test_streamlits_exit_code_is_returned():
    assert app_cmd.run_streamlit([sys.executable, "-c", "raise SystemExit(3)"], os.environ) == 3


def test_stopping_terminates_a_child_that_keeps_running():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = time.monotonic()
    try:
        code = app_cmd._stop(child, terminate=True, grace_s=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert code is not None and child.poll() is not None and time.monotonic() - started < 30


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM and SIGINT to one process: POSIX signals (on Windows "
                                               "SIGTERM is a hard kill and Ctrl-C reaches the whole console)")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_to_docchat_app_alone_stops_streamlit_too(sig):
    # run_streamlit in its own process, with a stand-in for Streamlit that reports its pid and then waits; the
    # signal goes to that process only (not its group), so only passing it on stops the stand-in within the grace.
    # Ctrl-C as a terminal delivers it: whatever this test process inherited (a worker process of a parallel run may
    # have SIGINT ignored, and an ignored signal stays ignored across exec), the parent starts with Python's handler.
    script = ("import os, signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "from rag_core.adapters.cli.app import run_streamlit\n"
              "child = [sys.executable, '-c', 'import os, time; print(os.getpid(), flush=True); time.sleep(60)']\n"
              "sys.exit(run_streamlit(child, os.environ, grace_s=30))\n")
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        started = time.monotonic()
        parent.send_signal(getattr(signal, sig))
        parent.wait(timeout=60)  # it returned once its child had stopped
        assert time.monotonic() - started < 20, "the signal was not passed on: Streamlit ran until the grace ended"
        if sig == "SIGINT":  # stopped as asked: success, though the stand-in died of the interrupt (code -2 -> 254)
            assert parent.returncode == 0
        with pytest.raises(ProcessLookupError):
            os.kill(child_pid, 0)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_the_app_files_are_the_checkouts_here_and_the_installed_package_elsewhere(tmp_path, monkeypatch):
    assert app_files.app_dir() == ROOT and SAMPLES_DIR == ROOT / "samples"
    installed = tmp_path / "site-packages" / "docchat_app"
    (installed / ".streamlit").mkdir(parents=True)
    (installed / "app.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(app_files, "_CHECKOUT", tmp_path / "no checkout")
    monkeypatch.setattr(app_files.importlib.util, "find_spec",
                        lambda name: SimpleNamespace(submodule_search_locations=[str(installed)])
                        if name == app_files.APP_PACKAGE else None)
    assert app_files.app_dir() == tmp_path / "no checkout"  # no config.toml yet: not the app's folder
    (installed / ".streamlit" / "config.toml").write_text("", encoding="utf-8")
    assert app_files.app_dir() == installed


def test_pyproject_lists_every_package_and_maps_the_apps_files():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts) for top in ("rag_core", "ui")
             for p in (ROOT / top).rglob("__init__.py")}
    listed = set(setuptools["packages"])
    assert found - listed == set(), "add these packages to [tool.setuptools] packages in pyproject.toml"
    mapped = setuptools["package-dir"]
    assert listed - found == set(mapped) == {"docchat_app", "docchat_app.pages", "docchat_app.samples"}
    assert app_files.is_app_dir(ROOT / mapped["docchat_app"])
    assert (ROOT / mapped["docchat_app.pages"] / "chat.py").is_file()
    assert ROOT / mapped["docchat_app.samples"] == SAMPLES_DIR
    assert setuptools["package-data"]["docchat_app"] == [app_files.CONFIG.as_posix()]
