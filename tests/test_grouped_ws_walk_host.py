"""The Hopper grouped engine's work list (kernels_src/gemm/gemm_grouped_ws_walk.h, walked by every role of
gemm_mx_grouped_sm90_ws.hip) run on the CPU: tests/support/simt_grouped_walk_host.cpp builds the schedule and walks it
for every CTA of a persistent grid on the SIMT emulator (barriers and warp reductions with forward / backward /
scrambled fiber orders), with the walk's own epilogue stores recorded element by element.

Checked against the group description, for "lens" (balanced, unbalanced, empty groups, one group holding every row,
unaligned sizes, lengths the host cannot check: short of m, past m, negative; G in {1, 4, 32}; int32 / int64),
"indices" (DeepGEMM's contiguous layout with -1 padding, ids mixed inside tiles, ids outside [0, G)) and "masked"
(masked_m from 0 to max_m and past it):

- every output element the op owns is stored exactly once and every other element never (rows of no group, masked
  rows past masked_m, -1 rows);
- the element stored at (r, c) is tile row / column (rl, cl) of a tile whose producer stages load A rows from ya with
  ya + rl == r and B rows from yb with yb + cl == group(r) * n + c, and both lie before the tile's a_end / b_end (their
  scale factors are loaded, not zeroed); the tail rows past the last group ("lens") come from tiles without stages,
  as zeros;
- per CTA, the producer's stage sequence (the TMA warp's, and each scale warp's every third stage) is the consumers'
  computed tiles in the same order, ceil(k / 128) stages each.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _hostcc import host_compiler

import mxrt

ROOT = Path(__file__).resolve().parents[1]
BM = BN = 128
_LIBS: dict[int, ctypes.CDLL] = {}
MODES = {"lens": 0, "indices": 1, "masked": 2}


def _group_m() -> int:
    text = (ROOT / "kernels_src" / "gemm" / "gemm_sm90_tile.h").read_text()
    return int(re.search(r"#define GROUP_M (\d+)", text).group(1))


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    if host_compiler() is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    return tmp_path_factory.mktemp("simt_walk")


def _lib(build_dir: Path, mode: int) -> ctypes.CDLL:
    if mode not in _LIBS:
        out = build_dir / f"simt_walk_{mode}.so"
        src = ROOT / "tests" / "support" / "simt_grouped_walk_host.cpp"
        cmd = [*host_compiler(), "-std=c++17", "-O1", "-shared", "-fPIC", f"-DMODE={mode}", f"-DGROUP_M={_group_m()}"]
        proc = subprocess.run([*cmd, str(src), "-o", str(out)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]
        so = ctypes.CDLL(str(out))
        so.simt_error.restype = ctypes.c_char_p
        _LIBS[mode] = so
    return _LIBS[mode]


def walk(build_dir, kind, groups, m, n, k, g, max_m=0, grid=5, order=0, i64=True):
    """Run the walk; returns (values [rows, n], counts, who_bid, who_item, stages [S, 10], items [I, 5])."""
    lib = _lib(build_dir, MODES[kind])
    groups = np.ascontiguousarray(groups, np.int32 if kind == "indices" or not i64 else np.int64)
    out = np.zeros((m, n), np.uint16)
    count = np.zeros((m, n), np.uint32)
    who_bid = np.full((m, n), -1, np.int32)
    who_item = np.full((m, n), -1, np.int32)
    flags = 2 if kind != "indices" and i64 else 0
    u = np.array([m, n, k, g, max_m, flags], np.uint32)
    ptr = lambda a: ctypes.c_void_p(a.ctypes.data)  # noqa: E731
    rc = lib.simt_walk(ptr(groups), ptr(out), ptr(count), ptr(who_bid), ptr(who_item), ptr(u), grid, order)
    assert rc == 0, lib.simt_error().decode()
    stages = np.zeros((lib.simt_stage_count(), 10), np.int32)
    lib.simt_stages(ptr(stages))
    items = np.zeros((lib.simt_item_count(), 5), np.int32)
    lib.simt_items(ptr(items))
    return out, count, who_bid, who_item, stages, items


def _row_groups(kind, groups, m, g, max_m):
    """The group of each output row (-1: rows the op does not own) and whether it is a tail row ("lens": zeros)."""
    groups = np.asarray(groups, np.int64)
    if kind == "lens":
        offs = np.minimum(np.concatenate([[0], np.cumsum(np.clip(groups, 0, m))]), m)
        grp = np.searchsorted(offs, np.arange(m), side="right") - 1
        tail = grp >= g
        return np.where(tail, -1, grp), tail
    if kind == "masked":
        rows = np.arange(m)
        z, local = rows // max_m, rows % max_m
        own = local < np.clip(groups, 0, max_m)[z]
        return np.where(own, z, -1), np.zeros(m, bool)
    return np.where((groups >= 0) & (groups < g), groups, -1), np.zeros(m, bool)


def check_walk(build_dir, kind, groups, m, n, k, g, max_m=0, grid=5, order=0, i64=True):
    out, count, who_bid, who_item, stages, items = walk(build_dir, kind, groups, m, n, k, g, max_m, grid, order, i64)
    grp, tail = _row_groups(kind, groups, m, g, max_m)
    owned = (grp >= 0) | tail
    # every owned element exactly once, the others never
    want = np.broadcast_to(owned[:, None], count.shape).astype(np.uint32)
    np.testing.assert_array_equal(count, want, err_msg="write counts")
    nkt = (k + 127) // 128  # ceil(ceil(k / 32) / 4)
    tma = stages[stages[:, 1] == 0]
    # per CTA: the producer stages are the consumers' computed tiles in order, nkt stages each
    first_stage = {}  # (bid, item) -> the TMA warp's record of the item's first stage
    for b in range(grid):
        mine = items[items[:, 0] == b]
        comp = mine[mine[:, 4] > 0]
        assert (mine[:, 4][mine[:, 4] > 0] == nkt).all()
        st = tma[tma[:, 0] == b]
        assert len(st) == nkt * len(comp), (b, len(st), len(comp))
        np.testing.assert_array_equal(st[:, 2], np.arange(len(st)))  # g counts the stages
        np.testing.assert_array_equal(st[:, 3], np.tile(np.arange(nkt), len(comp)))
        np.testing.assert_array_equal(st[:, 4:6], np.repeat(comp[:, 2:4], nkt, axis=0))
        for row in st.reshape(len(comp), nkt, 10):
            assert (row[:, 6:] == row[0, 6:]).all()  # ya, yb, a_end, b_end per tile
        for i, it in enumerate(comp):
            first_stage[(b, int(it[1]))] = st[i * nkt]
        for w in range(3):  # each scale warp: every third stage from w, the same records
            sw = stages[(stages[:, 0] == b) & (stages[:, 1] == 1 + w)]
            np.testing.assert_array_equal(sw[:, 2], np.arange(w, len(st), 3))
            np.testing.assert_array_equal(sw[:, 3:], st[w::3, 3:])
    if kind == "lens":  # tiles without stages: the tail group, and only there
        assert (items[items[:, 4] == 0][:, 3] == g).all() and (items[items[:, 4] > 0][:, 3] < g).all()
    # the element at (r, c): tile row / column (rl, cl) of a tile whose stages load A row r and B row grp * n + c
    r, c = np.nonzero(owned[:, None] & np.ones((1, n), bool))
    v = out[r, c].astype(np.int64)
    zero = v == 0
    np.testing.assert_array_equal(zero, tail[r], err_msg="zeros exactly on the tail rows")
    rl, cl = (v - 1) // 128, (v - 1) % 128
    table = np.zeros((grid, max(len(items), 1), 10), np.int32)  # (CTA, item) -> the item's first stage
    for (b, i), st in first_stage.items():
        table[b, i] = st
    on = ~zero
    rec = table[who_bid[r, c][on], who_item[r, c][on]]
    ya, yb, a_end, b_end = rec[:, 6], rec[:, 7], rec[:, 8], rec[:, 9]
    np.testing.assert_array_equal(ya + rl[on], r[on], err_msg="A row")
    np.testing.assert_array_equal(yb + cl[on], grp[r[on]] * n + c[on], err_msg="B row")
    assert (r[on] < a_end).all() and (grp[r[on]] * n + c[on] < b_end).all(), "a row / column with factor 0 stored"
    np.testing.assert_array_equal(b_end, (grp[r[on]] + 1) * n)
    if kind == "lens":  # a_end: the end of the row's group
        offs = np.minimum(np.concatenate([[0], np.cumsum(np.clip(groups, 0, m))]), m)
        np.testing.assert_array_equal(a_end, offs[grp[r[on]] + 1])
    elif kind == "masked":
        np.testing.assert_array_equal(a_end, grp[r[on]] * max_m + np.clip(groups, 0, max_m)[grp[r[on]]])
    else:
        assert (a_end == m).all()
    return items


def _lens(kind, g, m, rng):
    if kind == "balanced":
        return np.full(g, m // g)
    if kind == "unbalanced":  # unaligned sizes, some empty
        lens = np.floor(rng.dirichlet(np.full(g, 0.3)) * m).astype(np.int64)
        lens[0] += m - lens.sum()
        return lens
    lens = np.zeros(g, np.int64)  # one group holds every row
    lens[g // 2] = m
    return lens


@pytest.mark.parametrize(
    "g,kind,m,n,grid",
    [(1, "balanced", 1024, 199, 5), (4, "balanced", 1000, 128, 7), (4, "unbalanced", 1000, 256, 3),
     (32, "unbalanced", 2051, 199, 11), (32, "one", 777, 72, 5), (4, "one", 300, 1, 13), (3, "balanced", 90, 130, 2)],
    ids=str,
)  # fmt: skip
def test_lens(build_dir, g, kind, m, n, grid):
    rng = np.random.default_rng(g + m)
    lens = _lens(kind, g, m, rng)
    for order, i64 in ((0, True), (2, False)):
        check_walk(build_dir, "lens", lens, m, n, 272, g, grid=grid, order=order, i64=i64)


@pytest.mark.parametrize("bad", [[10, 20, 5, 0], [400, 400, 400, 400], [-5, 300, -1, 2], [0, 0, 0, 0]], ids=str)
def test_lens_the_host_cannot_check(build_dir, bad):
    """Sums short of m (tail rows: zeros from tiles without stages), past m (cut), negative (0)."""
    check_walk(build_dir, "lens", np.array(bad), 400, 72, 64, 4, grid=3, order=1)


@pytest.mark.parametrize("grid", [1, 4, 132])
def test_indices(build_dir, grid):
    """DeepGEMM's contiguous layout (128-aligned groups, -1 padding), then ids mixed inside tiles with -1 and ids
    outside [0, G) (rows of no group: never written); more CTAs than tiles (132)."""
    rng = np.random.default_rng(grid)
    lens = np.array([50, 0, 300, 7, 129, 128])
    ids = mxrt.contiguous_m_indices(lens, 128)
    items = check_walk(build_dir, "indices", ids, ids.size, 256, 384, lens.size, grid=grid)
    assert len(items) == sum(-(-int(x) // 128) for x in lens) * 2  # one round per tile, 2 column tiles
    m = 1000
    mixed = np.where(rng.random(m) < 0.2, -1, rng.integers(0, 6, m)).astype(np.int32)
    mixed[::97] = 6  # >= G: no group
    mixed[5::89] = -7
    items = check_walk(build_dir, "indices", mixed, m, 199, 64, 6, grid=grid, order=2)
    rounds = sum(len({int(x) for x in mixed[y : y + 128] if 0 <= x < 6}) for y in range(0, m, 128))
    assert len(items) == rounds * 2
    check_walk(build_dir, "indices", np.full(300, -1, np.int32), 300, 64, 64, 3, grid=grid)  # nothing to do


@pytest.mark.parametrize(
    "masked,max_m,grid",
    [([0, 0, 0, 0, 0, 0], 256, 4), ([0, 1, 127, 128, 129, 256], 256, 7), ([256] * 6, 256, 5),
     ([-3, 300, 5, 0, 255, 64], 256, 3), ([130], 130, 2), ([33] * 32, 64, 11)],
    ids=str,
)  # fmt: skip
def test_masked(build_dir, masked, max_m, grid):
    """masked_m from 0 to max_m, past it and negative (clamped); only tiles holding rows are walked."""
    masked = np.array(masked)
    g = masked.size
    items = check_walk(build_dir, "masked", masked, g * max_m, 200, 256, g, max_m=max_m, grid=grid, order=2)
    assert len(items) == sum(-(-int(x) // 128) for x in np.clip(masked, 0, max_m)) * 2
