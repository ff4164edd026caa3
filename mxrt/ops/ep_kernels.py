"""Kernel specs, variants and limits of mxrt.ep's device layout kernels (kernels_src/moe/ep_*.hip), launched by
:mod:`mxrt.ops.ep_route`: the send order and counts (``ep_route_count`` + ``ep_route_scatter``), the row moves of
both sides (``ep_gather_rows``) and the receive maps (``ep_recv_map``)."""

from __future__ import annotations

from ..runtime.kernel_spec import KernelSpec, define_grid

THREADS = 256
#: bins (E + 1: experts and the bad-id bin) and (rank, local expert) segments held in shared memory (ep_route.h)
MAX_BINS = 4097
MAX_SEGS = 4096
#: fewest pairs per CTA of the send layout, and most CTAs (each scatter CTA reads every CTA's histogram)
MIN_CHUNK = 1024
MAX_ROUTE_CTAS = 256
#: most CTAs of one ep_gather_rows launch (it grid-strides over rows beyond: ~8 resident waves on 132 SMs)
MAX_GATHER_CTAS = 8192
#: most CTAs of ep_recv_map (each builds the segment tables once, then grid-strides over grouped rows)
MAX_MAP_CTAS = 256
#: row-move units, widest first: a launch takes the widest that divides every pointer, width and row stride
UNITS = (16, 8, 4, 2, 1)

_ROUTE_VARIANTS = define_grid(ID_BYTES=(4, 8), THREADS=(THREADS,))

EP_ROUTE_COUNT = KernelSpec(
    symbol="ep_route_count", file="moe/ep_route_count.hip", required=("ID_BYTES", "THREADS"), variants=_ROUTE_VARIANTS
)
EP_ROUTE_SCATTER = KernelSpec(
    symbol="ep_route_scatter",
    file="moe/ep_route_scatter.hip",
    required=("ID_BYTES", "THREADS"),
    variants=_ROUTE_VARIANTS,
)
EP_RECV_MAP = KernelSpec(
    symbol="ep_recv_map",
    file="moe/ep_recv_map.hip",
    required=("ID_BYTES", "THREADS"),
    variants=define_grid(ID_BYTES=(8,), THREADS=(THREADS,)),
)
EP_GATHER_ROWS = KernelSpec(
    symbol="ep_gather_rows",
    file="moe/ep_gather_rows.hip",
    required=("THREADS", "UNIT"),
    variants=define_grid(THREADS=(THREADS,), UNIT=UNITS),
)

SPECS = (EP_ROUTE_COUNT, EP_ROUTE_SCATTER, EP_RECV_MAP, EP_GATHER_ROWS)
DISPATCH = {
    "ep_route_count": {"generic": EP_ROUTE_COUNT},
    "ep_route_scatter": {"generic": EP_ROUTE_SCATTER},
    "ep_recv_map": {"generic": EP_RECV_MAP},
    "ep_gather_rows": {"generic": EP_GATHER_ROWS},
}
