"""Compile kernel specs with ``cupy.RawModule`` (NVRTC on CUDA, hiprtc on ROCm) and cache them in process.

CuPy owns the disk cache (``CUPY_CACHE_DIR``); it keys on the source string and the options, and the source
string is self-contained and stamped (:mod:`mxrt.runtime.source`), so an edited header recompiles.
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..config import dump_dir
from ..errors import CompileError, UnsupportedArchError
from .arch import Arch
from .kernel_spec import Defines, KernelSpec
from .source import stamped_source

_CACHE: dict[tuple[KernelSpec, Defines, str], Any] = {}
_LOCK = threading.Lock()


def compile_options(arch: Arch, d: Defines) -> tuple[str, ...]:
    """NVRTC / hiprtc options for a target and a define set."""
    flags = tuple(f"-D{k}={v}" for k, v in d)
    if arch.vendor == "nvidia":
        return ("-std=c++17", f"-arch={arch.target}", *flags)
    return ("-std=c++17", "-O3", f"--offload-arch={arch.offload_arch or arch.target}", *flags)


def _dump(spec: KernelSpec, d: Defines, arch: Arch, code: str, options: tuple[str, ...]) -> Path:
    folder = Path(dump_dir() or tempfile.gettempdir()) / "mxrt_failed_kernels"
    folder.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256((code + " ".join(options)).encode()).hexdigest()[:12]
    path = folder / f"{spec.symbol}_{arch.target}_{tag}.hip"
    path.write_text(f"// options: {' '.join(options)}\n{code}")
    return path


def build(spec: KernelSpec, d: Defines, arch: Arch, *, use_cache: bool = True, nonce: str = "") -> Any:
    """The ``cupy.RawKernel`` of ``spec`` specialised by the define set ``d`` for ``arch``.

    ``nonce`` adds a comment line to the source (used by ``mxrt info --compile`` to force a cold build).
    """
    spec.check_defines(d)
    if not spec.supports(arch.target):
        raise UnsupportedArchError(f"{spec.symbol}: target {arch.target} is not among {spec.targets}")
    key = (spec, d, arch.target)
    if use_cache and not nonce:
        with _LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit
    import cupy

    code = stamped_source(spec.file, arch.target) + (f"// nonce {nonce}\n" if nonce else "")
    options = compile_options(arch, d)
    try:
        module = cupy.RawModule(code=code, options=options)
        kernel = module.get_function(spec.symbol)  # compiles here: RawModule is lazy
    except Exception as exc:  # CuPy raises CompileException, or a driver error when loading fails
        path = _dump(spec, d, arch, code, options)
        log = exc.get_message() if hasattr(exc, "get_message") else str(exc)
        raise CompileError(
            f"{spec.symbol}: compile failed for target {arch.target} with defines {dict(d)}\n"
            f"options: {' '.join(options)}\nsource dumped to: {path}\nlog:\n{log}"
        ) from exc
    if use_cache and not nonce:
        with _LOCK:
            _CACHE[key] = kernel
    return kernel


_SMEM: dict = {}  # (spec, defines, target) -> the dynamic shared memory the cached kernel was opened up to


def build_with_smem(spec: KernelSpec, d: Defines, arch: Arch, smem: int) -> Any:
    """:func:`build`, with the kernel's dynamic shared-memory limit raised to ``smem`` bytes (once per size: the
    attribute is a driver call, kept off the per-call path). The launchers of kernels above 48 KB use this."""
    kernel = build(spec, d, arch)
    key = (spec, d, arch.target)
    if _SMEM.get(key, -1) < smem:
        if kernel.max_dynamic_shared_size_bytes < smem:
            kernel.max_dynamic_shared_size_bytes = smem
        _SMEM[key] = smem
    return kernel


def compile_times(spec: KernelSpec, d: Defines, arch: Arch) -> tuple[float, float]:
    """(cold, warm) seconds to build ``spec``: cold here, with a source CuPy's disk cache has never seen; warm
    in a fresh Python process building the same source (CuPy's disk-cache hit, no in-memory cache), timed
    around the build call only."""
    import subprocess
    import sys

    nonce = f"{time.time_ns()}"
    t0 = time.perf_counter()
    build(spec, d, arch, nonce=nonce)
    cold = time.perf_counter() - t0
    child = (
        "import time\n"
        "from mxrt.runtime import KernelSpec, get_arch, build\n"
        f"spec = {spec!r}\n"
        "arch = get_arch()\n"
        "t0 = time.perf_counter()\n"
        f"build(spec, {d!r}, arch, nonce={nonce!r})\n"
        "print(time.perf_counter() - t0)\n"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    return cold, float(out.stdout.strip().splitlines()[-1])


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
