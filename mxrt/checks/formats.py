"""``mxrt check`` cases for mxrt.formats."""

from __future__ import annotations

CASES: list = []
