"""The torch route of the grouped MX GEMMs on sm_90a (mxrt/ops/grouped_gemm_torch.py: exact dequantisation to bf16 +
``torch._grouped_mm``, a gated generic fallback): chosen automatically for bfloat16 forward / dgrad / wgrad, checked
against float64 math of the dequantised inputs (calc_diff <= 1e-5) and of the unquantised inputs (<= 1e-3 for e4m3),
on every inexact input (scales outside the bf16 window, NaN / Inf codes, NaN blocks: the fallback) and on device
group sizes the host cannot check (the fallback gives the generic kernel's result, bitwise); bitwise reruns, ``out``
in place, torch tensors, the declines (fp32 out, accumulate, DeepGEMM layouts) and CUDA-graph capture (the route
steps aside, the capture-safe kernels run). ``test_plan_*``: a repeated call signature runs its plan
(mxrt/api/grouped_gemm.py: prepared launches, no validation) bitwise as the validated route, including the gated
fallback, device lengths that do not split the rows, torch tensors, torch on a side stream and CuPy on its own.
Marker ``gpu``: skips without cupy, an sm_90a device or torch with CUDA.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from support.gemm_cases import GATE_CASES, gate_case
from support.grouped_cases import dev, group_lens, host, values

import mxrt
from mxrt.api import grouped_gemm as api_grouped
from mxrt.errors import UnsupportedArchError
from mxrt.ops import grouped_gemm_torch
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.reference.grouped_gemm import grouped_gemm_f64

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from mxrt.runtime import get_arch, torch_grouped  # noqa: E402

BF16 = ml_dtypes.bfloat16


@pytest.fixture(autouse=True)
def route(monkeypatch):
    """Skip unless the route can run here; count its runs; automatic kernel choice."""
    try:
        target = get_arch().target
    except Exception as e:  # no device
        pytest.skip(f"no GPU ({type(e).__name__})")
    if target != "sm_90a" or torch_grouped.unavailable() is not None:
        pytest.skip(f"the torch route needs sm_90a and torch with CUDA ({torch_grouped.unavailable()})")
    monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL", raising=False)
    monkeypatch.delenv("MXRT_GROUPED_PLANS", raising=False)
    api_grouped.clear_plans()
    runs = []
    real = grouped_gemm_torch.run
    real_plan = torch_grouped.PreparedRoute.__call__

    def spy(*a, **k):
        runs.append(a[0].kind)
        return real(*a, **k)

    def spy_plan(self, *a, **k):  # a planned call of the route (a repeated call signature)
        runs.append(self.kind)
        return real_plan(self, *a, **k)

    monkeypatch.setattr(grouped_gemm_torch, "run", spy)
    monkeypatch.setattr(torch_grouped.PreparedRoute, "__call__", spy_plan)
    with mxrt.runtime.debug(poison=0xFF, sync_after_launch=True):  # workspaces, outputs and gate words poisoned
        yield runs


def check_nan(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """bf16 out against float64: NaN exactly where the reference is NaN, +-Inf where it overflows bf16, calc_diff
    <= 1e-5 elsewhere."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=what)
    with np.errstate(over="ignore"):
        ok = ~nan & np.isfinite(want.astype(BF16))
        np.testing.assert_array_equal(got[~nan & ~ok], want[~nan & ~ok].astype(BF16).astype(np.float64))
    if np.abs(want[ok]).max(initial=0) > 0:
        assert mxrt.calc_diff(got[ok], want[ok]) <= 1e-5, what


@pytest.mark.parametrize("g,kind", [(g, k) for g in (1, 4, 32, 256) for k in ("balanced", "unbalanced", "empty")])
def test_forward_and_dgrad(route, g, kind):
    rng = np.random.default_rng(g)
    lens = group_lens(kind, g, 1000, rng)  # unaligned groups
    m, n, k = int(lens.sum()), 192, 256
    x, w, go = values(rng, (m, k)), values(rng, (g, n, k)), values(rng, (m, n))
    qx, qw, qgo = mxrt.quantize_mx(x), mxrt.quantize_mx_dual_grouped(w), mxrt.quantize_mx(go)
    offs = mxrt.group_offsets(lens)
    for a, b, ref in ((qx, qw.row, lambda i, r: x[r] @ w[i].T), (qgo, qw.col, lambda i, r: go[r] @ w[i])):
        got = host(mxrt.grouped_gemm_mx(dev(a), dev(b), cupy.asarray(lens, cupy.int32)))
        want, _ = grouped_gemm_f64(grouped_gemm_problem(a, b, lens, out_dtype="float32"))
        check_nan(got, want, f"G={g} {kind}")
        unq = np.concatenate([ref(i, slice(int(offs[i]), int(offs[i + 1]))) for i in range(g)])
        assert mxrt.calc_diff(got, unq) <= 1e-3
    assert route == ["lens", "lens"]


