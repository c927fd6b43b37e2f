"""Document kinds (DocKind) and model providers (Provider) are StrEnums whose values are the strings earlier releases
stored and read from the environment; the code compares against the members, never against bare strings."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag_core.core.config import Provider, Settings, load_settings
from rag_core.core.models import DocKind
from rag_core.ingest.originals import KINDS_KEPT
from rag_core.service.render import shows_pages

ROOT = Path(__file__).resolve().parents[2]
KIND_WORDS = "|".join(k.value for k in DocKind)
PROVIDER_WORDS = "|".join(p.value for p in Provider)
# `kind == "pdf"`, `provider != "ollama"`, `kind in ("pdf", ...)`, `chat_provider == "openai"` ...
BARE = re.compile(rf"""(?:kind|provider)\s*(?:[!=]=|(?:not\s+)?in\s*\(?)\s*["'](?:{KIND_WORDS}|{PROVIDER_WORDS})["']""")


def test_values_are_the_stored_strings():
    assert [p.value for p in Provider] == ["ollama", "openai"]
    assert Provider.OLLAMA == "ollama" and f"{Provider.OPENAI}:gpt" == "openai:gpt"
    assert DocKind("wikipedia") is DocKind.WIKIPEDIA and DocKind.PDF == "pdf"
    assert KINDS_KEPT == ("pdf", "image") and shows_pages("pdf") and shows_pages("image") and not shows_pages("md")


@pytest.mark.parametrize(("env", "provider", "name"), [
    ({}, Provider.OLLAMA, "llama3.2:3b"),
    ({"DOCCHAT_CHAT_MODEL": "ollama:qwen2.5:7b"}, Provider.OLLAMA, "qwen2.5:7b"),
    ({"DOCCHAT_CHAT_MODEL": "openai:qwen2.5-7b-instruct"}, Provider.OPENAI, "qwen2.5-7b-instruct"),
])
def test_the_chat_provider_is_an_enum(env, provider, name):
    settings = load_settings(env)
    assert settings.chat_provider is provider and settings.chat_model_name == name
    assert Settings(chat_model=f"{provider}:{name}").chat_provider is provider


def test_no_bare_string_compares_kinds_or_providers():
    found = []
    for folder in ("rag_core", "ui", "pages"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if BARE.search(line.split("#", 1)[0]):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "compare with DocKind / Provider members:\n" + "\n".join(found)
