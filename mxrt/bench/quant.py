"""``mxrt bench quant``: achieved bandwidth of the GPU quantizers against a device-to-device copy in the same run.

Bytes counted: input read once + codes and scales written once (the padded storage for a fused scale layout).
Each case is timed as CUDA-graph replays of launches with preallocated outputs (launch only: the kernel built and
launched as ``mxrt.quantize_mx`` does, no validation or allocation per call), rotating over enough input and output
sets that the working set is several times the L2, so launch gaps and L2 hits stay out of the numbers. When those
internals are not reachable the public call is timed instead, and the row's ``method`` says so.
Two copy references, bytes read + written: the peak, the fastest of cudaMemcpyAsync, CuPy's copyto of 16-byte
elements and a 16-byte vector copy kernel over 512 MiB; and a same-size copy, the vector copy kernel moving the
case's own byte count, timed the same way, so ramp-up and tail effects of small shapes appear on both sides.
A ``torch.compile`` of an equivalent torch rowwise quantizer runs as a peer in a subprocess when torch is present
(skipped cleanly when it is missing, fails, or does not compile within ``--torch-timeout`` seconds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import core
from .core import Column, Session, fmt_num, shape_label

HELP = "quantize_mx / quantize_mx_dual bandwidth vs a device copy (and a torch.compile peer)"

# bf16 [8192, 8192] and the seeds' MoE shapes: activations M = 4096 tokens x K = 7168 / 2048 / 2880 (hidden sizes
# of DeepSeek-V3, Qwen-MoE-style and gpt-oss experts), weights [N, K] = [7168, 4096], [2880, 4096].
SHAPES = [(8192, 8192), (4096, 7168), (4096, 2048), (4096, 2880), (7168, 4096), (2880, 4096)]
QUICK_SHAPES = [(8192, 8192), (4096, 2048)]
CPU_SHAPES = [(256, 1024)]
LAYOUT = "cublas128x4"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", help="comma list of MxK (default: 8192x8192 and the MoE shapes)")
    p.add_argument("--quick", action="store_true", help="two shapes")
    p.add_argument("--fmt", default="e4m3", choices=("e4m3", "e5m2", "e2m1"), help="element format")
    p.add_argument("--layout", default=LAYOUT, help="scale layout of the fused-preshuffle rows")
    p.add_argument("--torch-timeout", type=float, default=150.0, help="seconds for the torch.compile peer")
    p.add_argument("--no-torch", action="store_true", help="skip the torch.compile peer")
    p.add_argument("--torch-only", action="store_true", help="only the copy reference and the torch peer")
    p.add_argument("--passes", type=int, default=2, help="time each case this often; the best median counts")
    p.add_argument("--verify", action="store_true", help="set-0 outputs vs the numpy twin (shapes < 2^25 elems)")
    p.add_argument(
        "--dual-variants",
        default="",
        help="extra dual builds 'rows_fast:min_blocks,...' (kernel knobs DUAL_ROWS_FAST, DUAL_MIN_BLOCKS)",
    )
    p.add_argument(
        "--dual-scales",
        default="",
        help="extra dual rows with the scale store forced where it applies: comma list of t, inplace, t-late (t "
        "with an ordinary second launch instead of a programmatic dependent one)",
    )


def finish_args(args: argparse.Namespace) -> None:
    if args.shapes is not None and not isinstance(args.shapes, list):
        args.shapes = [tuple(s) for s in core.parse_shapes(args.shapes, 2, "MxK")]
    if not isinstance(args.dual_variants, list):
        try:
            args.dual_variants = [tuple(int(v) for v in s.split(":")) for s in args.dual_variants.split(",") if s]
        except ValueError:
            raise ValueError(f"--dual-variants {args.dual_variants!r}: expected 'rows_fast:min_blocks,...'") from None
        if any(len(v) != 2 for v in args.dual_variants):
            raise ValueError("--dual-variants: expected pairs 'rows_fast:min_blocks'")
    if not isinstance(args.dual_scales, list):
        from ..ops.quant import DUAL_SCALE_PATHS

        args.dual_scales = [p for p in args.dual_scales.split(",") if p]
        bad = [p for p in args.dual_scales if p not in (*DUAL_SCALE_PATHS, "t-late")]
        if bad:
            raise ValueError(f"--dual-scales {bad}: expected a comma list of {', '.join(DUAL_SCALE_PATHS)}, t-late")
    if args.passes < 1:
        raise ValueError("--passes must be >= 1")


def shapes_for(args: argparse.Namespace, gpu: bool = True) -> list[tuple[int, int]]:
    if args.shapes:
        return list(args.shapes)
    if not gpu:
        return list(CPU_SHAPES)
    return list(QUICK_SHAPES) if args.quick else list(SHAPES)


# --- cases: launch-only callables over rotating buffers -------------------------------------------------------


def _bf16_input(m: int, k: int, seed: int) -> Any:
    """Random bf16 bits on the device (CuPy has no bfloat16 dtype: the kernel reads them as uint16)."""
    import cupy

    rng = cupy.random.default_rng(seed)
    return (rng.standard_normal((m, k), dtype=cupy.float32).view(cupy.uint32) >> 16).astype(cupy.uint16)


def _sets(bytes_per_call: int, l2: int) -> int:
    return max(1, -(-3 * l2 // bytes_per_call))


def rowwise_case(m: int, k: int, fmt: str, layout: str | None, l2: int) -> tuple[list, int, int, tuple, str]:
    """(launches over rotating buffer sets, bytes per call, flags, set-0 outputs, how) for quantize_mx on bf16."""
    import cupy

    import mxrt
    from mxrt import codes
    from mxrt.ops import quant as q_ops
    from mxrt.ops import quant_kernels
    from mxrt.ops.kernels import select
    from mxrt.runtime.compiler import build
    from mxrt.runtime.kernel_spec import defines

    arch = mxrt.runtime.get_arch()
    spec = select("quantize_mx", arch.target)
    d = defines(
        FMT=codes.FMT_CODES[fmt],
        IN_DTYPE=codes.IN_DTYPE_CODES["bfloat16"],
        SCALE_LAYOUT=codes.SCALE_LAYOUT_CODES[layout],
        THREADS=quant_kernels.QUANT_ROWWISE_THREADS,
    )
    kernel = build(spec, d, arch)
    code_bytes = m * (-(-k // 2) if fmt == "e2m1" else k)
    nb = -(-k // 32)
    s_bytes = m * nb if layout is None else int(np.prod(mxrt.scale_layout_shape(layout, m, nb)))
    nbytes = 2 * m * k + code_bytes + s_bytes
    launches: list[Callable[[], Any]] = []
    outputs: tuple = ()
    flags = 0
    for i in range(_sets(nbytes, l2)):
        x = _bf16_input(m, k, i)
        qb = cupy.empty((m, code_bytes // m), cupy.uint8)
        sb = cupy.empty(s_bytes, cupy.uint8)
        flags, cfg = q_ops.rowwise_launch(m, k, "bfloat16", x.data.ptr, qb.data.ptr, fmt)
        args = (x, qb, sb, np.int32(m), np.int32(k), np.int32(codes.SCALE_MODE_CODES["rceil"]), np.int32(flags))
        launches.append(lambda cfg=cfg, args=args: kernel(cfg.grid, cfg.block, args))
        outputs = outputs or (qb, sb.reshape(m, nb) if layout is None else q_ops.scale_view(sb, layout, m, nb))
    return launches, nbytes, flags, outputs, "graph of kernel launches"


def dual_case(
    m: int,
    k: int,
    fmt: str,
    layout: str | None,
    l2: int,
    variant: tuple[int, int] | None = None,
    scales: str | None = None,
) -> tuple[list, int, int, tuple, str]:
    """variant (rows_fast, min_blocks): build with the kernel's tuning knobs set (defaults otherwise); scales: the
    scale store forced (mxrt.ops.quant.dual_scale_path; default the op's choice)."""
    import cupy

    import mxrt
    from mxrt import codes
    from mxrt.ops import quant as q_ops
    from mxrt.ops.kernels import select
    from mxrt.runtime.compiler import build, compile_options
    from mxrt.runtime.launch import launch
    from mxrt.runtime.source import stamped_source

    arch = mxrt.runtime.get_arch()
    spec = select("quantize_mx_dual", arch.target)
    early = q_ops.DUAL_T_EARLY if scales != "t-late" else False  # "t-late": SCALES_T, an ordinary second launch
    scales = "t" if scales == "t-late" else scales
    path = q_ops.dual_scale_path(m, k, layout, scales)
    d = q_ops.dual_defines(fmt, "bfloat16", layout, False)
    rows_fast = q_ops.DUAL_ROWS_FAST
    if variant is None:
        kernel = build(spec, d, arch)
    else:
        rows_fast, min_blocks = variant
        extra = (f"-DDUAL_ROWS_FAST={rows_fast}", f"-DDUAL_MIN_BLOCKS={min_blocks}")
        code = stamped_source(spec.file, arch.target)
        kernel = cupy.RawModule(code=code, options=compile_options(arch, d) + extra).get_function(spec.symbol)
    packed = fmt == "e2m1"
    rb, cb = (-(-k // 2), -(-m // 2)) if packed else (k, m)

    def sbytes(rows: int, cols: int) -> int:
        return rows * cols if layout is None else int(np.prod(mxrt.scale_layout_shape(layout, rows, cols)))

    sr, sc = sbytes(m, -(-k // 32)), sbytes(k, -(-m // 32))
    nbytes = 2 * m * k + m * rb + k * cb + sr + sc
    launches: list[Callable[[], Any]] = []
    outputs: tuple = ()
    flags = 0
    tk = q_ops.transpose_kernel(arch) if path == "t" else None
    for i in range(_sets(nbytes, l2)):
        x = _bf16_input(m, k, i)
        q_row, q_col = cupy.empty((m, rb), cupy.uint8), cupy.empty((k, cb), cupy.uint8)
        s_row, s_col = cupy.empty(sr, cupy.uint8), cupy.empty(sc, cupy.uint8)
        flags, cfg = q_ops.dual_launch(m, k, "bfloat16", x.data.ptr, q_row.data.ptr, q_col.data.ptr, fmt, rows_fast)
        # as the op: the scales where it writes them (transposed workspaces, then the transpose launch, when it does)
        st_r, st_c, t_flag, transpose = q_ops.dual_scale_targets(
            m, k, path, s_row, s_col, lambda shape: cupy.empty(shape, cupy.uint8)
        )
        args = (x, q_row, st_r, q_col, st_c, np.int32(m), np.int32(k))
        args += (np.int32(codes.SCALE_MODE_CODES["rceil"]), np.int32(flags | t_flag))

        def call(cfg=cfg, args=args, transpose=transpose) -> None:
            kernel(cfg.grid, cfg.block, args)
            if transpose is not None:
                launch("quantize_mx_dual", tk, *transpose, early=early)

        launches.append(call)
        outputs = outputs or (q_row, s_row, q_col, s_col)
    return launches, nbytes, flags, outputs, "graph of kernel launches"


def public_case(m: int, k: int, fmt: str, layout: str | None, dual: bool, l2: int) -> tuple[list, int, int, tuple, str]:
    """The public call on float16 input (2 bytes per element like bf16; CuPy has no bfloat16 dtype), timed when the
    launch-only internals are not reachable. Bytes: the outputs it returns, as the kernel cases count them."""
    import cupy

    import mxrt

    def x16(seed: int) -> Any:
        return cupy.random.default_rng(seed).standard_normal((m, k), dtype=cupy.float32).astype(cupy.float16)

    xs = [x16(0)]
    if dual:
        out = mxrt.quantize_mx_dual(xs[0], fmt, backend="gpu")
        outputs = (out.row.data, out.row.scales, out.col.data, out.col.scales)
        fn = mxrt.quantize_mx_dual
        kw: dict = {}
    else:
        out = mxrt.quantize_mx(xs[0], fmt, scale_layout=layout, backend="gpu")
        outputs = (out.data, out.scales)
        fn = mxrt.quantize_mx
        kw = {"scale_layout": layout}
    nbytes = 2 * m * k + sum(int(o.nbytes) for o in outputs)
    xs += [x16(i) for i in range(1, _sets(nbytes, l2))]
    launches = [lambda x=x: fn(x, fmt, backend="gpu", **kw) for x in xs]
    return launches, nbytes, 0, outputs, "graph of public calls (float16 input)"


def _case(kind: str, m: int, k: int, fmt: str, layout: str | None, l2: int, variant: tuple | str | None, log):
    """variant: a dual build's knobs (rows_fast, min_blocks), or the name of a dual scale store to force."""
    try:
        if kind == "rowwise":
            return rowwise_case(m, k, fmt, layout, l2)
        if isinstance(variant, str):
            return dual_case(m, k, fmt, layout, l2, scales=variant)
        return dual_case(m, k, fmt, layout, l2, variant)
    except (ImportError, AttributeError, KeyError, TypeError) as e:  # internals moved: time the public call
        if variant is not None:
            raise
        log(f"  launch-only {kind} case unavailable ({type(e).__name__}: {e}); timing the public call")
        return public_case(m, k, fmt, layout, kind == "dual", l2)


def _ndiff(a: np.ndarray, b: np.ndarray) -> int:
    """Differing bytes of two outputs compared flat (the benchmark keeps scale buffers 1-D); -1: sizes differ."""
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    return int((a != b).sum()) if a.size == b.size else -1


# --- the torch.compile peer (a subprocess: its compile must not stall or crash the run) -------------------------

TORCH_PEER = textwrap.dedent(
    """
    import json, sys, time
    import torch

    def quant(x):  # bf16 [m, k] -> e4m3 codes [m, k], E8M0 bytes [m, k/32]; RCEIL scale (torchao style)
        m, k = x.shape
        xf = x.float().view(m, k // 32, 32)
        amax = xf.abs().amax(-1)
        bits = (amax / 448.0).view(torch.int32)
        e = (((bits + 0x7FFFFF) >> 23) - 127).clamp(-127, 127)
        e = torch.where(amax == 0, torch.full_like(e, -127), e)
        y = (xf * torch.exp2(-e.float()).unsqueeze(-1)).clamp(-448.0, 448.0)
        return y.to(torch.float8_e4m3fn).view(m, k), (e + 127).to(torch.uint8)

    shapes = json.loads(sys.argv[1])
    t0 = time.time()
    fn = torch.compile(quant)
    x = torch.randn(256, 256, device="cuda").to(torch.bfloat16)
    fn(x)
    torch.cuda.synchronize()
    print(json.dumps({"compile_s": time.time() - t0}), flush=True)
    for m, k in shapes:
        nbytes = 2 * m * k + m * k + m * k // 32
        xs = [torch.randn(m, k, device="cuda").to(torch.bfloat16) for _ in range(max(1, int(-(-150e6 // nbytes))))]
        for x in xs:
            fn(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        per = 20
        with torch.cuda.graph(g):
            for i in range(per):
                fn(xs[i % len(xs)])
        times = []
        for _ in range(7):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); g.replay(); b.record(); b.synchronize()
            times.append(a.elapsed_time(b) / 1e3 / per)
        times.sort()
        print(json.dumps({"shape": [m, k], "s": times[len(times) // 2], "bytes": nbytes}), flush=True)
    """
)


def torch_peer(shapes: list[tuple[int, int]], timeout: float) -> tuple[str, list[dict]]:
    """Run the torch.compile peer in a subprocess; (status, rows)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return "skipped: torch is not installed", []
    t0 = time.time()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", TORCH_PEER, json.dumps(shapes)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return f"stopped after {timeout:.0f} s (compile or timing too slow)", rows
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        return f"failed (rc {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}", rows
    return f"ok in {time.time() - t0:.0f} s", rows


# --- runs -----------------------------------------------------------------------------------------------------


def _row(kernel: str, m: int, k: int, seconds: float, nbytes: int, **kw: Any) -> dict:
    return {"kernel": kernel, "shape": shape_label(m, k), "m": m, "k": k, "s": seconds, "bytes": nbytes} | kw


def run(ses: Session, args: argparse.Namespace) -> None:
    import cupy

    import mxrt

    l2 = core.l2_bytes()
    peaks = core.copy_bandwidth(l2)
    copy_bw = max(peaks.values())
    res = ses.result
    res.update(device=core.device_name(), software=core.software(), fmt=args.fmt, copy_peak_Bps=peaks)
    ses.log(f"device {res['device']}, bf16 input -> {args.fmt}, RCEIL")
    ses.log("d2d copy 512 MiB: " + ", ".join(f"{k} {v / 1e12:.2f} TB/s" for k, v in peaks.items()))
    rows = res["rows"]
    shapes = shapes_for(args)
    for m, k in ses.track([] if args.torch_only else shapes, "quant", lambda s: shape_label(*s)):
        if ses.budget.over():
            ses.log(f"shape {shape_label(m, k)} skipped: budget spent")
            continue
        cases = [
            ("quantize_mx", ("rowwise", None, None)),
            (f"quantize_mx+{args.layout}", ("rowwise", args.layout, None)),
            ("quantize_mx_dual", ("dual", None, None)),
        ]
        cases += [(f"quantize_mx_dual[rf{v[0]},mb{v[1]}]", ("dual", None, v)) for v in args.dual_variants]
        cases += [(f"quantize_mx_dual[{p}]", ("dual", None, p)) for p in args.dual_scales]
        reference = None
        want = None
        if args.verify and m * k < 2**25:
            import ml_dtypes

            x0 = cupy.asnumpy(_bf16_input(m, k, 0)).view(ml_dtypes.bfloat16)
            want = mxrt.quantize_mx_dual(x0, args.fmt, backend="numpy")
        for name, (kind, layout, variant) in cases:
            try:
                launches, nbytes, flags, outputs, how = _case(kind, m, k, args.fmt, layout, l2, variant, ses.log)
                calls = max(20, 4 * len(launches))
                passes = [core.time_cupy(launches, 7, calls=calls, log=ses.log) for _ in range(args.passes)]
                t, method = min(passes)
            except Exception as e:  # a case failing is a row with its reason
                rows.append(_row(name, m, k, None, 0, note=f"{type(e).__name__}: {str(e)[:160]}"))
                ses.log(f"  {name} {shape_label(m, k)} failed: {type(e).__name__}: {e}")
                continue
            host = [cupy.asnumpy(o) for o in outputs]
            extra: dict = {}
            if not name.startswith("quantize_mx_dual") and want is not None and how.startswith("graph of kernel"):
                s_want = want.row.scales if layout is None else mxrt.preshuffle_scales(want.row.scales, layout)
                diffs = [_ndiff(a, b) for a, b in zip(host, (want.row.data, s_want), strict=True)]
                extra["verify"] = "bit-exact" if not any(diffs) else str(diffs)
                ses.log(f"verify {name} {shape_label(m, k)} vs numpy: {extra['verify']}")
            if name.startswith("quantize_mx_dual"):  # every variant must give the default build's bytes
                reference = reference or host
                same_bytes = all(np.array_equal(a, b) for a, b in zip(host, reference, strict=True))
                extra["same_bytes_as_default"] = same_bytes
                if not same_bytes:
                    diffs = [int((a != b).sum()) for a, b in zip(host, reference, strict=True)]
                    ses.log(f"MISMATCH: {name} {shape_label(m, k)} differs from quantize_mx_dual: {diffs} bytes")
                if want is not None and how.startswith("graph of kernel"):
                    exp = (want.row.data, want.row.scales, want.col.data, want.col.scales)
                    diffs = [_ndiff(a, b) for a, b in zip(host, exp, strict=True)]
                    extra["verify"] = "bit-exact" if not any(diffs) else str(diffs)
                    ses.log(f"verify {name} {shape_label(m, k)} vs numpy: {extra['verify']}")
            cl, moved = core.copy_launches(nbytes, l2)
            same = moved / core.time_cupy(cl, 7, calls=max(20, 4 * len(cl)), log=ses.log)[0]
            rows.append(
                _row(name, m, k, t, nbytes, passes=[p[0] for p in passes], flags=flags, copy_Bps=same, method=method)
                | {"note": how}
                | extra
            )
            ses.log(f"  {name:34} {shape_label(m, k):>10} {t * 1e6:8.1f} us {nbytes / t / copy_bw * 100:5.1f}% of peak")
            del launches, cl, outputs
        cupy.get_default_memory_pool().free_all_blocks()
        ses.save()
    status, peer = ("skipped: --no-torch", []) if args.no_torch else torch_peer(shapes, args.torch_timeout)
    for r in peer:
        if "shape" in r:
            m, k = r["shape"]
            rows.append(_row("torch.compile rowwise", m, k, r["s"], r["bytes"], method="graph", note="torch peer"))
    compile_s = next((r["compile_s"] for r in peer if "compile_s" in r), None)
    res["torch_peer"] = status + (f", first compile {compile_s:.1f} s" if compile_s is not None else "")
    ses.log(f"torch.compile peer: {res['torch_peer']}")
    add_bandwidth(rows, copy_bw)
    ses.save()


def run_cpu(ses: Session, args: argparse.Namespace) -> None:
    """No GPU: the numpy quantizers' host bandwidth on a small bf16 input (no copy reference)."""
    import ml_dtypes

    import mxrt

    rows = ses.result["rows"]
    rng = np.random.default_rng(0)
    for m, k in ses.track(shapes_for(args, gpu=False), "quant (numpy)", lambda s: shape_label(*s)):
        x = rng.standard_normal((m, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
        q = mxrt.quantize_mx(x, args.fmt, backend="numpy")
        d = mxrt.quantize_mx_dual(x, args.fmt, backend="numpy")
        dual_bytes = sum(a.nbytes for a in (d.row.data, d.row.scales, d.col.data, d.col.scales))
        cases = [
            (
                "quantize_mx (numpy)",
                lambda x=x: mxrt.quantize_mx(x, args.fmt, backend="numpy"),
                q.data.nbytes + q.scales.nbytes,
            ),
            ("quantize_mx_dual (numpy)", lambda x=x: mxrt.quantize_mx_dual(x, args.fmt, backend="numpy"), dual_bytes),
        ]
        for name, fn, out_bytes in cases:
            t = core.host_time(fn)
            rows.append(_row(name, m, k, t, 2 * m * k + out_bytes, method="wall", note="numpy reference"))
            ses.log(f"  {name:34} {shape_label(m, k):>10} {t * 1e6:10.1f} us")
    add_bandwidth(rows, None)
    ses.save()


def add_bandwidth(rows: list[dict], copy_bw: float | None) -> list[dict]:
    """``tbps`` of every timed row, ``pct_copy`` against the peak copy, ``pct_same_copy`` against the same-size copy."""
    for r in rows:
        bw = r["bytes"] / r["s"] if r.get("s") else None
        r["tbps"] = None if bw is None else bw / 1e12
        r["pct_copy"] = None if bw is None or not copy_bw else 100 * bw / copy_bw
        r["pct_same_copy"] = None if bw is None or not r.get("copy_Bps") else 100 * bw / r["copy_Bps"]
    return rows


COLUMNS = [
    Column("kernel", lambda r: r["kernel"]),
    Column("shape MxK", lambda r: r["shape"]),
    Column("us", lambda r: fmt_num(None if r.get("s") is None else r["s"] * 1e6, ".1f"), right=True),
    Column("TB/s", lambda r: fmt_num(r.get("tbps"), ".3g"), right=True),
    Column("% peak copy", lambda r: fmt_num(r.get("pct_copy"), ".1f"), right=True),
    Column("% same-size copy", lambda r: fmt_num(r.get("pct_same_copy"), ".1f"), right=True),
    Column("method", lambda r: r.get("method") or "-"),
    Column("note", lambda r: r.get("note") or ""),
]


def table(result: dict) -> str:
    head = []
    if result.get("copy_peak_Bps"):
        head.append("d2d copy: " + ", ".join(f"{k} {v / 1e12:.2f} TB/s" for k, v in result["copy_peak_Bps"].items()))
    if result.get("torch_peer"):
        head.append(f"torch.compile peer: {result['torch_peer']}")
    return "\n".join([*head, core.markdown_table(result["rows"], COLUMNS)])


def plot(result: dict, path: str) -> None:
    rows = [r for r in result["rows"] if r.get("s")]
    gpu = any(r.get("pct_copy") is not None for r in rows)
    key, ylabel = ("pct_copy", "% of peak d2d copy") if gpu else ("tbps", "TB/s (numpy, host)")
    groups = list(dict.fromkeys(r["shape"] for r in rows))
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    cell = {(r["shape"], r["kernel"]): r.get(key) for r in rows}
    series = {kn: [cell.get((g, kn)) for g in groups] for kn in kernels}
    title = f"quantizer bandwidth, bf16 -> {result.get('fmt', 'e4m3')} ({result.get('device', 'CPU')})"
    core.bar_plot(path, [core.Panel(title, ylabel, groups, series)])
