"""The notebooks in notebooks/ are the source (no generator): each executes headless, top to bottom (they end with
correctness cells), is stored without outputs, and is listed in the README."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernel imports the mxrt of this checkout, installed or not
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_clean(path: Path) -> None:
    # outputs and execution counts stay out of git: diffs show only source changes, and the test above runs them
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [i for i, c in enumerate(nb["cells"]) if c.get("outputs") or c.get("execution_count") is not None]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs; clear them (Kernel > Restart & Clear Output)"


def test_readme_lists_every_notebook() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in NOTEBOOKS if f"notebooks/{p.name}" not in readme]
    assert not missing, f"README.md does not mention {missing}"


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 1
