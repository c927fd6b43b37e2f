"""The documented way to start the small test model by hand works (issue 28: the docstring's `.venv/bin/python
tests/llm_server.py` failed with "No module named 'tests'"). Each documented command is run with --help: argparse
answers before the model loads, after the module's imports that failed."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"\.venv/bin/python (-m tests\.llm_server|\S*llm_server\.py)")


def documented() -> list[tuple[str, str]]:
    """(where, how it is started) for each command line starting tests/llm_server in the README and its docstring."""
    found = []
    for rel in ("README.md", "tests/llm_server.py"):
        found += [(rel, m.group(1)) for m in COMMAND.finditer((ROOT / rel).read_text(encoding="utf-8"))]
    return found


def test_the_documented_commands_starting_the_test_model_work():
    commands = documented()
    assert {where for where, _ in commands} == {"README.md", "tests/llm_server.py"}, commands
    for where, how in commands:
        run = subprocess.run([sys.executable, *how.split(), "--help"], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0, f"{where}: `.venv/bin/python {how}` fails: {run.stderr.strip()[-300:]}"
        assert run.stdout.startswith("usage: python -m tests.llm_server"), run.stdout