@pytest.mark.parametrize(
    "pair,k", [(("e4m3", "e5m2"), 100), (("e2m1", "e2m1"), 160), (("e4m3", "e2m1"), 72), (("e5m2", "e4m3"), 33)]
)
def test_format_pairs_and_k_tails(route, pair, k):
    """Every format pair, k not a multiple of 8 or 32 (the workspaces' zero padding)."""
    rng = np.random.default_rng(5)
    lens = np.array([100, 0, 300, 1])
    m, n = int(lens.sum()), 130
    qa, qb = mxrt.quantize_mx(values(rng, (m, k)), pair[0]), mxrt.quantize_mx(values(rng, (4, n, k)), pair[1], axis=2)
    got = host(mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(lens)))
    check_nan(got, grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))[0], f"{pair} k={k}")
    assert route == ["lens"]


@pytest.mark.parametrize("case", sorted(GATE_CASES))
def test_inexact_inputs_take_the_exact_fallback(route, case):
    """Scales outside the bf16 window, NaN / Inf codes, NaN blocks, extreme scale pairs: bitwise the generic
    kernel's result (the gated fallback recomputes every row), and the float64 reference."""
    ac, sa, bc, sb, fa, fb, k = gate_case(case)  # a [300, k], b [260, k] = 4 groups of 65 rows
    g, n = 4, 65
    lens = np.array([120, 0, 100, 80])
    a = (cupy.asarray(ac), cupy.asarray(sa), fa, k)
    b = (cupy.asarray(bc).reshape(g, n, -1), cupy.asarray(sb).reshape(g, n, -1), fb, k)
    got = host(mxrt.grouped_gemm_mx(a, b, cupy.asarray(lens)))
    assert route == ["lens"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
        plain = host(mxrt.grouped_gemm_mx(a, b, cupy.asarray(lens)))
    np.testing.assert_array_equal(got, plain)
    p = grouped_gemm_problem(
        (ac, sa, fa, k), (bc.reshape(g, n, -1), sb.reshape(g, n, -1), fb, k), lens, out_dtype="float32"
    )
    check_nan(got, grouped_gemm_f64(p)[0], case)


@pytest.mark.parametrize("bad", [[10, 20, 5, 0], [400, 400, 400, 400], [-5, 300, -1, 2], [2**40, 0, 0, 0]], ids=str)
def test_device_lens_the_host_cannot_check(route, bad):
    """Lengths that do not split the rows (short, past, negative, huge): the generic kernel's semantics, bitwise."""
    rng = np.random.default_rng(9)
    m, n, k = 300, 64, 128
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (4, n, k)), axis=2)
    lens = cupy.asarray(np.array(bad, np.int64))
    got = host(mxrt.grouped_gemm_mx(dev(qa), dev(qb), lens))
    assert route == ["lens"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
        np.testing.assert_array_equal(got, host(mxrt.grouped_gemm_mx(dev(qa), dev(qb), lens)))


@pytest.mark.parametrize("g,kind", [(g, k) for g in (1, 4, 32) for k in ("balanced", "unbalanced", "empty")])
def test_wgrad(route, g, kind):
    rng = np.random.default_rng(g + 1)
    lens = group_lens(kind, g, 2000, rng)
    m, n, k = int(lens.sum()), 160, 96
    go, x = values(rng, (m, n)), values(rng, (m, k))
    qg = mxrt.quantize_mx_grouped(go, lens, colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(x, lens, colwise=True, col_align=32)
    got = host(mxrt.grouped_gemm_mx_wgrad(dev(qg.col), dev(qx.col), cupy.asarray(lens), out_dtype="bfloat16"))
    assert route == ["wgrad"]
    check_nan(got, grouped_gemm_f64(wgrad_problem(qg, qx, lens))[0], f"wgrad G={g} {kind}")
    offs = mxrt.group_offsets(lens)
    unq = np.stack([go[offs[i] : offs[i + 1]].T @ x[offs[i] : offs[i + 1]] for i in range(g)])
    assert mxrt.calc_diff(got, unq) <= 1e-3


@pytest.mark.parametrize("bad", [[64, 2000, 0, 5], [-7, 40, 10, 3], [10, 20, 0, 0]], ids=str)
def test_wgrad_device_lens_as_the_generic_kernel(route, bad):
    """Column ranges from device lengths the host cannot check: clamped, padded, cut at the width, as MODE 3."""
    rng = np.random.default_rng(4)
    lens_ok = np.array([64, 100, 0, 36])
    go, x = values(rng, (200, 96)), values(rng, (200, 64))
    qg = dev(mxrt.quantize_mx_grouped(go, lens_ok, colwise=True, col_align=32).col)
    qx = dev(mxrt.quantize_mx_grouped(x, lens_ok, colwise=True, col_align=32).col)
    lens = cupy.asarray(np.array(bad, np.int64))
    got = host(mxrt.grouped_gemm_mx_wgrad(qg, qx, lens, out_dtype="bfloat16"))
    assert route == ["wgrad"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
        plain = host(mxrt.grouped_gemm_mx_wgrad(qg, qx, lens, out_dtype="bfloat16"))
    assert mxrt.calc_diff(got, plain) <= 1e-5 and (np.abs(plain) > 0).sum() == (np.abs(got) > 0).sum()


def test_out_in_place_bitwise_reruns_and_numpy_inputs(route):
    rng = np.random.default_rng(6)
    lens = np.array([33, 0, 200, 7])
    m, n, k = int(lens.sum()), 96, 128
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (4, n, k)), axis=2)
    a, b, dl = dev(qa), dev(qb), cupy.asarray(lens)
    out = cupy.full((m, n), 0xFFFF, cupy.uint16)
    assert mxrt.grouped_gemm_mx(a, b, dl, out=out) is out
    first = out.get()
    for _ in range(3):
        np.testing.assert_array_equal(mxrt.grouped_gemm_mx(a, b, dl).get(), first)
    want = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))[0]
    check_nan(host(out), want)
    got = mxrt.grouped_gemm_mx(qa, qb, lens, backend="gpu")  # numpy in, uploaded, numpy bfloat16 out
    assert isinstance(got, np.ndarray) and got.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), first)
    assert route == ["lens"] * 5


