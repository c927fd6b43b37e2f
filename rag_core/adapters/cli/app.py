"""`docchat app`: start the web app (Streamlit) with DocChat's own Streamlit settings, from any folder.

The project's settings live in .streamlit/config.toml beside app.py (found by rag_core/core/app_files.py, installed
or in a checkout). Streamlit merges config files from ~/.streamlit, the working folder and (recent releases) the
script's folder, and STREAMLIT_* variables override them all; so that the project's values hold whatever the folder,
the Streamlit release and the environment, this command passes each option of that file as Streamlit's own
command-line flag (`--runner.postScriptGC=false`), which outranks every other source; --port and --address replace
the file's values. Streamlit runs as a child process (`python -m streamlit run .../app.py`) in the caller's working
folder, with DOCCHAT_DATA_DIR set to the library folder as an absolute path. Ctrl-C in a terminal reaches both
processes; an interrupt sent to this process alone is passed on to Streamlit on POSIX (Windows has no such signal for
one process, and its console's Ctrl-C reaches both). Streamlit stops on the first signal (a second one does no harm);
this process waits for it, and stops it itself (terminate, then kill) when it does not stop in time, or when this
process is asked to end (SIGTERM). Nothing here is specific to one operating system.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_core.core.app_files import CONFIG, app_dir, is_app_dir
from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError

log = logging.getLogger(__name__)
DEFAULT_PORT = 8501
DEFAULT_ADDRESS = "127.0.0.1"  # this computer only; 0.0.0.0 shares the app with the network
STOP_GRACE_S = 10.0  # how long Streamlit may take to stop before it is terminated, then killed


class _Terminated(Exception):
    """This process was asked to end (SIGTERM): stop Streamlit, then return."""


def port_number(text: str) -> int:
    """argparse type: a TCP port, 1-65535."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: use a whole number from 1 to 65535")
    return port


def _flag_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def config_flags(config: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> list[str]:
    """Streamlit command-line flags setting every option of a parsed config.toml, `overrides` ("server.port") winning."""
    options: dict[str, Any] = {}

    def walk(table: Mapping[str, Any], prefix: str) -> None:
        for key, value in table.items():
            if isinstance(value, Mapping):
                walk(value, f"{prefix}{key}.")
            else:
                options[prefix + key] = value

    walk(config, "")
    options.update(overrides or {})
    flags = []
    for key, value in options.items():
        for item in value if isinstance(value, list) else [value]:  # a list option: the flag once per item
            flags.append(f"--{key}={_flag_value(item)}")
    return flags


def streamlit_command(folder: Path, port: int, address: str) -> list[str]:
    """The command starting Streamlit on `folder`/app.py with `folder`'s .streamlit/config.toml applied."""
    config = tomllib.loads((folder / CONFIG).read_text(encoding="utf-8"))
    flags = config_flags(config, {"server.port": port, "server.address": address})
    return [sys.executable, "-m", "streamlit", "run", str(folder / "app.py"), *flags]


def app_environment(base: Mapping[str, str], data_dir: Path, demo: bool) -> dict[str, str]:
    """The child's environment: `base` with the library folder (absolute) and, for --demo, the hosted-demo mode."""
    env = dict(base)
    env["DOCCHAT_DATA_DIR"] = str(data_dir.expanduser().resolve())
    if demo:
        env["DOCCHAT_MODE"] = "demo"
    return env


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated


def _stop(child: subprocess.Popen, terminate: bool, grace_s: float) -> int:
    """Stop `child`: wait `grace_s` for it (terminated first if `terminate`), then terminate it, then kill it."""
    try:
        if terminate:
            child.terminate()
        for next_step in ((child.kill,) if terminate else (child.terminate, child.kill)):
            try:
                return child.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                log.warning("Streamlit did not stop within %.0f s: %s", grace_s, next_step.__name__)
                next_step()
        return child.wait()
    except (KeyboardInterrupt, _Terminated):  # asked again while stopping: no more waiting
        child.kill()
        return child.wait()


def run_streamlit(command: list[str], env: Mapping[str, str], grace_s: float = STOP_GRACE_S) -> int:
    """Run Streamlit until it ends; Ctrl-C or SIGTERM stop it cleanly. Returns its exit code."""
    child = subprocess.Popen(command, env=dict(env))
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main_thread else None
    try:
        return child.wait()
    except KeyboardInterrupt:  # Ctrl-C: Streamlit stops on its own (a terminal's Ctrl-C reached it already)
        if os.name == "posix":
            child.send_signal(signal.SIGINT)  # in case this process alone was interrupted
        code = _stop(child, terminate=False, grace_s=grace_s)
        # Stopped as asked: a success, whatever code Streamlit's interrupted shutdown gave (two interrupts, the
        # terminal's and ours, end it with 254 on a busy machine).
        log.debug("Streamlit ended with %s after Ctrl-C", code)
        return 0
    except _Terminated:
        return _stop(child, terminate=True, grace_s=grace_s)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        if child.poll() is None:  # any other way out of here: never leave Streamlit running
            _stop(child, terminate=True, grace_s=grace_s)


def cmd_app(args: argparse.Namespace, settings: Settings) -> int:
    """Start the web app on --address:--port with the project's Streamlit settings; returns Streamlit's exit code."""
    folder = app_dir()
    if not is_app_dir(folder):
        raise DocChatError(f"The web app's files (app.py and {CONFIG.as_posix()}) are missing from this installation "
                           f"({folder}). Reinstall DocChat, e.g. `pipx install --force .` in its folder.")
    command = streamlit_command(folder, args.port, args.address)
    env = app_environment(os.environ, settings.library.data_dir, args.demo)
    log.info("Starting %s with DOCCHAT_DATA_DIR=%s", " ".join(command), env["DOCCHAT_DATA_DIR"])
    return run_streamlit(command, env)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the `app` subcommand."""
    p = sub.add_parser("app", help="start the web app in your browser's reach (Streamlit), from any folder",
                       description="Start DocChat's web app with its own Streamlit settings, whatever the working "
                                   "folder. Open the address it prints; Ctrl-C stops it.")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--address", default=DEFAULT_ADDRESS,
                   help=f"address to listen on (default {DEFAULT_ADDRESS}: this computer only; 0.0.0.0 shares the "
                        "app with your network)")
    p.add_argument("--data-dir", help="library folder (default: $DOCCHAT_DATA_DIR or ./data)")
    p.add_argument("--demo", action="store_true", help="the hosted demo's behaviour (DOCCHAT_MODE=demo): "
                                                       "per-visitor libraries and the shared samples")
    p.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    p.set_defaults(func=cmd_app, json=False)
