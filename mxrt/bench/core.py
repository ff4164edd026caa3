"""Shared parts of the benchmark suites: shapes, timing, peers, progress, tables, JSON and plots.

Nothing here imports cupy, torch, triton, tqdm or matplotlib at module level: each is imported inside the
function that needs it, so ``mxrt bench`` parses its arguments and runs the numpy reference on a machine with
numpy alone.

Timing methods (the ``method`` column of every table):

* ``graph``  calls captured into one CUDA graph (torch.cuda.CUDAGraph for torch / Triton, a CuPy stream capture
  for mxrt and raw kernels), round-robin over rotating input sets, the replays timed with CUDA events; median
  of ``reps`` replays / calls per graph. Launch gaps and host overhead stay out of the number.
* ``events`` CUDA events around a loop of back-to-back calls (when a capture fails).
* ``wall``   host wall clock per call with no graph (``time.perf_counter``, device synchronised at the end):
  the host-overhead measurement, and the numpy reference on a CPU.

There is no L2 flush: working sets are made larger than the L2 by rotating input sets
(:func:`n_input_sets`), so a timed call reads its operands from DRAM as it would in a model.
"""

from __future__ import annotations

import datetime
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ShapeError

NO_GPU = "no GPU here (cupy or a device is missing)"
PLOT_MISSING = 'needs matplotlib: pip install matplotlib (or pip install ".[bench]")'


# --- shapes and arithmetic ----------------------------------------------------------------------------------


def parse_shape(text: str, dims: int, names: str = "MxNxK") -> tuple[int, ...]:
    """``"16x7168x4096"`` -> ``(16, 7168, 4096)``: ``dims`` positive integers joined by ``x``."""
    parts = text.strip().lower().split("x")
    if len(parts) != dims or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ShapeError(f"{text!r} is not {names} with positive integers")
    return tuple(int(p) for p in parts)


def parse_shapes(text: str, dims: int, names: str = "MxNxK") -> list[tuple[int, ...]]:
    """A comma list of :func:`parse_shape` (empty items ignored); ShapeError when it names no shape."""
    out = [parse_shape(s, dims, names) for s in text.split(",") if s.strip()]
    if not out:
        raise ShapeError(f"{text!r} names no shape; expected a comma list of {names}")
    return out


def shape_label(*dims: int) -> str:
    return "x".join(str(d) for d in dims)


def tflops(m: int, n: int, k: int, seconds: float) -> float:
    return 2.0 * m * n * k / seconds / 1e12


