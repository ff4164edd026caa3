"""Writes notebooks/03_gemm.ipynb (outputs are not stored; the test suite executes it)."""

import nbformat as nbf

cells = [
    nbf.v4.new_markdown_cell(
        "# Dense MX GEMM\n\n"
        "`mxrt.gemm_mx(a, b)` computes `a @ b.T` for two MX-quantized operands (both blocked along K, one E8M0 "
        'scale per 32: the "NT" layout every MX matrix unit reads). The numpy backend is the exact reference '
        "(float64 on the dequantized operands, one rounding); with a GPU the same call runs a kernel path "
        "(`generic`, `sm90_wgmma`, `gfx950_mfma_scale`, `gfx942_mfma_fp8`). This notebook runs on the CPU: "
        "accuracy of MXFP8 / MXFP4 against the unquantized product, split-K, preshuffled scales as raw "
        "pieces, and a model of the gfx950 instruction reading those layouts."
    ),
    nbf.v4.new_code_cell(
        "import numpy as np\n"
        "import mxrt\n"
        "from mxrt.reference import emulate\n"
        "rng = np.random.default_rng(0)\n"
        "m, n, k = 64, 48, 512\n"
        "x = rng.standard_normal((m, k)).astype(np.float32)\n"
        "w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)\n"
        "exact = x.astype(np.float64) @ w.astype(np.float64).T"
    ),
    nbf.v4.new_markdown_cell(
        "## Accuracy per format pair\n`calc_diff` (DeepGEMM's metric, `1 - 2<x,y>/(|x|^2+|y|^2)`) of the "
        "bf16 result against the unquantized float64 product. E4M3 (3 mantissa bits) stays under 1e-3, "
        "E5M2 (2 bits) a few times that, and an E2M1 operand (1 bit) near 1e-2."
    ),
    nbf.v4.new_code_cell(
        "print(f\"{'a x b':14}{'calc_diff':>12}\")\n"
        "for fa, fb in mxrt.GEMM_FORMAT_PAIRS:\n"
        "    qa, qb = mxrt.quantize_mx(x, fa, backend='numpy'), mxrt.quantize_mx(w, fb, backend='numpy')\n"
        "    d = mxrt.gemm_mx(qa, qb, out_dtype='bfloat16', backend='numpy')\n"
        "    cd = mxrt.calc_diff(d.astype(np.float64), exact)\n"
        "    print(f'{fa + \" x \" + fb:14}{cd:>12.2e}')\n"
        "    assert cd <= (2e-2 if 'e2m1' in (fa, fb) else 5e-3 if 'e5m2' in (fa, fb) else 1e-3)"
    ),
    nbf.v4.new_markdown_cell(
        "## split-K\nK is split on 32-element scale boundaries; the reference result does not depend on the "
        "split (float64 partials, one rounding). On the GPU `deterministic=True` (default) reduces the partials "
        "through a workspace in split order, so reruns are bitwise identical; `deterministic=False` adds them "
        "atomically."
    ),
    nbf.v4.new_code_cell(
        "qa, qb = mxrt.quantize_mx(x, 'e4m3', backend='numpy'), mxrt.quantize_mx(w, 'e4m3', backend='numpy')\n"
        "p = mxrt.problems.gemm_problem(qa, qb, split_k=3)\n"
        "print('k ranges of split_k=3:', p.k_ranges)\n"
        "d1 = mxrt.gemm_mx(qa, qb, out_dtype='float32', backend='numpy')\n"
        "d3 = mxrt.gemm_mx(qa, qb, out_dtype='float32', split_k=3, backend='numpy')\n"
        "assert np.array_equal(d1, d3)\n"
        "ref = mxrt.reference.gemm_mx(qa, qb, out_dtype='float64')\n"
        "print('rel. error of float32 out vs the float64 reference:', mxrt.relative_error(d1, ref))"
    ),
    nbf.v4.new_markdown_cell(
        "## Preshuffled scales as raw pieces\nThe quantizer can write its scales straight into the layout a "
        "kernel reads (`scale_layout=`); `gemm_mx` takes such scales as raw pieces `(codes, scales, fmt)` with "
        "`a_scale_layout=`. The result is the same as with row-major scales."
    ),
    nbf.v4.new_code_cell(
        "for layout in mxrt.SCALE_LAYOUTS:\n"
        "    sa = mxrt.quantize_mx(x, 'e4m3', backend='numpy', scale_layout=layout)\n"
        "    sb = mxrt.quantize_mx(w, 'e4m3', backend='numpy', scale_layout=layout)\n"
        "    d = mxrt.gemm_mx((sa.data, sa.scales, 'e4m3'), (sb.data, sb.scales, 'e4m3'), out_dtype='float32',\n"
        "                    a_scale_layout=layout, b_scale_layout=layout, backend='numpy')\n"
        "    print(f'{layout:16} scales {str(np.shape(sa.scales)):>12}  equal: {np.array_equal(d, d1)}')\n"
        "    assert np.array_equal(d, d1)"
    ),
    nbf.v4.new_markdown_cell(
        "## What a gfx950 lane reads\n`v_mfma_scale_f32_16x16x128_f8f6f4` takes, per lane, 32 fp8 bytes (two "
        "16-byte halves of K) and one scale dword per lane group (MX_REFERENCE.md 6.1). `mxrt.reference.emulate` "
        "models a GEMM main loop that reads only the preshuffled buffers (aiter16x16 weight, turbo16x4 / "
        "aiter32x8 scales) through the instruction's operand map; it agrees with the reference."
    ),
    nbf.v4.new_code_cell(
        "from mxrt.problems import gemm_problem\n"
        "for layout in ('turbo16x4', 'aiter32x8'):\n"
        "    pa = mxrt.preshuffle_scales(qa.scales, layout)\n"
        "    pb = mxrt.preshuffle_scales(qb.scales, layout)\n"
        "    wb = mxrt.preshuffle_weight(qb.data)\n"
        "    d_emu = emulate.gfx950_gemm_16x16x128(qa.data, pa, wb, pb, m=m, n=n, k=k, fmt_a='e4m3', fmt_b='e4m3',\n"
        "                                          scale_layout=layout)\n"
        "    err = mxrt.relative_error(d_emu, ref)\n"
        "    print(f'{layout:10} emulated instruction vs reference: rel. error {err:.1e}')\n"
        "    assert err < 1e-6"
    ),
    nbf.v4.new_markdown_cell("## GPU paths on this machine"),
    nbf.v4.new_code_cell(
        "from mxrt.ops.gemm_paths import gemm_paths\n"
        "print('registered GEMM paths:', [(p.name, p.target) for p in gemm_paths()])\n"
        "try:\n"
        "    from mxrt.runtime import device_available, get_arch\n"
        "    gpu = device_available()\n"
        "except Exception:\n"
        "    gpu = False\n"
        "if gpu:\n"
        "    d_gpu = mxrt.gemm_mx(qa, qb, out_dtype='float32', backend='gpu')\n"
        "    print(get_arch().target, 'GPU vs reference: rel. error', mxrt.relative_error(d_gpu, ref))\n"
        "else:\n"
        "    print('no GPU here: the numpy backend is the one that ran')"
    ),
]

nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, "notebooks/03_gemm.ipynb")
