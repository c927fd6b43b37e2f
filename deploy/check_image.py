"""Build the image's Python environment and start its command without a Docker engine (scripts/check_image.sh).

What the Dockerfile does, done here step by step from what `deploy.image` reads out of it:
  COPY . /app        the build context `.dockerignore` leaves, copied to WORK/app
  RUN pip install …  the same pip commands, flags and ENV, into a clean virtual environment (WORK/venv) made from
                     the machine's Python 3.11 (the image's base is python:3.11.x-slim)
  useradd, /data     emulated: a writable WORK/data and WORK/home owned by the USER's uid (when run as root)
  RUN (as USER)      every RUN after the last USER (the Space's sample embedding), as that uid
  ENTRYPOINT + CMD   run as that uid from WORK/app, on a free loopback port instead of 8501 on 0.0.0.0
  HEALTHCHECK        its URL must answer 200 and its own command must exit 0
With --browser, Chromium (Playwright, from the repository's .venv) also opens the app and waits until the page and,
in demo mode, the three samples are shown: the time from start to a usable page.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from deploy.image import ROOT, copy_context, summary

BROWSER_SCRIPT = r"""
import sys, time
from playwright.sync_api import sync_playwright
url, samples, chromium = sys.argv[1], [s for s in sys.argv[2].split("|") if s], sys.argv[3]
start = time.monotonic()
with sync_playwright() as p:
    b = p.chromium.launch(executable_path=chromium)
    page = b.new_page()
    page.goto(url + "/library")
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=300_000)
    for s in samples:
        page.get_by_text(s).first.wait_for(timeout=300_000)
    b.close()
