"""mxrt.runtime.graph_memory on the CPU: allocations made while CuPy's stream captures are held until released,
eager calls hold nothing, nested public calls hold once, and every public GPU op is wrapped. (The GPU side, a
replay that must not overwrite arrays allocated after the capture: tests/test_gpu_graph_memory.py.)"""

from __future__ import annotations

import contextlib
import sys
import types

import pytest

import mxrt
import mxrt.deep_gemm
from mxrt.api.dispatch import GPU_OPS
from mxrt.runtime import graph_memory


class _Mem:
    def __init__(self, size: int) -> None:
        self.size = size


class _Ptr:
    def __init__(self, size: int) -> None:
        self.mem = _Mem(size)


def _fake_cupy(state: dict) -> types.ModuleType:
    cp = types.ModuleType("cupy")

    def base(size: int) -> _Ptr:
        state["allocs"] += 1
        return _Ptr(size)

    state["allocator"] = base

    @contextlib.contextmanager
    def using_allocator(fn):
        old, state["allocator"] = state["allocator"], fn
        try:
            yield
        finally:
            state["allocator"] = old

    def is_capturing(ptr: int) -> int:
        state["queries"] += 1
        return int(state["capturing"])

    stream = types.SimpleNamespace(ptr=state["stream"])
    cp.empty = lambda size: state["allocator"](size)
    cp.cuda = types.SimpleNamespace(
        get_current_stream=lambda: stream,
        get_allocator=lambda: state["allocator"],
        using_allocator=using_allocator,
        runtime=types.SimpleNamespace(streamIsCapturing=is_capturing),
    )
    return cp


@pytest.fixture
def fake(monkeypatch):
    def make(capturing: bool, stream: int = 7) -> tuple[types.ModuleType, dict]:
        state = {"capturing": capturing, "stream": stream, "allocs": 0, "queries": 0}
        cp = _fake_cupy(state)
        monkeypatch.setitem(sys.modules, "cupy", cp)
        return cp, state

    graph_memory.release_graph_memory()
    yield make
    graph_memory.release_graph_memory()


def test_capture_holds_every_allocation_once_until_released(fake):
    cp, state = fake(capturing=True)

    @graph_memory.graph_safe
    def inner():
        return cp.empty(100)

    @graph_memory.graph_safe
    def op():
        inner()  # a public op calling another: held once
        return cp.empty(1000)

    out = op()
    assert state["allocs"] == 2
    assert graph_memory.graph_memory_bytes() == 1100
    del out
    assert graph_memory.graph_memory_bytes() == 1100  # still held: the graph writes there at every replay
    assert graph_memory.release_graph_memory() == 1100
    assert graph_memory.graph_memory_bytes() == 0
    assert state["allocator"] is not None and cp.empty(5).mem.size == 5  # the allocator is restored
    assert graph_memory.graph_memory_bytes() == 0


def test_eager_calls_hold_nothing_and_the_legacy_stream_is_not_queried(fake):
    cp, state = fake(capturing=False)
    op = graph_memory.graph_safe(lambda: cp.empty(64))
    op()
    assert graph_memory.graph_memory_bytes() == 0 and state["queries"] == 1
    cp, state = fake(capturing=True, stream=0)  # the legacy default stream cannot capture: no query
    graph_memory.graph_safe(lambda: cp.empty(64))()
    assert graph_memory.graph_memory_bytes() == 0 and state["queries"] == 0


def test_an_error_inside_a_captured_call_restores_the_allocator(fake):
    cp, state = fake(capturing=True)
    base = state["allocator"]

    @graph_memory.graph_safe
    def op():
        cp.empty(8)
        raise ValueError("bad argument")

    with pytest.raises(ValueError):
        op()
    assert state["allocator"] is base
    assert graph_memory.graph_memory_bytes() == 8
    # the thread is not left marked as inside a holding op
    graph_memory.graph_safe(lambda: cp.empty(16))()
    assert graph_memory.graph_memory_bytes() == 24


def test_every_public_gpu_op_is_graph_safe():
    code = graph_memory.graph_safe(lambda: None).__code__
    names = [*GPU_OPS, "per_token_cast_to_fp8", "per_block_cast_to_fp8"]
    fns = [getattr(mxrt, n) for n in names]
    fns += [getattr(mxrt.deep_gemm, n) for n in ("m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked")]
    fns += [mxrt.deep_gemm.k_grouped_fp8_gemm_nt_contiguous]
    unwrapped = [f.__name__ for f in fns if getattr(f, "__code__", None) is not code]
    assert not unwrapped, f"public GPU ops without graph_safe: {unwrapped}"
