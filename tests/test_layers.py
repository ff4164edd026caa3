"""The layers point one way and the import graph has no cycle (STYLE.md 1).

Layers, lowest first: formats -> layouts -> problems -> reference (pure numpy) -> runtime (the only layer that
touches cupy) -> ops (GPU twins) -> api (the public face) -> cli / checks / bench.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "mxrt"
BLOCKED = ("cupy", "cupy_backends", "hip", "torch", "triton", "jax")

#: layer -> its rank; a module may import modules of its own or a lower rank only
RANK = {
    "_version": 0,
    "_kinds": 0,
    "errors": 0,
    "config": 0,
    "codes": 0,
    "formats": 1,
    "layouts": 2,
    "problems": 3,
    "reference": 4,
    "runtime": 5,
    "ops": 6,
    "api": 7,
    "__init__": 8,
    "deep_gemm": 8,  # DeepGEMM-compatible names, beside the package namespace
    "torch": 8,  # the autograd layer, imported only on request
    "ep": 8,  # expert parallelism over torch.distributed, imported only on request
    "checks": 9,
    "bench": 9,
    "cli": 10,
}
PURE = ("formats", "layouts", "problems", "reference")


def test_numpy_layers_import_with_gpu_stacks_blocked() -> None:
    code = (
        "import sys\n"
        f"for m in {BLOCKED!r}: sys.modules[m] = None\n"
        "import mxrt, mxrt.formats, mxrt.layouts, mxrt.problems, mxrt.reference, mxrt.checks, mxrt.api\n"
        "import numpy as np\n"
        "q = mxrt.quantize_mx(np.ones((2, 32), np.float32))\n"
        "d = mxrt.gemm_mx(q, q)\n"
        f"assert not any(sys.modules.get(m) for m in {BLOCKED!r})\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_public_names_exist() -> None:
    import mxrt

    missing = [n for n in mxrt.__all__ if not hasattr(mxrt, n)]
    assert not missing


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every mxrt module ``name`` imports, at module level or inside functions (lazy imports count)."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "mxrt")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            elif (node.module or "").split(".")[0] == "mxrt":
                target = node.module or ""
            else:
                continue
            for a in node.names:  # `from pkg import sub` imports the submodule sub
                sub = f"{target}.{a.name}"
                out.add(sub if sub in modules else target)
    return {m for m in out if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_import_graph_has_no_cycle() -> None:
    """Every module, lazy (function-level) imports included; ``from . import x`` inside a package counts as an
    edge to its ``__init__`` (so a package whose submodules import names from their own ``__init__`` while the
    ``__init__`` imports them is a cycle)."""
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                cycles.append([*stack[stack.index(m) :], m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles[:10])


def test_the_cycle_check_can_fail() -> None:
    """The detector itself: a two-module loop written to a temporary package is reported."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        pkg = Path(d) / "mxrt"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "a.py").write_text("def f():\n    from . import b\n")
        (pkg / "b.py").write_text("from .a import f\n")
        modules = {_module_name_in(p, pkg): p for p in pkg.rglob("*.py")}
        edges = {n: _imports(n, p, modules) for n, p in modules.items()}
        assert "mxrt.b" in edges["mxrt.a"] and "mxrt.a" in edges["mxrt.b"]


def _module_name_in(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts)


def test_layers_point_one_way() -> None:
    """A module imports only modules of its own layer or a lower one (RANK); every layer is ranked."""
    bad = []
    for name, deps in _graph().items():
        layer = _layer(name)
        assert layer in RANK, f"{name}: layer {layer!r} has no rank in tests/test_layers.py"
        for dep in deps:
            if RANK[_layer(dep)] > RANK[layer]:
                bad.append(f"{name} imports {dep}")
    assert not bad, bad


def test_pure_layers_touch_no_gpu_stack() -> None:
    """formats / layouts / problems / reference import neither cupy, hip, torch nor jax (not even lazily)."""
    bad = []
    for name, path in _modules().items():
        if _layer(name) not in PURE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                mods = [node.module or ""]
            bad += [f"{name} imports {m}" for m in mods if m.split(".")[0] in BLOCKED]
    assert not bad, bad
