"""The GEMM suite's peers and correctness checks: a Triton ``tl.dot_scaled`` MX GEMM with its config sweep, the
dequantize-then-cuBLAS path an H100 user writes today (``torch.compile``), and the float64 checks every peer
passes before it is timed. torch and triton are imported inside the functions that use them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

# Correctness thresholds (issue 5 Tests): MX peers vs the float64 GEMM of the dequantized inputs (bf16 out) and
# vs the unquantized inputs; bf16 / fp8-per-tensor peers vs the unquantized inputs only.
EXACT_TOL = 1e-5
TRUE_TOL = {"e4m3": 1e-3, "e2m1": 2e-2, "bf16": 1e-4, "fp8_tensor": 1e-3}
CHECK_ROWS = 256
SMALL_M_LIMIT = 256  # shapes with M <= this get the split-K rows and the small-M Triton configs


@dataclass(frozen=True)
class TritonConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int = 8

    @property
    def label(self) -> str:
        return f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"


# Swept in full on the first shape of each regime (M > SMALL_M_LIMIT, and small M with TRITON_SMALL_M added) per
# format; the best TRITON_KEEP of that sweep are reused on the regime's other shapes (see triton_candidates).
# Shared memory stays under 228 KB for fp8 at every entry (stages x (BM + BN) x BK bytes).
TRITON_CONFIGS = [
    TritonConfig(128, 128, 128, 8, 3),
    TritonConfig(128, 128, 128, 4, 3),
    TritonConfig(128, 128, 64, 4, 4),
    TritonConfig(128, 256, 64, 8, 3),
    TritonConfig(128, 256, 128, 8, 3),
    TritonConfig(256, 128, 64, 8, 3),
    TritonConfig(64, 128, 128, 4, 4),
    TritonConfig(128, 64, 128, 4, 4),
]
TRITON_SMALL_M = [TritonConfig(64, 128, 128, 4, 4), TritonConfig(64, 64, 128, 4, 4), TritonConfig(64, 128, 256, 4, 3)]
TRITON_KEEP = 3


def fit_block_k(configs: list[TritonConfig], k: int) -> list[TritonConfig]:
    """Each config with BLOCK_K lowered to the largest power of two <= it that divides ``k`` (>= 32), so the
    kernel's unmasked EVEN_K loop runs (K = 2880 = 64 x 45 takes BLOCK_K 64); duplicates dropped, order kept."""
    out: list[TritonConfig] = []
    for c in configs:
        bk = c.block_k
        while bk > 32 and k % bk:
            bk //= 2
        c = dataclasses.replace(c, block_k=bk)
        if c not in out:
            out.append(c)
    return out


def triton_candidates(best: list[TritonConfig] | None, m: int, quick: bool) -> tuple[list[TritonConfig], bool]:
    """The Triton configs to try for a shape, and whether that is a full sweep (whose best are then kept): the
    regime's kept best when there are any, else every config (plus TRITON_SMALL_M at small M); --quick: 3."""
    if quick:
        return TRITON_CONFIGS[:3], False
    small = TRITON_SMALL_M if m <= SMALL_M_LIMIT else []
    if best:
        return list(best), False
    return TRITON_CONFIGS + [c for c in small if c not in TRITON_CONFIGS], True


def scale_lut() -> np.ndarray:
    """float32 [256]: E8M0 byte -> 2^(byte - 127); 0xFF -> NaN (2^-127 is an fp32 subnormal, exact)."""
    lut = np.ldexp(np.float64(1.0), np.arange(255) - 127).astype(np.float32)
    return np.append(lut, np.float32(np.nan))


def code_lut(fmt: str) -> np.ndarray:
    """float32 [2^bits]: element code -> value, from mxrt's decode table."""
    from mxrt.formats.codecs import decode_table

    return np.array(decode_table(fmt), dtype=np.float32)


def torch_dequant(codes, scales, k: int, fmt: str, codes_lut, scales_lut):
    """MX -> bf16 in torch, as an H100 user writes it: ``lut[code] * 2^(scale - 127)``, rounded once to bf16.

    codes : uint8 ``[rows, k]`` (e4m3) or ``[rows, ceil(k/2)]`` (e2m1, even element in the low nibble).
    scales : uint8 ``[rows, ceil(k/32)]``. codes_lut / scales_lut : float32 tensors of :func:`code_lut` /
    :func:`scale_lut` on the same device. The fp32 product is exact for every value whose result is an fp32
    normal, so the bf16 result equals ``mxrt.dequantize_mx(q, bfloat16)`` there.
    """
    import torch

    if fmt == "e2m1":
        codes = torch.stack((codes & 0xF, codes >> 4), dim=-1).reshape(codes.shape[0], -1)
    rows, nb = scales.shape
    vals = codes_lut[codes.long()]
    if nb * 32 != vals.shape[1]:
        vals = torch.nn.functional.pad(vals, (0, nb * 32 - vals.shape[1]))
    vals = vals.reshape(rows, nb, 32) * scales_lut[scales.long()].unsqueeze(-1)
    return vals.reshape(rows, nb * 32)[:, :k].to(torch.bfloat16)


