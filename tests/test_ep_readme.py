"""README's mxrt.ep example (its own module: test_ep.py's one-rank group lives for that whole module)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

ROOT = Path(__file__).resolve().parent.parent


def test_readme_ep_example_runs():
    """README's mxrt.ep example in a world of one (gloo here; it creates and destroys its own default group)."""
    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    text = (ROOT / "README.md").read_text()
    section = text[text.index("<!-- api:ep -->") : text.index("<!-- /api:ep -->")]
    blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]
    assert len(blocks) == 1 and "ep.combine(" in blocks[0]
    env = {"MASTER_PORT": str(29600 + os.getpid() % 300), "RANK": "0", "WORLD_SIZE": "1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        exec(compile(blocks[0], "README.md:ep", "exec"), {})
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