print(round(time.monotonic() - start, 1))
"""
SAMPLES = "DocChat demo guide|The Zen of Python|Python (programming language)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log(msg: str) -> None:
    sys.stderr.write(f"[check_image] {msg}\n")
    sys.stderr.flush()


def _subst(text: str, paths: dict[str, str]) -> str:
    for old, new in paths.items():
        text = text.replace(old, new)
    return text


def _as_user(uid: int | None) -> list[str]:
    """The prefix that runs a command as `uid` (nothing when we are not root)."""
    if uid is None:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def _wait_health(url: str, proc: subprocess.Popen, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"the app exited with code {proc.returncode} before its health check answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - start
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer 200 within {timeout:.0f} s")


def check(args: argparse.Namespace) -> dict:
    """Run the whole check; returns what was measured (raises SystemExit with a sentence on failure)."""
    work = Path(args.work).resolve()
    if work.exists() and any(work.iterdir()):
        raise SystemExit(f"{work} is not empty")
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o755)
    root = ROOT
    if args.space:
        space = work / "space"
        subprocess.run(["sh", str(ROOT / "deploy/huggingface/prepare.sh"), str(space)], check=True,
                       env={**os.environ, "PYTHON": sys.executable}, stdout=subprocess.DEVNULL)
        root = space
    info = summary(root / "Dockerfile")
    app, data, home = work / "app", work / "data", work / "home"
    venv = Path(args.venv).resolve() if args.venv else work / "venv"
    files = copy_context(app, root)
    result: dict = {"dockerfile": str(root / "Dockerfile"), "context_files": len(files), "base": info["from"]}
    for d in (data, home):
        d.mkdir()
    paths = {info["workdir"]: str(app), info["env"].get("DOCCHAT_DATA_DIR", "/data"): str(data)}

    # RUN pip install …: the same commands and flags, with the Dockerfile's ENV
    t = time.monotonic()
    if args.venv:  # an environment a previous run installed (--keep): the install step is skipped
        _log(f"reusing {venv}; pip commands not run")
    else:
        subprocess.run([args.python, "-m", "venv", str(venv)], check=True, stdout=sys.stderr)
        pip_env = {**os.environ, **info["env"]}
        if args.reuse_cache:  # the image builds with PIP_NO_CACHE_DIR=1; here pip's cache saves the downloads
            pip_env.pop("PIP_NO_CACHE_DIR", None)
        for cmd in info["pip"]:
            _log("pip " + " ".join(cmd))
            subprocess.run([str(venv / "bin/pip"), *cmd], check=True, cwd=app, env=pip_env, stdout=sys.stderr)
        result["install_s"] = round(time.monotonic() - t, 1)
    # apt-get install runs as root on the image's Debian; here the same packages must already be on the machine
    missing = [pkg for pkg in info["apt"] if subprocess.run(["dpkg", "-s", pkg], capture_output=True).returncode]
    result["apt_packages"] = {"wanted": info["apt"], "missing_here": missing}
    if missing:
        _log("not installed on this machine (the image installs them with apt-get): " + " ".join(missing))
    result["python"] = subprocess.run([str(venv / "bin/python"), "-c", "import platform; print(platform.python_version())"],
                                      capture_output=True, text=True, check=True).stdout.strip()

    # the non-root USER: its uid owns the app, data and home folders, as COPY --chown and useradd make them
    uid = None
    if os.geteuid() == 0:
        uid = int(info["user"].split(":")[0]) if info["user"].split(":")[0].isdigit() else 1000
        for d in (app, data, home):
            subprocess.run(["chown", "-R", f"{uid}:{uid}", str(d)], check=True)
    result["uid"] = uid if uid is not None else os.geteuid()
    run_env = {k: _subst(v, paths) for k, v in info["env"].items()}
    run_env.update(PATH=f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", HOME=str(home), LANG="C.UTF-8")
    run_env.update(dict(kv.split("=", 1) for kv in args.env))

    for cmd in info["user_runs"]:  # RUN after USER: e.g. the Space embeds its samples at build time
        cmd = _subst(cmd, paths)
        _log("RUN " + cmd[:120])
        t = time.monotonic()
        subprocess.run([*_as_user(uid), "sh", "-c", cmd], check=True, cwd=app, env=run_env, stdout=sys.stderr)
        result.setdefault("user_runs_s", []).append(round(time.monotonic() - t, 1))

    # ENTRYPOINT + CMD, on a free loopback port
    port = _free_port()
    command = [*info.get("entrypoint", []), *info["cmd"]]
    command = [c.replace("--server.port=8501", f"--server.port={port}")
               .replace("--server.address=0.0.0.0", "--server.address=127.0.0.1") for c in command]
    log_path = work / "app.log"
    _log("start: " + " ".join(command))
    t0 = time.monotonic()
    proc = subprocess.Popen([*_as_user(uid), *command], cwd=app, env=run_env, stdout=log_path.open("wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        health_url = info["health_url"].replace(":8501", f":{port}")
        result["health_s"] = round(_wait_health(health_url, proc, args.timeout), 1)
        probe = [c.replace(":8501", f":{port}") for c in info["healthcheck"]]
        rc = subprocess.run([*_as_user(uid), *probe], cwd=app, env=run_env, timeout=30, stdout=sys.stderr).returncode
        if rc != 0:
            raise SystemExit(f"the HEALTHCHECK command exited with {rc}")
        result["healthcheck_exit"] = rc
        if args.browser:
            samples = SAMPLES if run_env.get("DOCCHAT_MODE") == "demo" else ""
            out = subprocess.run([str(ROOT / ".venv/bin/python"), "-c", BROWSER_SCRIPT, f"http://127.0.0.1:{port}",
                                  samples, args.chromium], capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                raise SystemExit("the page did not become ready: " + out.stderr[-2000:])
            result["first_page_ready_s"] = round(time.monotonic() - t0, 1)
        written = sorted(p.relative_to(data).as_posix() for p in data.iterdir())
        result["data_dir_after_start"] = written
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    errors = [ln for ln in log_path.read_text(errors="replace").splitlines() if "Traceback" in ln]
    if errors:
        raise SystemExit(f"the app logged a traceback (see {log_path})")
    return result


def main() -> int:
    """Parse the options, run the check, print the result as JSON."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--space", action="store_true", help="check the Hugging Face Space built by prepare.sh")
    p.add_argument("--work", default=None, help="an empty folder to work in (default: a new one under /tmp)")
    system = next((p for p in ("/usr/bin/python3.11", "/usr/local/bin/python3.11") if os.path.exists(p)), None)
    p.add_argument("--python", default=system or shutil.which("python3.11") or "python3",
                   help="the Python 3.11 to build the environment from (one the app's uid can read)")
    p.add_argument("--no-cache", dest="reuse_cache", action="store_false",
                   help="download every package again, as the image build does (PIP_NO_CACHE_DIR=1)")
    p.add_argument("--venv", default=None, help="reuse this installed environment (from a --keep run) instead")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra variables for the app")
    p.add_argument("--browser", action="store_true", help="also open the app in Chromium and time the first page")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the health check")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    args = p.parse_args()
    made = args.work is None
    if made:
        args.work = subprocess.run(["mktemp", "-d", "/tmp/docchat-image.XXXXXX"], capture_output=True, text=True,
                                   check=True).stdout.strip()
        os.rmdir(args.work)
    try:
        result = check(args)
    finally:
        if made and not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)
    sys.stdout.write(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