def dequant_gemm(a_codes, a_scales, b_codes, b_scales, k: int, fmt: str, codes_lut, scales_lut):
    """The compiled baseline's body: dequantize both operands to bf16, then cuBLAS ``a @ b.T``."""
    a = torch_dequant(a_codes, a_scales, k, fmt, codes_lut, scales_lut)
    b = torch_dequant(b_codes, b_scales, k, fmt, codes_lut, scales_lut)
    return a @ b.t()


def to_f64(x: Any) -> np.ndarray:
    """A torch tensor / CuPy array / numpy array (bf16 as ml_dtypes or raw uint16 bits) -> float64 numpy."""
    import ml_dtypes

    if hasattr(x, "detach"):
        return x.detach().float().cpu().numpy().astype(np.float64)
    if type(x).__module__.split(".", 1)[0] == "cupy":
        x = x.get()
    x = np.asarray(x)
    if x.dtype == np.uint16:
        x = x.view(ml_dtypes.bfloat16)
    return x.astype(np.float64)


def check_block(out_block: Any, ref_exact: Any, ref_true: np.ndarray, true_key: str) -> tuple[str, bool]:
    """``ok|FAIL exact <calc_diff> true <calc_diff>`` of an output block against the float64 GEMM of the
    dequantized inputs (MX peers; None to skip) and of the unquantized inputs, and whether it passed."""
    from mxrt import calc_diff

    y = to_f64(out_block)
    parts, ok = [], bool(np.isfinite(y).all())
    if ref_exact is not None:
        d = calc_diff(y, ref_exact)
        ok &= d <= EXACT_TOL
        parts.append(f"exact {d:.1e}")
    d = calc_diff(y, ref_true)
    ok &= d <= TRUE_TOL[true_key]
    parts.append(f"true {d:.1e}")
    return ("ok " if ok else "FAIL ") + " ".join(parts), ok


def triton_kernel() -> Any:
    """The Triton MX GEMM peer (compiled on first launch). ``tl`` is bound as a module global because Triton
    resolves the names a kernel body uses through its globals."""
    global tl
    import triton
    import triton.language as tl

    @triton.jit
    def _mx_dot_scaled_kernel(
        a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
        stride_a, stride_b, stride_sa, stride_sb, stride_c,
        FMT: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ):  # fmt: skip
        PACK: tl.constexpr = 2 if FMT == "e2m1" else 1
        pid = tl.program_id(0)
        num_m = tl.cdiv(M, BLOCK_M)
        num_n = tl.cdiv(N, BLOCK_N)
        in_group = GROUP_M * num_n
        first_m = (pid // in_group) * GROUP_M
        size_m = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % in_group) % size_m
        pid_n = (pid % in_group) // size_m
        offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K // PACK)
        offs_s = tl.arange(0, BLOCK_K // 32)
        a_ptrs = a_ptr + offs_m[:, None] * stride_a + offs_k[None, :]
        b_ptrs = b_ptr + offs_n[:, None] * stride_b + offs_k[None, :]
        sa_ptrs = sa_ptr + offs_m[:, None] * stride_sa + offs_s[None, :]
        sb_ptrs = sb_ptr + offs_n[:, None] * stride_sb + offs_s[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(0, tl.cdiv(K, BLOCK_K)):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
                sa = tl.load(sa_ptrs)
                sb = tl.load(sb_ptrs)
            else:
                k_left = K - kt * BLOCK_K
                a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left // PACK, other=0)
                b = tl.load(b_ptrs, mask=offs_k[None, :] < k_left // PACK, other=0)
                sa = tl.load(sa_ptrs, mask=offs_s[None, :] < (k_left + 31) // 32, other=127)
                sb = tl.load(sb_ptrs, mask=offs_s[None, :] < (k_left + 31) // 32, other=127)
            acc = tl.dot_scaled(a, sa, FMT, tl.trans(b), sb, FMT, acc=acc)
            a_ptrs += BLOCK_K // PACK
            b_ptrs += BLOCK_K // PACK
            sa_ptrs += BLOCK_K // 32
            sb_ptrs += BLOCK_K // 32
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + rows[:, None] * stride_c + cols[None, :]
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(rows[:, None] < M) & (cols[None, :] < N))

    return _mx_dot_scaled_kernel
