"""Every number a kernel receives from Python, in one place.

The kernels see these codes as defines (``-DFMT=4``) or run-time arguments (``scale_mode``, ``flags``, a scale
layout code). This module owns them; ``kernels_src/common/mx_codes.h`` is generated from it and committed::

    python -m mxrt.codes --write     # regenerate the header after editing a table below
    python -m mxrt.codes --check     # exit 1 when the committed header differs (tests/test_codes.py does this too)

Pure Python (no numpy, no cupy): formats/, layouts/, reference/ and ops/ may all import it.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: Element formats: defines FMT (quant kernels), FMT_A / FMT_B (gemm_mx_generic), A_FMT / B_FMT (the AMD and sm90
#: GEMMs). MXRT_FMT_*. These equal the cbsz / blgp format codes of gfx950's scaled MFMA.
FMT_CODES = {"e4m3": 0, "e5m2": 1, "e2m3": 2, "e3m2": 3, "e2m1": 4}
#: Scale rules (mxrt.formats.ScaleMode values): run-time argument ``scale_mode`` of the quant kernels. MXRT_SCALE_*.
SCALE_MODE_CODES = {"floor": 0, "ceil": 1, "even": 2, "rceil": 3}
#: Input dtypes of the quant kernels (define IN_DTYPE), keyed by numpy dtype name. MXRT_IN_*.
IN_DTYPE_CODES = {"float32": 0, "bfloat16": 1, "float16": 2}
#: Output dtypes of the GEMM kernels (define OUT_DTYPE; the AMD GEMMs' run-time ``out_dtype``), keyed by numpy
#: dtype name. MXRT_OUT_*.
GEMM_OUT_DTYPE_CODES = {"float32": 0, "bfloat16": 1, "float16": 2}
#: Scale layouts (mxrt.layouts.SCALE_LAYOUTS names; None = row-major [rows, ceil(k/32)] bytes): define SCALE_LAYOUT
#: of the quant kernels, LAYOUT of the layout kernels (1..4 only), run-time ``la`` / ``lb`` of gemm_mx_generic and
#: ``a_layout`` / ``b_layout`` of the AMD GEMMs. MXRT_SCALE_LAYOUT_*.
SCALE_LAYOUT_CODES = {None: 0, "aiter32x8": 1, "turbo16x4": 2, "cublas128x4": 3, "deepgemm_ue8m0": 4}
#: turbo16x4 stored zero-extended in uint32 words (``preshuffle_scales(..., dtype=np.uint32)``): a run-time scale
#: layout code of the AMD GEMMs only (the layout kernels spell it WIDE=1, gemm_mx_generic as a shift of 2).
SCALE_LAYOUT_TURBO16X4_U32 = 5
#: Weight code layouts (mxrt.layouts.WEIGHT_LAYOUTS names; None = row-major codes): define WLB of the decode kernels
#: that read them in place (sm90_decode, sm90_decode_wg, gfx950 / gfx942 decode; absent in row-major builds).
WEIGHT_LAYOUT_CODES = {None: 0, "aiter16x16": 1}

#: Run-time ``flags`` bits of the quant kernels: 16-byte aligned input rows, rowwise code rows, colwise code rows
#: (checked by the launcher); FLAT is quantize_mx_rowwise's flat grid (k % 32 == 0, aligned x and q); SCALES_T:
#: quantize_mx_dual stores both scale sets transposed, in whole 16-byte chunks (m, k multiples of 16, plain
#: layout), for a transpose pass to put them in place. MXRT_FLAG_*.
FLAG_VEC_IN = 1
FLAG_VEC_OUT = 2
FLAG_VEC_OUT_COL = 4
FLAG_FLAT = 8
FLAG_SCALES_T = 16
#: Run-time ``flags`` bits of the GEMM kernels: 16-byte aligned code rows (base and pitch) of A / B. MXRT_GEMM_FLAG_*.
GEMM_FLAG_VEC_A = 1
GEMM_FLAG_VEC_B = 2
#: Run-time ``mode`` of the AMD GEMMs: plain store; fp32 workspace slices summed in split order by the last CTA of
#: a tile; atomic adds into out. MXRT_GEMM_MODE_*.
GEMM_MODE_STORE = 0
GEMM_MODE_WORKSPACE = 1
GEMM_MODE_ATOMIC = 2

#: Most groups the grouped quantizers take (the offsets live in static shared memory). MXRT_MAX_GROUPS.
GROUPED_MAX_GROUPS = 1024

HEADER = "kernels_src/common/mx_codes.h"

_IN_C = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def _c(name: str | None) -> str:
    return "NONE" if name is None else _IN_C.get(name, name.upper())


def _tables() -> list[tuple[str, str, dict[str, int]]]:
    """(comment, macro prefix, {macro suffix: value}) for every table, in header order."""
    return [
        ("Element formats (FMT, FMT_A, FMT_B, A_FMT, B_FMT): FMT_CODES", "MXRT_FMT_", FMT_CODES),
        ("Scale rules (run-time scale_mode): SCALE_MODE_CODES", "MXRT_SCALE_", SCALE_MODE_CODES),
        ("Input dtypes (IN_DTYPE): IN_DTYPE_CODES", "MXRT_IN_", IN_DTYPE_CODES),
        ("GEMM output dtypes (OUT_DTYPE, run-time out_dtype): GEMM_OUT_DTYPE_CODES", "MXRT_OUT_", GEMM_OUT_DTYPE_CODES),
        (
            "Scale layouts (SCALE_LAYOUT, LAYOUT, run-time layout codes): SCALE_LAYOUT_CODES, *_TURBO16X4_U32",
            "MXRT_SCALE_LAYOUT_",
            {**SCALE_LAYOUT_CODES, "turbo16x4_u32": SCALE_LAYOUT_TURBO16X4_U32},
        ),
        (
            "Quant kernels' run-time flags bits: FLAG_*",
            "MXRT_FLAG_",
            {
                "vec_in": FLAG_VEC_IN,
                "vec_out": FLAG_VEC_OUT,
                "vec_out_col": FLAG_VEC_OUT_COL,
                "flat": FLAG_FLAT,
                "scales_t": FLAG_SCALES_T,
            },
        ),
        (
            "GEMM kernels' run-time flags bits: GEMM_FLAG_*",
            "MXRT_GEMM_FLAG_",
            {"vec_a": GEMM_FLAG_VEC_A, "vec_b": GEMM_FLAG_VEC_B},
        ),
        (
            "AMD GEMMs' run-time mode: GEMM_MODE_*",
            "MXRT_GEMM_MODE_",
            {"store": GEMM_MODE_STORE, "workspace": GEMM_MODE_WORKSPACE, "atomic": GEMM_MODE_ATOMIC},
        ),
        ("Limits: GROUPED_MAX_GROUPS", "MXRT_", {"max_groups": GROUPED_MAX_GROUPS}),
    ]


def header() -> str:
    """The text of ``kernels_src/common/mx_codes.h``."""
    lines = [
        "// GENERATED by `python -m mxrt.codes --write` from mxrt/codes.py: do not edit (tests/test_codes.py checks).",
        "// mx_codes.h: every number a kernel receives from Python (defines and run-time arguments), one numbering,",
        "// owned by mxrt/codes.py. Included by mx_codecs.h, so every kernel sees it.",
        "#pragma once",
    ]
    for comment, prefix, table in _tables():
        lines += ["", f"// {comment}"]
        lines += [f"#define {prefix}{_c(k)} {v}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def header_path() -> Path:
    return Path(__file__).resolve().parents[1] / HEADER


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = header_path()
    if args == ["--write"]:
        path.write_text(header())
        print(f"wrote {path}")
        return 0
    if args == ["--check"]:
        same = path.is_file() and path.read_text() == header()
        print(f"{path}: {'up to date' if same else 'differs from mxrt/codes.py: run python -m mxrt.codes --write'}")
        return 0 if same else 1
    print(header(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
