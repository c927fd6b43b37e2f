"""benchmarks/multilingual.py: `--model NAME` runs everything with DOCCHAT_EMBEDDING_MODEL=NAME, in libraries of its
own; the figures come per direction and language."""
from __future__ import annotations

import json
import os
import sys

from benchmarks import multilingual as ml
from rag_core.adapters import evaluation as ev
from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_EMBEDDING_MODEL, Settings, load_settings


def test_model_option_sets_the_embedding_model_for_the_whole_run(monkeypatch):
    monkeypatch.setenv(ml.MODEL_ENV, "")  # remembered as it was, so what model_settings sets is undone after the test
    monkeypatch.delenv(ml.MODEL_ENV)
    settings = ml.model_settings(MULTILINGUAL_EMBEDDING_MODEL)  # not the default: a run that ignored it would show
    assert os.environ[ml.MODEL_ENV] == MULTILINGUAL_EMBEDDING_MODEL
    assert settings.library.embedding_model == MULTILINGUAL_EMBEDDING_MODEL
    assert load_settings().library.embedding_model == MULTILINGUAL_EMBEDDING_MODEL  # read again later: the same


def test_without_the_option_the_settings_choose(monkeypatch):
    monkeypatch.setenv(ml.MODEL_ENV, DEFAULT_EMBEDDING_MODEL)
    assert ml.model_settings(None).library.embedding_model == DEFAULT_EMBEDDING_MODEL


def test_main_passes_the_model_on(monkeypatch, capsys):
    monkeypatch.setenv(ml.MODEL_ENV, "")  # main may set it: undone after the test
    seen = []
    monkeypatch.setattr(ml, "run", lambda model=None, path=ml.SET: seen.append((model, path.name)) or {
        "model": model, "multilingual": False, "xx-en ru": {"n": 1, "recall@5": 1.0}})
    monkeypatch.setattr(sys, "argv", ["multilingual", "--model", DEFAULT_EMBEDDING_MODEL, "--json"])
    ml.main()
    assert seen == [(DEFAULT_EMBEDDING_MODEL, "multilingual.jsonl")]
    assert json.loads(capsys.readouterr().out)["model"] == DEFAULT_EMBEDDING_MODEL
    other = ml.SET.with_name("multilingual_scripts.jsonl")
    monkeypatch.setattr(sys, "argv", ["multilingual", "--json", "--set", str(other)])
    ml.main()
    assert seen[-1] == (None, "multilingual_scripts.jsonl")  # --set names the question set


def test_each_model_has_its_own_libraries(tmp_path):
    ds = ev.Dataset("xquad", (), (), "fp")
    rows = ml.load_set()
    base = Settings().with_overrides(embedding_model=DEFAULT_EMBEDDING_MODEL)
    english, mixed = ml.library_settings(ds, rows, base)
    other_english, other_mixed = ml.library_settings(ds, rows, base.with_overrides(embedding_model="other-model"))
    assert english.library.data_dir != other_english.library.data_dir
    assert mixed.library.data_dir != other_mixed.library.data_dir
    assert mixed.library.data_dir != english.library.data_dir
    assert mixed.library.data_dir.name.startswith(english.library.data_dir.name + "-multilingual-")


def test_figures_per_direction_and_language():
    outcomes = [ml.Outcome("xx-en", "ru", "tune", 1, True, True, 1), ml.Outcome("xx-en", "ru", "test", None, False, False, 3),
                ml.Outcome("en-xx", "zh", "test", 7, True, False)]
    figs = ml.grouped(outcomes, lambda o: f"{o.direction} {o.lang}")
    assert figs["xx-en ru"] == {"n": 2, "recall@1": 0.5, "recall@5": 0.5, "told": 0.5, "silent_miss": 0.5,
                                "told_by_passages": 0.5, "english_recall@1": 0.5, "english_recall@5": 1.0}
    assert figs["en-xx zh"]["silent_miss"] == 0.0 and "english_recall@5" not in figs["en-xx zh"]