def test_torch_tensors_in_and_out(route):
    import torch

    rng = np.random.default_rng(13)
    lens = np.array([70, 0, 186])
    m, n, k = int(lens.sum()), 64, 128
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (3, n, k)), axis=2)
    t = lambda v: torch.from_numpy(np.ascontiguousarray(v)).cuda()  # noqa: E731
    ta = dataclasses.replace(qa, data=t(qa.data), scales=t(qa.scales))
    tb = dataclasses.replace(qb, data=t(qb.data), scales=t(qb.scales))
    got = mxrt.grouped_gemm_mx(ta, tb, t(lens))
    assert isinstance(got, torch.Tensor) and got.is_cuda and got.dtype == torch.bfloat16
    want = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))[0]
    check_nan(got.float().cpu().numpy().astype(np.float64), want)
    side = torch.cuda.Stream()  # torch on a side stream, CuPy on its own: the route queues on CuPy's
    with torch.cuda.stream(side):
        d = torch.full((m, n), 7.0, dtype=torch.bfloat16, device="cuda")
        mxrt.grouped_gemm_mx(ta, tb, t(lens), out=d)
    side.synchronize()
    check_nan(d.float().cpu().numpy().astype(np.float64), want)
    assert route == ["lens", "lens"]


def test_declines_and_forcing(route, monkeypatch):
    rng = np.random.default_rng(3)
    lens = np.array([50, 78])
    qa, qb = dev(mxrt.quantize_mx(values(rng, (128, 64)))), dev(mxrt.quantize_mx(values(rng, (2, 32, 64)), axis=2))
    dl = cupy.asarray(lens)
    f32 = host(mxrt.grouped_gemm_mx(qa, qb, dl, out_dtype="float32"))  # fp32 out: the Hopper / generic kernels
    f16 = host(mxrt.grouped_gemm_mx(qa, qb, dl, out_dtype="float16"))
    assert route == [] and np.isfinite(f32).all() and np.isfinite(f16).all()
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "torch")
    with pytest.raises(UnsupportedArchError, match=r"MXRT_GROUPED_GEMM_KERNEL=torch.*out dtype float32"):
        mxrt.grouped_gemm_mx(qa, qb, dl, out_dtype="float32")
    got = host(mxrt.grouped_gemm_mx(qa, qb, dl))
    assert route == ["lens"]
    assert mxrt.calc_diff(got, f32) <= 1e-5
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "sm90")
    mxrt.grouped_gemm_mx(qa, qb, dl)
    assert route == ["lens"]  # forcing another kernel keeps the route out


