"""`make run` on a fresh clone says what it is installing and about how long it takes before pip's quiet minutes
(issue 28: it printed nothing for ~3 minutes)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_the_install_step_says_what_it_does_and_how_long_before_pip_runs(tmp_path):
    venv = tmp_path / "venv"  # a virtual environment that does not exist yet: the first `make run`
    run = subprocess.run(["make", "-n", f"VENV={venv}", f"{venv}/.installed"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    first_pip = next(i for i, line in enumerate(lines) if " -m pip install" in line)
    said = " ".join(line for line in lines[:first_pip] if line.startswith("echo "))
    assert "Installing DocChat's packages" in said, lines
    assert re.search(r"about \d+-\d+ minutes", said), said
