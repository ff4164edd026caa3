"""Launch configurations (frozen, computed apart from building) and the launch itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ShapeError
from .alloc import after_launch

MAX_GRID_X = 2**31 - 1
MAX_GRID_YZ = 65535


@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0

    def check(self, op: str) -> None:
        gx, gy, gz = self.grid
        if not (1 <= gx <= MAX_GRID_X and 1 <= gy <= MAX_GRID_YZ and 1 <= gz <= MAX_GRID_YZ):
            raise ShapeError(f"{op}: launch grid {self.grid} is beyond the limits ({MAX_GRID_X}, 65535, 65535)")


def launch(op: str, kernel: Any, cfg: LaunchConfig, args: tuple[Any, ...]) -> None:
    """Launch on CuPy's current stream. CuPy raises on a failed launch; asynchronous faults surface at the
    next synchronisation, or right here inside ``mxrt.runtime.debug(sync_after_launch=True)`` (the GPU tests)."""
    cfg.check(op)
    kernel(cfg.grid, cfg.block, args, shared_mem=cfg.shared_mem)
    after_launch(op, kernel, cfg.grid, cfg.block)