def n_input_sets(bytes_per_set: int, l2_bytes: int, cap: int = 4) -> int:
    """Input sets to rotate so that together they exceed 3x the L2 (at most ``cap``); one set when it alone is at
    least twice the L2 (its operands cannot stay resident between calls)."""
    if bytes_per_set >= 2 * l2_bytes:
        return 1
    return max(1, min(cap, -(-3 * l2_bytes // max(1, bytes_per_set))))


def calls_per_graph(t_one: float, n_sets: int, target_s: float = 0.02, cap: int = 200) -> int:
    """Calls to capture per graph so that one replay lasts about ``target_s``; a multiple of ``n_sets``."""
    calls = max(n_sets, min(cap, math.ceil(target_s / max(t_one, 1e-7))))
    return -(-calls // n_sets) * n_sets


class Budget:
    """Wall-clock budget of a run: ``over()`` once ``seconds`` have passed (never when ``seconds <= 0``)."""

    def __init__(self, seconds: float):
        self.t0 = time.monotonic()
        self.seconds = seconds

    def over(self) -> bool:
        return self.seconds > 0 and time.monotonic() - self.t0 > self.seconds

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


# --- the run: progress, log, JSON ---------------------------------------------------------------------------


class Session:
    """One ``mxrt bench`` run: the result dict that becomes the JSON file, progress and log lines.

    Suites fill ``result`` (``rows`` and their own keys), call :meth:`log` for per-row lines, iterate their
    shapes through :meth:`track` (a tqdm bar on a terminal when tqdm is installed, ``[i/n]`` lines otherwise),
    and call :meth:`save` after each shape so a run stopped early still leaves its rows on disk.
    """

    def __init__(self, suite: str, argv: Sequence[str], json_path: str | None, progress: bool = True):
        self.json_path = json_path
        self.progress = progress
        self.budget = Budget(0.0)
        self._bar: Any = None
        self.result: dict[str, Any] = {
            "suite": suite,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": list(argv),
            "rows": [],
        }

    def log(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text)
        else:
            print(text, flush=True)

    def track(self, items: Iterable[Any], desc: str, label: Callable[[Any], str] = str) -> Iterator[Any]:
        items = list(items)
        tqdm = _tqdm() if self.progress and sys.stderr.isatty() else None
        if tqdm is not None:
            self._bar = tqdm(total=len(items), desc=desc, unit="shape", leave=False)
        try:
            for i, item in enumerate(items):
                if self._bar is not None:
                    self._bar.set_postfix_str(label(item))
                else:
                    print(f"[{i + 1}/{len(items)}] {desc} {label(item)} ({self.budget.elapsed():.0f} s)", flush=True)
                yield item
                if self._bar is not None:
                    self._bar.update(1)
        finally:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def save(self) -> None:
        self.result["wall_s"] = self.budget.elapsed()
        if self.json_path:
            write_json(self.json_path, self.result)


def _tqdm() -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # optional (the bench extra): plain [i/n] lines instead
        return None
    return tqdm


def write_json(path: str, payload: dict) -> None:
    with open(path, "w") as fh:
        json.dump(payload, fh, indent=1, default=str)


def software() -> dict[str, str]:
    """Versions of the pieces a benchmark depends on ("missing (...)" for absent optional ones)."""
    out = {"python": sys.version.split()[0], "numpy": np.__version__}
    for name in ("mxrt", "ml_dtypes", "cupy", "torch", "triton"):
        try:
            out[name] = __import__(name).__version__
        except Exception as e:  # optional peers: record why they are absent
            out[name] = f"missing ({type(e).__name__})"
    return out


# --- peers ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Peers:
    """What this machine can time beside mxrt; each ``why_*`` is None when present, else the reason."""

    why_torch: str | None
    why_triton: str | None
    dot_scaled: str  # the signature of tl.dot_scaled, or why it is unavailable

    @property
    def torch(self) -> bool:
        return self.why_torch is None

    @property
    def triton(self) -> bool:
        return self.why_triton is None


def discover_peers() -> Peers:
    """torch with a CUDA/ROCm device (cuBLAS / hipBLASLt peers, torch.compile) and Triton with ``tl.dot_scaled``."""
    why_torch: str | None = None
    try:
        import torch

        if not torch.cuda.is_available():
            why_torch = f"torch {torch.__version__} sees no GPU"
    except Exception as e:  # ImportError, or a broken torch install
        why_torch = f"torch is not importable ({type(e).__name__}: {e})"
    why_triton: str | None = "needs torch" if why_torch else None
    sig = "unavailable"
    if why_triton is None:
        try:
            import inspect

            import triton.language as tl

            sig = str(inspect.signature(tl.dot_scaled))
        except Exception as e:  # no triton, or a triton without dot_scaled
            why_triton = f"triton with tl.dot_scaled is not importable ({type(e).__name__}: {e})"
    return Peers(why_torch, why_triton, sig)


def device_name() -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def l2_bytes(default: int = 50 << 20) -> int:
    import cupy

    try:
        return int(cupy.cuda.Device().attributes["L2CacheSize"]) or default
    except Exception:  # attribute names differ between CuPy builds: fall back to the H100's 50 MB
        return default


# --- timing --------------------------------------------------------------------------------------------------


def host_time(fn: Callable[[], Any], min_s: float = 0.2, reps: int = 5) -> float:
    """Median wall seconds per call of a host function (the numpy reference): ``reps`` batches of calls, each
    batch long enough to last about ``min_s / reps``."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    calls = max(1, int(min_s / reps / one))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def wall_per_call(fn: Callable[[], Any], sync: Callable[[], Any], calls: int = 200, reps: int = 5) -> float:
    """Median wall seconds per call, no graph: ``calls`` back-to-back calls then one ``sync()``, ``reps`` times,
    after warm-up calls (compiles and caches stay out). When the host is slower than the kernels, this is the
    host's time per call (validation, allocation, launch)."""
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def latency_per_call(fn: Callable[[], Any], sync: Callable[[], Any], calls: int = 100) -> float:
    """Median wall seconds of one call followed by ``sync()`` (what a caller that waits for each result sees)."""
    for _ in range(3):
        fn()
        sync()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cupy_sync() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def cupy_mean_time(fn: Callable[[], Any], iters: int = 20) -> float:
    """Mean seconds per call over ``iters`` after 3 warm-ups, CUDA events on the current stream (eager calls:
    host overhead included when it exceeds the kernel time)."""
    import cupy

    for _ in range(3):
        fn()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / 1e3 / iters


def cupy_median_time(run: Callable[[], Any], reps: int, stream: Any = None) -> float:
    """Median seconds of ``run()`` over ``reps`` timings with CUDA events on ``stream``, after a warm-up."""
    import cupy

    run()
    (stream or cupy.cuda.get_current_stream()).synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record(stream)
        run()
        e1.record(stream)
        e1.synchronize()
        times.append(cupy.cuda.get_elapsed_time(e0, e1) / 1e3)
    return statistics.median(times)


def time_cupy(
    launches: Sequence[Callable[[], Any]],
    reps: int,
    calls: int | None = None,
    log: Callable[[str], None] = print,
) -> tuple[float, str]:
    """Seconds per call of CuPy-stream launches (mxrt, raw kernels) and the method: a CuPy stream-capture graph of
    ``calls`` launches round-robin over ``launches`` (default: about 20 ms of work), else events around a loop."""
    import cupy

    cupy.cuda.Device().synchronize()  # input generation on the null stream must not overlap the timing
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for f in launches:  # compile and warm outside the capture
            f()
        stream.synchronize()
        if calls is None:
            t0 = time.perf_counter()
            launches[0]()
            stream.synchronize()
            calls = calls_per_graph(time.perf_counter() - t0, len(launches))
        try:
            stream.begin_capture()
            try:
                for i in range(calls):
                    launches[i % len(launches)]()
            finally:
                graph = stream.end_capture()
            return cupy_median_time(lambda: graph.launch(stream), reps, stream) / calls, "graph"
        except Exception as e:  # a launch that cannot be captured (host sync, allocation): time it eagerly
            log(f"    cupy capture failed ({type(e).__name__}: {str(e)[:120]}); events around {calls} calls")
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:

        def loop() -> None:
            for i in range(calls):
                launches[i % len(launches)]()

        return cupy_median_time(loop, reps, stream) / calls, "events"


def torch_median_time(run: Callable[[], Any], reps: int) -> float:
    import torch

    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        run()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3)
    return statistics.median(times)


def time_torch(
    launches: Sequence[Callable[[], Any]], reps: int, log: Callable[[str], None] = print
) -> tuple[float, str]:
    """Seconds per call of torch / Triton launches and the method: torch CUDA-graph replays, else events."""
    import torch

    torch.cuda.synchronize()
    for f in launches:  # compile / autotune / warm outside the capture
        f()
    torch.cuda.synchronize()
    t_one = torch_median_time(launches[0], 3)
    calls = calls_per_graph(t_one, len(launches))
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for f in launches:
                f()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="relaxed"):
            for i in range(calls):
                launches[i % len(launches)]()
        g.replay()
        torch.cuda.synchronize()
        t = torch_median_time(g.replay, reps) / calls
        del g
        return t, "graph"
    except Exception as e:  # a launch that cannot be captured: time it eagerly
        torch.cuda.synchronize()
        log(f"    graph capture failed ({type(e).__name__}: {str(e)[:120]}); events around {calls} calls")

        def loop() -> None:
            for i in range(calls):
                launches[i % len(launches)]()

        return torch_median_time(loop, reps) / calls, "events"


# --- device copy: the bandwidth reference ---------------------------------------------------------------------

COPY16 = r"""
extern "C" __global__ void __launch_bounds__(256) copy16(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                         unsigned long long n) {
  const unsigned long long base = ((unsigned long long)blockIdx.x * 8 + threadIdx.x / 32) * 128 + threadIdx.x % 32;
  uint4 v[4];
#pragma unroll
  for (int u = 0; u < 4; ++u)
    if (base + u * 32 < n) v[u] = src[base + u * 32];
#pragma unroll
  for (int u = 0; u < 4; ++u)
    if (base + u * 32 < n) dst[base + u * 32] = v[u];
}
"""


def copy_launches(nbytes: int, l2: int) -> tuple[list[Callable[[], Any]], int]:
    """Launches of a 16-byte vector copy kernel moving ``nbytes / 2`` in and out (4 x 16-byte loads in flight per
    lane, the quantizers' access pattern) over buffer sets rotating past 3x the L2, and the bytes moved."""
    import cupy

    kernel = cupy.RawKernel(COPY16, "copy16")
    n16 = max(1, nbytes // 2 // 16)
    launches = []
    for _ in range(max(1, -(-3 * l2 // max(1, nbytes)))):
        src, dst = cupy.ones(n16 * 16, cupy.uint8), cupy.empty(n16 * 16, cupy.uint8)
        grid = (-(-n16 // 1024),)
        launches.append(lambda src=src, dst=dst, grid=grid: kernel(grid, (256,), (src, dst, np.uint64(n16))))
    return launches, 2 * n16 * 16


def copy_bandwidth(l2: int, nbytes: int = 512 << 20) -> dict[str, float]:
    """Peak device-to-device copy bandwidth (bytes read + written per second) over ``nbytes``, three ways:
    cudaMemcpyAsync on a plain stream (a graph memcpy node goes to the copy engines, ~20% slower on H100),
    CuPy's copyto of 16-byte elements, and the vector copy kernel."""
    import cupy

    src, dst = cupy.ones(nbytes, cupy.uint8), cupy.empty(nbytes, cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:

        def loop() -> None:
            for _ in range(8):
                cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, 3, stream.ptr)

        t_memcpy = cupy_median_time(loop, 7, stream) / 8
    s16, d16 = src.view(cupy.complex128), dst.view(cupy.complex128)
    launches, moved = copy_launches(2 * nbytes, l2)
    return {
        "cudaMemcpyAsync": 2 * nbytes / t_memcpy,
        "copyto16": 2 * nbytes / time_cupy([lambda: cupy.copyto(d16, s16)], 7, calls=8)[0],
        "copy16 kernel": moved / time_cupy(launches, 7, calls=8)[0],
    }


# --- tables and plots ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One table column: header, cell text of a row, right-aligned (numbers) or not."""

    head: str
    cell: Callable[[dict], str]
    right: bool = False


def fmt_num(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def markdown_table(rows: Sequence[dict], columns: Sequence[Column]) -> str:
    head = "| " + " | ".join(c.head for c in columns) + " |"
    rule = "|" + "|".join("---:" if c.right else "---" for c in columns) + "|"
    return "\n".join([head, rule] + ["| " + " | ".join(c.cell(r) for c in columns) + " |" for r in rows])


def plot_missing() -> str | None:
    """Why ``--plot`` cannot work here (matplotlib missing), or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return PLOT_MISSING
    return None


@dataclass(frozen=True)
class Panel:
    """One bar chart: ``groups`` along x, one bar per series in each group (None: no bar)."""

    title: str
    ylabel: str
    groups: list[str]
    series: dict[str, list[float | None]]
    log_y: bool = False


def bar_plot(path: str, panels: Sequence[Panel], suptitle: str = "") -> None:
    """Grouped bar charts, one panel per row of the figure, written to ``path`` (png, svg, pdf by suffix).

    Uses matplotlib's object API (no pyplot, no GUI backend), so it runs headless and in tests.
    """
    from matplotlib.figure import Figure

    panels = [p for p in panels if p.groups and p.series]
    if not panels:
        panels = [Panel("no timed rows", "", ["-"], {"-": [None]})]
    width_in = max(8.0, 0.9 * max(len(p.groups) * max(1, len(p.series)) ** 0.5 for p in panels))
    fig = Figure(figsize=(min(width_in, 28.0), 4.2 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, p in zip(axes, panels, strict=True):
        n = max(1, len(p.series))
        width = 0.8 / n
        x = np.arange(len(p.groups))
        for i, (name, values) in enumerate(p.series.items()):
            ys = [np.nan if v is None else v for v in values]
            ax.bar(x + (i - (n - 1) / 2) * width, ys, width, label=name)
        ax.set_xticks(
            x, p.groups, rotation=30 if len(p.groups) > 4 else 0, ha="right" if len(p.groups) > 4 else "center"
        )
        ax.set_ylabel(p.ylabel)
        ax.set_title(p.title)
        if p.log_y:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize="small", ncols=min(4, n))
    if suptitle:
        fig.suptitle(suptitle)
    fig.savefig(path, dpi=120)
