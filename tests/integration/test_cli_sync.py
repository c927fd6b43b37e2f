"""`docchat sync FOLDER [--dry-run] [--json]` and `docchat sync-undo DOC_ID` on a real folder and library."""
from __future__ import annotations

import json

import pytest

from rag_core.adapters.cli.main import main


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "Reports"
    (root / "sub").mkdir(parents=True)
    (root / "keeper.txt").write_text("The lighthouse keeper lights the lamp each evening for the passing ships.")
    (root / "sub" / "bees.md").write_text("# Bees\n\nHoney bees dance to show the hive where the flowers grow.")
    (root / "skip.xyz").write_text("not a kind DocChat reads")
    return root


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dry_run_then_apply_then_changes(folder, tmp_path, capsys):
    data = str(tmp_path / "data")
    code, out, _ = run(capsys, "sync", str(folder), "--dry-run", "--data-dir", data)
    assert code == 0
    assert "2 new, 0 changed, 0 removed, 0 unchanged" in out and "new       keeper.txt" in out
    assert "sub/bees.md" in out and "Nothing was changed (--dry-run)." in out
    code, out, _ = run(capsys, "list", "--json", "--data-dir", data)
    assert json.loads(out)["documents"] == []  # a dry run changes nothing and links nothing
    assert not (tmp_path / "data" / "linked_folders.json").exists()

    code, out, err = run(capsys, "sync", str(folder), "--data-dir", data)  # /tmp is outside home and data: asked
    assert code == 2 and "outside your home folder" in err and "Link it anyway" in err

    code, out, _ = run(capsys, "sync", str(folder), "--json", "--yes", "--data-dir", data)
    got = json.loads(out)
    assert code == 0 and got["counts"] == {"new": 2, "changed": 0, "removed": 0, "unchanged": 0, "wikipedia": 0}
    assert [a["status"] for a in got["applied"]] == ["added", "added"] and not got["dry_run"]

    (folder / "keeper.txt").write_text("The lighthouse keeper now keeps a ledger of every passing ship.")
    (folder / "sub" / "bees.md").unlink()
    code, out, _ = run(capsys, "sync", str(folder), "--dry-run", "--json", "--data-dir", data)
    got = json.loads(out)
    assert got["counts"] == {"new": 0, "changed": 1, "removed": 1, "unchanged": 0, "wikipedia": 0}
    assert (got["changed"], got["removed"], got["new"]) == (["keeper.txt"], ["sub/bees.md"], [])

    code, out, _ = run(capsys, "sync", str(folder), "--data-dir", data)  # linked now: no question
    assert code == 0 and "Applied 2 of 2 changes." in out and "sync-undo" in out
    code, out, _ = run(capsys, "list", "--json", "--data-dir", data)
    assert [d["title"] for d in json.loads(out)["documents"]] == ["keeper"]

    code, out, _ = run(capsys, "sync", str(folder), "--dry-run", "--data-dir", data)
    assert "0 new, 0 changed, 0 removed, 1 unchanged" in out and "The library is up to date." in out


def test_sync_undo_restores_a_removed_document(folder, tmp_path, capsys):
    data = str(tmp_path / "data")
    assert run(capsys, "sync", str(folder), "--yes", "--data-dir", data)[0] == 0
    code, out, _ = run(capsys, "list", "--json", "--data-dir", data)
    bees = next(d for d in json.loads(out)["documents"] if d["title"] == "Bees")
    (folder / "sub" / "bees.md").unlink()
    assert run(capsys, "sync", str(folder), "--data-dir", data)[0] == 0
    code, out, _ = run(capsys, "list", "--json", "--data-dir", data)
    assert "Bees" not in [d["title"] for d in json.loads(out)["documents"]]
    code, out, _ = run(capsys, "sync-undo", bees["doc_id"], "--data-dir", data)
    assert code == 0 and "Restored “Bees”" in out
    code, out, _ = run(capsys, "list", "--json", "--data-dir", data)
    assert "Bees" in [d["title"] for d in json.loads(out)["documents"]]


def test_a_missing_folder_is_one_sentence(tmp_path, capsys):
    code, out, err = run(capsys, "sync", str(tmp_path / "gone"), "--yes", "--data-dir", str(tmp_path / "data"))
    assert code == 2 and "is not there any more" in err and "Traceback" not in err
    code, out, err = run(capsys, "sync", str(tmp_path / "gone"), "--json", "--dry-run",
                         "--data-dir", str(tmp_path / "data"))
    assert code == 2 and "is not there any more" in json.loads(out)["error"]
    assert not (tmp_path / "data" / "linked_folders.json").exists() or \
        "gone" not in (tmp_path / "data" / "linked_folders.json").read_text()
