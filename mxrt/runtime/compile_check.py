"""Offline compile check: build every kernel spec it is given (the cli passes :data:`mxrt.ops.ALL_SPECS`), with
every define set the ops use, for each target, without a GPU. AMD targets use clang from the ``ziglang`` wheel,
NVIDIA targets NVRTC from ``cuda-bindings`` + ``nvidia-cuda-nvrtc`` (``pip install .[compilecheck]``).

Each build gives a :class:`BuildReport`: registers, spills, scratch, LDS/shared bytes and the matrix
instructions found. A build fails on a compiler error, and on AMD also on any spill or scratch use.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import UnsupportedArchError
from .arch import normalize_target, vendor_of
from .kernel_spec import Defines, KernelSpec
from .source import stamped_source

_MMA_AMD = re.compile(r"^\s*(v_mfma\w*|v_smfmac\w*|v_wmma\w*|v_swmmac\w*)", re.M)
_MMA_PTX = re.compile(r"^\s*((?:wgmma\.mma_async|mma\.sync|tcgen05\.mma)[\w.]*)", re.M)


@dataclass(frozen=True)
class BuildReport:
    kernel: str
    target: str
    defines: dict[str, int]
    ok: bool
    registers: dict[str, int] = field(default_factory=dict)  # vgpr/agpr/sgpr (AMD) or regs (NVIDIA)
    spills: int = 0  # AMD: VGPR + SGPR spill count; NVIDIA: spill store + load bytes
    scratch: int = 0  # AMD private segment / NVIDIA stack frame, bytes
    lds: int = 0  # LDS / shared memory, bytes (static)
    mma: list[str] = field(default_factory=list)
    error: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def tools_missing(target: str) -> str | None:
    """Why ``target`` cannot be checked here (a missing wheel), or None."""
    if vendor_of(target) == "amd":
        try:
            import ziglang  # noqa: F401
        except ImportError:
            return "the ziglang wheel is not installed (pip install ziglang)"
        return None
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return "cuda-bindings is not installed (pip install cuda-bindings nvidia-cuda-nvrtc)"
    try:
        nvrtc.nvrtcVersion()
    except Exception as exc:  # libnvrtc not found: the nvidia-cuda-nvrtc wheel is missing
        return f"NVRTC cannot be loaded ({exc}); pip install nvidia-cuda-nvrtc"
    return None


def _define_flags(d: Defines) -> list[str]:
    return [f"-D{k}={v}" for k, v in d]


def _amd_meta(asm: str, symbol: str) -> dict[str, int]:
    """Per-kernel numbers from the amdhsa metadata block of a .s file."""
    start = asm.find(f".name:           {symbol}")
    if start < 0:
        start = asm.find(f".name: {symbol}")
    # the kernel's metadata entry begins at the preceding "  - " list item
    begin = asm.rfind("\n  - ", 0, start) if start >= 0 else -1
    end = asm.find("\n  - ", start) if start >= 0 else -1
    block = asm[begin : end if end > 0 else len(asm)] if begin >= 0 else asm
    out = {}
    for key in (
        "vgpr_count",
        "agpr_count",
        "sgpr_count",
        "vgpr_spill_count",
        "sgpr_spill_count",
        "private_segment_fixed_size",
        "group_segment_fixed_size",
    ):
        m = re.search(rf"\.{key}:\s+(\d+)", block)
        out[key] = int(m.group(1)) if m else -1
    return out


def build_amd(spec: KernelSpec, d: Defines, target: str) -> BuildReport:
    code = stamped_source(spec.file, target)
    with tempfile.TemporaryDirectory(prefix="mxrt_cc_") as tmp:
        src, asm_path = Path(tmp) / "kernel.hip", Path(tmp) / "kernel.s"
        src.write_text(code)
        cmd = [sys.executable, "-m", "ziglang", "clang", "-x", "hip", f"--offload-arch={target}", "-nogpulib"]
        cmd += ["-nogpuinc", "--cuda-device-only", "-O3", "-S", "-std=c++17", *_define_flags(d), str(src)]
        cmd += ["-o", str(asm_path)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not asm_path.is_file():
            return BuildReport(spec.symbol, target, dict(d), False, error=(proc.stderr or proc.stdout)[-4000:])
        asm = asm_path.read_text()
    meta = _amd_meta(asm, spec.symbol)
    spills = max(meta["vgpr_spill_count"], 0) + max(meta["sgpr_spill_count"], 0)
    scratch = max(meta["private_segment_fixed_size"], 0)
    missing = [k for k, v in meta.items() if v < 0]
    error = ""
    if missing:
        error = f"metadata keys not found in the .s: {missing}"
    elif spills or scratch:
        error = f"AMD builds must not spill or use scratch: spills {spills}, scratch {scratch} bytes"
    return BuildReport(
        spec.symbol,
        target,
        dict(d),
        not error,
        registers={"vgpr": meta["vgpr_count"], "agpr": meta["agpr_count"], "sgpr": meta["sgpr_count"]},
        spills=spills,
        scratch=scratch,
        lds=max(meta["group_segment_fixed_size"], 0),
        mma=sorted(set(_MMA_AMD.findall(asm))),
        error=error,
    )


def _nvrtc_text(getter_size, getter, prog) -> str:
    _err, n = getter_size(prog)
    buf = b" " * n
    getter(prog, buf)
    return buf.rstrip(b"\x00 ").decode(errors="replace")


def build_nvidia(spec: KernelSpec, d: Defines, target: str) -> BuildReport:
    from cuda.bindings import nvrtc

    code = stamped_source(spec.file, target).encode()
    _err, prog = nvrtc.nvrtcCreateProgram(code, f"{spec.symbol}.cu".encode(), 0, [], [])
    try:
        opts = [f"--gpu-architecture={target}".encode(), b"-std=c++17", b"--ptxas-options=-v"]
        opts += [f.encode() for f in _define_flags(d)]
        (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        log = _nvrtc_text(nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, prog)
        if res != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return BuildReport(spec.symbol, target, dict(d), False, error=log[-4000:])
        ptx = _nvrtc_text(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, prog)
        _err, cubin_size = nvrtc.nvrtcGetCUBINSize(prog)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    regs = re.search(r"Used (\d+) registers", log)
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    smem = re.search(r"(\d+) bytes smem", log)
    error = "" if regs and frame and cubin_size > 0 else f"no ptxas report / CUBIN in the NVRTC output:\n{log}"
    return BuildReport(
        spec.symbol,
        target,
        dict(d),
        not error,
        registers={"regs": int(regs.group(1)) if regs else -1},
        spills=int(frame.group(2)) + int(frame.group(3)) if frame else -1,
        scratch=int(frame.group(1)) if frame else -1,
        lds=int(smem.group(1)) if smem else 0,
        mma=sorted(set(_MMA_PTX.findall(ptx))),
        error=error,
    )


def build_one(spec: KernelSpec, d: Defines, target: str) -> BuildReport:
    spec.check_defines(d)
    r = build_amd(spec, d, target) if vendor_of(target) == "amd" else build_nvidia(spec, d, target)
    missing = [want for want in spec.expected_mma(target) if r.ok and not any(m.startswith(want) for m in r.mma)]
    if missing:
        error = f"expected matrix instructions {missing} not found; the build has {r.mma}"
        return BuildReport(**{**r.as_dict(), "ok": False, "error": error})
    return r


def run_compile_check(targets: list[str], specs: Sequence[KernelSpec], jobs: int | None = None) -> list[BuildReport]:
    """Build every (spec, define set, target) of ``specs`` (the ops' kernels: :data:`mxrt.ops.ALL_SPECS`); raises
    UnsupportedArchError when a target's tools are missing."""
    norm = [normalize_target(t) for t in targets]
    for t in norm:
        why = tools_missing(t)
        if why:
            raise UnsupportedArchError(f"compile-check: cannot build for {t}: {why}")
    work = [(s, d, t) for t in norm for s in specs if s.supports(t) for d in s.variants]
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        return list(pool.map(lambda w: build_one(*w), work))


def summarize(reports: list[BuildReport]) -> list[dict]:
    """One line per (kernel, target): builds, failures, and the worst registers / spills / scratch / LDS."""
    groups: dict[tuple[str, str], list[BuildReport]] = {}
    for r in reports:
        groups.setdefault((r.kernel, r.target), []).append(r)
    rows = []
    for (kernel, target), rs in groups.items():
        reg_keys = sorted({k for r in rs for k in r.registers})
        rows.append(
            {
                "kernel": kernel,
                "target": target,
                "builds": len(rs),
                "failed": sum(not r.ok for r in rs),
                "registers": {k: max(r.registers.get(k, -1) for r in rs) for k in reg_keys},
                "spills": max(r.spills for r in rs),
                "scratch": max(r.scratch for r in rs),
                "lds": max(r.lds for r in rs),
                "mma": sorted({m for r in rs for m in r.mma}),
            }
        )
    return rows