def test_cuda_graph_capture_steps_aside(route):
    """Under a CuPy stream capture the route declines (its result would be a torch allocation) and the capture-safe
    Hopper kernels are captured; replays follow new group sizes."""
    rng = np.random.default_rng(12)
    g, m, n, k = 8, 1024, 128, 128
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (g, n, k)), axis=2)
    a, b = dev(qa), dev(qb)
    lens_sets = [group_lens("balanced", g, m, rng), group_lens("unbalanced", g, m, rng)]
    with mxrt.runtime.debug():  # no synchronisation inside the capture
        lens_d = cupy.asarray(lens_sets[0])
        out = cupy.empty((m, n), cupy.uint16)
        mxrt.grouped_gemm_mx(a, b, lens_d, out=out)
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream()
        with stream:
            stream.begin_capture()
            mxrt.grouped_gemm_mx(a, b, lens_d, out=out)
            graph = stream.end_capture()
        assert route == ["lens"]  # the eager call only
        for lens in lens_sets[::-1]:
            lens_d[...] = cupy.asarray(lens)
            out.fill(0xFFFF)
            cupy.cuda.Device().synchronize()
            graph.launch(stream=stream)
            stream.synchronize()
            check_nan(host(out), grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))[0])


def test_a_moe_step_in_torch_uses_the_route(route):
    """mxrt.torch.grouped_linear_mx forward and backward: the forward, dgrad and (bf16) wgrad take the route where
    the layer asks for bfloat16."""
    import torch

    import mxrt.torch as mt

    g, m, n, k = 4, 512, 128, 256
    lens = torch.tensor([100, 0, 300, 112], device="cuda")
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = mt.grouped_linear_mx(x, w, lens)
    y.float().square().sum().backward()
    assert "lens" in route
    assert torch.isfinite(x.grad).all() and torch.isfinite(w.grad).all()


