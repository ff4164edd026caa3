"""A CUDA graph's replay must not write arrays allocated after its capture (marker ``gpu``; skips without a device).

mxrt's ops drop their workspaces when they return; inside a capture the graph still replays into them, so they are
held (mxrt.runtime.graph_memory) until :func:`mxrt.runtime.release_graph_memory`. Here a GEMM with workspaces is
captured on a stream, then arrays of the workspaces' sizes are allocated on that stream (CuPy's pool hands a
stream's freed blocks to that stream first) and filled with a pattern; the replay must leave them as they are and
still give the right result. tests/test_graph_memory.py covers the holding itself on the CPU.
"""

from __future__ import annotations

import pytest
from support.gemm_cases import check_result, operands, to_device

import mxrt

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from mxrt.runtime import device_available, get_arch  # noqa: E402

# (GEMM path, call arguments): sm90_cublas dequantises both operands into bf16 workspaces and zeroes a gate word;
# the generic path's deterministic split-K sums fp32 slices of a workspace.
CASES = [("sm90_cublas", {}), ("generic", {"split_k": 3})]


@pytest.mark.parametrize("path,kw", CASES, ids=[c[0] for c in CASES])
def test_replay_leaves_arrays_allocated_after_the_capture(monkeypatch, path, kw):
    if not device_available() or get_arch().vendor != "nvidia":
        pytest.skip("CUDA stream capture")
    if path == "sm90_cublas" and get_arch().target != "sm_90a":
        pytest.skip("sm90_cublas runs on sm_90a")
    monkeypatch.setenv("MXRT_GEMM_PATH", path)
    m, n, k = 256, 192, 512
    _, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=5)
    a, b = to_device(qa), to_device(qb)
    mxrt.runtime.release_graph_memory()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        out = cupy.empty((m, n), cupy.uint16)
        mxrt.gemm_mx(a, b, out=out, **kw)  # builds the kernels and warms this stream's pool
        stream.synchronize()
        stream.begin_capture()
        mxrt.gemm_mx(a, b, out=out, **kw)
        graph = stream.end_capture()
        held = mxrt.runtime.graph_memory_bytes()
        assert held > 0, "the capture's workspaces are not held"
        sizes = [m * k * 2, n * k * 2, 4, 3 * m * n * 4, m * n * 4]
        fillers = [cupy.full(s, 0x5A, cupy.uint8) for s in sizes for _ in range(2)]
        out.fill(0xFFFF)
        graph.launch(stream=stream)
        stream.synchronize()
    bad = [f.size for f in fillers if not bool((f == 0x5A).all())]
    assert not bad, f"the replay wrote arrays allocated after the capture (sizes {bad})"
    assert not check_result(out, qa, qb, "bfloat16")
    assert mxrt.runtime.release_graph_memory() == held
    assert mxrt.runtime.graph_memory_bytes() == 0