@pytest.mark.parametrize("n,k", [(50, 36), (65, 96)])
def test_output_widths_torch_pads(route, n, k):
    """Output rows whose width is not a multiple of 8 (torch pads their stride): a C-contiguous result, right
    values, and the fallback (an out-of-window scale) writes it with mxrt's row stride."""
    rng = np.random.default_rng(n)
    lens = np.array([70, 0, 58, 32])
    m = int(lens.sum())
    go, x = values(rng, (m, n)), values(rng, (m, k))
    qg = mxrt.quantize_mx_grouped(go, lens, colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(x, lens, colwise=True, col_align=32)
    got = mxrt.grouped_gemm_mx_wgrad(dev(qg.col), dev(qx.col), cupy.asarray(lens), out_dtype="bfloat16")
    assert got.flags.c_contiguous and got.shape == (4, n, k)
    check_nan(host(got), grouped_gemm_f64(wgrad_problem(qg, qx, lens))[0], "wgrad")
    qa, qb = mxrt.quantize_mx(x), mxrt.quantize_mx(values(rng, (4, n, k)), axis=2)
    sa = qa.scales.copy()
    sa[3, 0] = 140  # above the window: the gated fallback writes every row
    for s in (qa.scales, sa):
        a = (cupy.asarray(qa.data), cupy.asarray(s), "e4m3", k)
        got = mxrt.grouped_gemm_mx(a, dev(qb), cupy.asarray(lens))
        assert got.flags.c_contiguous and got.shape == (m, n)
        p = grouped_gemm_problem((qa.data, s, "e4m3", k), qb, lens, out_dtype="float32")
        check_nan(host(got), grouped_gemm_f64(p)[0], "fwd")
    assert route == ["wgrad", "lens", "lens"]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_offsets_kernel_against_its_twin(route, dtype):
    """kernels_src/gemm/grouped_offsets.hip against offsets_numpy: random, invalid and extreme lengths, G up to
    1024, rows (with the split check) and padded columns (without)."""
    rng = np.random.default_rng(21)
    arch = get_arch()
    big = 2**31 - 1 if dtype == "int32" else 2**40
    sets = [[3, 0, 5], [10, 20, 5, 0], [-5, 300, -1, 2], [big, 0, 0], [0] * 1024, list(rng.integers(0, 9, 1024))]
    sets += [list(rng.integers(-3, 50, g)) for g in (1, 7, 257, 1000)]
    for lens in sets:
        d = cupy.asarray(np.array(lens, dtype))
        total = min(max(int(np.clip(lens, 0, None).sum()), 1), 2**31 - 6)  # the kernel: total < 2^31
        for cap, pad, tot, checked in ((total, 1, total, True), (total + 5, 1, total + 5, True), (500, 32, 500, False)):
            gate = cupy.zeros(1, cupy.uint32)
            offs = grouped_gemm_torch.launch_offsets("t", d, cap, pad, tot, arch, gate if checked else None)
            want, bad = grouped_gemm_torch.offsets_numpy(lens, cap, pad, tot)
            np.testing.assert_array_equal(offs.get(), want, err_msg=f"{lens[:8]} cap {cap} pad {pad}")
            assert int(gate.get()[0]) == (2 if checked and bad else 0), f"{lens[:8]} cap {cap}"


# ---- call plans (a repeated call signature: prepared launches, no validation) ---------------------------------


def _routes():
    return [p for p in api_grouped._PLANS.values() if p.route is not None]


def _plan_case(kind: str, n: int, rng: np.random.Generator, ldt: str = "int64"):
    """(call(out), out shape, float64 reference) of a forward or wgrad problem with CuPy MXArray operands."""
    lens = np.array([70, 0, 186, 1])
    m, k = int(lens.sum()), 96
    dl = cupy.asarray(lens.astype(ldt))
    if kind == "lens":
        qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (4, n, k)), axis=2)
        a, b = dev(qa), dev(qb)
        want = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))[0]
        return (lambda out=None: mxrt.grouped_gemm_mx(a, b, dl, out=out)), (m, n), want
    qg = mxrt.quantize_mx_grouped(values(rng, (m, n)), lens, colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(values(rng, (m, k)), lens, colwise=True, col_align=32)
    a, b = dev(qg.col), dev(qx.col)
    want = grouped_gemm_f64(wgrad_problem(qg, qx, lens))[0]
    return (lambda out=None: mxrt.grouped_gemm_mx_wgrad(a, b, dl, out_dtype="bfloat16", out=out)), (4, n, k), want


@pytest.mark.parametrize("with_out", [False, True], ids=["new", "out"])
@pytest.mark.parametrize("kind,n,ldt", [("lens", 96, "int64"), ("lens", 50, "int32"), ("wgrad", 96, "int64"),
                                        ("wgrad", 50, "int32")])  # fmt: skip
def test_plan_runs_bitwise_as_the_validated_route(route, monkeypatch, kind, n, ldt, with_out):
    """Plans off (every call validated), then on: the first call makes the plan, the next two run it; the same bits,
    ``out`` written in place, a C-contiguous result where torch pads its rows (n = 50)."""
    call, shape, want = _plan_case(kind, n, np.random.default_rng(n), ldt)
    fresh = (lambda: cupy.full(shape, 0xFFFF, cupy.uint16)) if with_out else (lambda: None)
    monkeypatch.setenv("MXRT_GROUPED_PLANS", "0")
    ref = host(call(fresh()))
    assert not api_grouped._PLANS
    monkeypatch.delenv("MXRT_GROUPED_PLANS")
    for i in range(3):
        out = fresh()
        got = call(out)
        assert got is out if with_out else (got.flags.c_contiguous and got.shape == shape)
        np.testing.assert_array_equal(host(got), ref, err_msg=f"call {i}")
    (plan,) = _routes()
    assert plan.route.kind == kind and not plan.torch
    assert route == [kind] * 4  # plans off, the validated first call, two planned calls
    check_nan(ref, want, f"{kind} n={n}")


@pytest.mark.parametrize("case", sorted(GATE_CASES))
def test_plan_takes_the_exact_fallback(route, case):
    """MXArray operands outside the bf16 window or holding NaN / Inf codes: the planned call raises the gate like the
    validated one, and the gated fallback gives the generic kernel's result, bitwise."""
    ac, sa, bc, sb, fa, fb, k = gate_case(case)
    g, n, m = 4, 65, ac.shape[0]
    qa = mxrt.MXArray(cupy.asarray(ac), cupy.asarray(sa), fa, 32, 1, (m, k), "given")
    qb = mxrt.MXArray(cupy.asarray(bc).reshape(g, n, -1), cupy.asarray(sb).reshape(g, n, -1), fb, 32, 2, (g, n, k),
                      "given")  # fmt: skip
    dl = cupy.asarray(np.array([120, 0, 100, 80]))
    got = [host(mxrt.grouped_gemm_mx(qa, qb, dl)) for _ in range(2)]
    assert len(_routes()) == 1 and route == ["lens", "lens"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
        plain = host(mxrt.grouped_gemm_mx(qa, qb, dl))
    for x in got:
        np.testing.assert_array_equal(x, plain)


def test_plan_device_lens_the_host_cannot_check(route):
    """One plan, new device lengths each call: valid splits, then lengths that do not split the rows (short, past,
    negative, huge): the planned call's gate sends them to the generic kernel's semantics, bitwise."""
    rng = np.random.default_rng(9)
    m, n, k = 300, 64, 128
    a, b = dev(mxrt.quantize_mx(values(rng, (m, k)))), dev(mxrt.quantize_mx(values(rng, (4, n, k)), axis=2))
    lens = cupy.asarray(np.array([100, 0, 150, 50]))
    mxrt.grouped_gemm_mx(a, b, lens)
    for bad in ([100, 0, 150, 50], [10, 20, 5, 0], [400, 400, 400, 400], [-5, 300, -1, 2], [2**40, 0, 0, 0]):
        lens[...] = cupy.asarray(np.array(bad))
        got = host(mxrt.grouped_gemm_mx(a, b, lens))
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
            np.testing.assert_array_equal(got, host(mxrt.grouped_gemm_mx(a, b, lens)), err_msg=str(bad))
    assert len(_routes()) == 1 and route == ["lens"] * 6


def test_plan_torch_tensors_and_streams(route):
    """CUDA torch tensors in: planned calls return torch tensors (or write ``out``) with the validated route's bits;
    torch on a side stream takes the validated route (pointers are read without DLPack's ordering only on the
    legacy streams); CuPy operands on a CuPy stream of their own run the plan on that stream."""
    import torch

    rng = np.random.default_rng(13)
    lens = np.array([70, 0, 186])
    m, n, k = int(lens.sum()), 64, 128
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (3, n, k)), axis=2)
    t = lambda v: torch.from_numpy(np.ascontiguousarray(v)).cuda()  # noqa: E731
    ta = dataclasses.replace(qa, data=t(qa.data), scales=t(qa.scales))
    tb = dataclasses.replace(qb, data=t(qb.data), scales=t(qb.scales))
    tl = t(lens)
    ref = mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(lens)).get()
    for _ in range(3):
        got = mxrt.grouped_gemm_mx(ta, tb, tl)
        assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16 and got.is_contiguous()
        np.testing.assert_array_equal(got.view(torch.int16).cpu().numpy().view(np.uint16), ref)
    d = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    for _ in range(2):
        d.fill_(7.0)
        assert mxrt.grouped_gemm_mx(ta, tb, tl, out=d) is d
        np.testing.assert_array_equal(d.view(torch.int16).cpu().numpy().view(np.uint16), ref)
    torch_plans = [p for p in _routes() if p.torch]
    assert len(torch_plans) == 2
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        d.fill_(7.0)
        mxrt.grouped_gemm_mx(ta, tb, tl, out=d)  # the plan declines: the validated route (DLPack's ordering)
    side.synchronize()
    np.testing.assert_array_equal(d.view(torch.int16).cpu().numpy().view(np.uint16), ref)
    a, b, dl = dev(qa), dev(qb), cupy.asarray(lens)
    mxrt.grouped_gemm_mx(a, b, dl)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:  # torch's current stream is not CuPy's: the plan queues torch's work on CuPy's stream
        outs = [mxrt.grouped_gemm_mx(a, b, dl) for _ in range(2)]
    s.synchronize()
    for o in outs:
        np.testing.assert_array_equal(o.get(), ref)
    assert route == ["lens"] * 10
