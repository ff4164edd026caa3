"""``mxrt check`` cases for mxrt.layouts, and the independent layout oracles the tests share.

The implementation builds scale/weight layouts by reshape/transpose and group layouts by vectorised index
arithmetic; the oracles here walk the *inverse* index maps of MX_REFERENCE.md (offset -> (row, col)), torchao's
``to_blocked`` view chain, shifts for DeepGEMM packing, and plain Python loops for the group/MoE layouts, so a
mistake in one is not repeated in the other.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .core import CheckRow, mismatches


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def padded_scales(s: np.ndarray, sm: int, sn: int, pad_value: int) -> np.ndarray:
    out = np.full((sm, sn), pad_value, np.uint8)
    out[: s.shape[0], : s.shape[1]] = s
    return out


def scale_coords(layout: str, o: np.ndarray, sm: int, sn: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) stored at flat offset ``o`` (bytes) by the inverse maps of MX_REFERENCE.md 3a, 3b, 3d, 3e."""
    o = np.asarray(o, np.int64)
    if layout == "aiter32x8":
        i0, t = o // ((sn // 8) * 256), o % ((sn // 8) * 256)
        i3, u = t // 256, t % 256
        i5, i2, i4, i1 = u // 64, (u % 64) // 4, (u % 4) // 2, u % 2
        return 32 * i0 + 16 * i1 + i2, 8 * i3 + 4 * i4 + i5
    if layout == "turbo16x4":
        rb, t = o // (16 * sn), o % (16 * sn)
        cb, c4, r16 = t // 64, (t % 64) // 16, t % 16
        return 16 * rb + r16, 4 * cb + c4
    if layout == "cublas128x4":
        tile, w = o // 512, o % 512
        tr, tc = tile // (sn // 4), tile % (sn // 4)
        return 128 * tr + 32 * ((w % 16) // 4) + w // 16, 4 * tc + w % 4
    if layout == "deepgemm_ue8m0":  # byte o of the MN-major int32 storage [sn/4, sm], little-endian
        word, byte = o // 4, o % 4
        t, r = word // sm, word % sm
        return r, 4 * t + byte
    raise ValueError(layout)


def scale_storage_oracle(layout: str, s: np.ndarray, sm: int, sn: int, pad_value: int = 127) -> np.ndarray:
    """The layout's flat storage (bytes) for scales ``s``, gathered through the inverse index map."""
    S = padded_scales(s, sm, sn, pad_value)
    r, c = scale_coords(layout, np.arange(sm * sn), sm, sn)
    return S[r, c]


def deepgemm_pack_oracle(s: np.ndarray, pad_value: int = 0) -> np.ndarray:
    """DeepGEMM packed UE8M0 as int32 ``[rows, ceil(cols/4)]`` values, by shifts (test_layout.py torch impl)."""
    rows, cols = s.shape
    S = padded_scales(s, rows, 4 * _cdiv(cols, 4), pad_value).astype(np.uint32)
    words = S[:, 0::4] | (S[:, 1::4] << 8) | (S[:, 2::4] << 16) | (S[:, 3::4] << 24)
    return words.view(np.int32)


def torchao_to_blocked(S: np.ndarray) -> np.ndarray:
    """torchao ``to_blocked`` on an already padded ``[128*i, 4*j]`` matrix (returns the flat buffer)."""
    nrb, ncb = S.shape[0] // 128, S.shape[1] // 4
    blocks = S.reshape(nrb, 128, ncb, 4).transpose(0, 2, 1, 3)
    return blocks.reshape(-1, 4, 32, 4).transpose(0, 2, 1, 3).reshape(-1, 32, 16).ravel()


def weight_oracle(q: np.ndarray) -> np.ndarray:
    """aiter 16x16 weight shuffle of a 2-D ``q`` by scattering with the per-element offset formula (3b')."""
    n, k = q.shape
    np_, kk = 16 * _cdiv(n, 16), 32 * _cdiv(k, 32)
    kp = 16 // q.dtype.itemsize
    nn, kx = np.meshgrid(np.arange(n), np.arange(k), indexing="ij")
    n0, n1 = nn // 16, nn % 16
    k0, k1, k2 = kx // 32, (kx % 32) // kp, kx % kp
    o = n0 * 16 * kk + k0 * 512 + k1 * 16 * kp + n1 * kp + k2
    out = np.zeros(np_ * kk, q.dtype)
    out[o.ravel()] = q.ravel()
    return out.reshape(np_, kk)


def moe_align_oracle(topk_ids: np.ndarray, block_size: int, num_experts: int) -> tuple[list, list, int]:
    """vLLM moe_align_block_size by a Python loop (ascending flat index inside an expert, ids >= E skipped)."""
    flat = [int(v) for v in np.asarray(topk_ids).ravel()]
    numel = len(flat)
    cap = numel + num_experts * (block_size - 1)
    sorted_ids = [numel] * cap
    expert_ids = [0] * _cdiv(cap, block_size)
    pos = 0
    for e in range(num_experts):
        members = [i for i, v in enumerate(flat) if v == e]
        for r, i in enumerate(members):
            sorted_ids[pos + r] = i
        nblk = _cdiv(len(members), block_size)
        for b in range(nblk):
            expert_ids[pos // block_size + b] = e
        pos += nblk * block_size
    return sorted_ids, expert_ids, pos


def moe_sorting_oracle(topk_ids, topk_weights, num_experts: int, block_size: int, expert_mask=None):
    """aiter ``run_torch_moe_sorting`` as a Python loop (padding weights 0.0)."""
    ids = np.asarray(topk_ids)
    m, topk = ids.shape
    cap = ids.size + num_experts * block_size - topk
    sorted_ids = [(topk << 24) | m] * cap
    weights = [0.0] * cap
    sorted_experts = [-1] * _cdiv(cap, block_size)
    pos, blk, skipped = 0, 0, 0
    for e in range(num_experts):
        if expert_mask is not None and expert_mask[e] == 0:
            skipped += 1
            continue
        members = [(t, j) for t in range(m) for j in range(topk) if ids[t, j] == e]
        for r, (t, j) in enumerate(members):
            sorted_ids[pos + r] = (j << 24) | t
            weights[pos + r] = float(np.float32(topk_weights[t, j]))
        nblk = _cdiv(len(members), block_size)
        for b in range(nblk):
            sorted_experts[blk + b] = e - skipped
        pos += nblk * block_size
        blk += nblk
    return sorted_ids, weights, sorted_experts, [pos, m]


def m_indices_oracle(group_lens, alignment: int) -> list[int]:
    out: list[int] = []
    for g, m in enumerate(int(v) for v in group_lens):
        out += [g] * m + [-1] * (_cdiv(m, alignment) * alignment - m)
    return out


def pad_rows_oracle(x: np.ndarray, group_lens, align: int, pad_value=0) -> np.ndarray:
    parts, src = [], 0
    for m in (int(v) for v in group_lens):
        block = np.full((_cdiv(m, align) * align, *x.shape[1:]), pad_value, x.dtype)
        block[:m] = x[src : src + m]
        parts.append(block)
        src += m
    return np.concatenate(parts) if parts else np.zeros((0, *x.shape[1:]), x.dtype)


# ---------------------------------------------------------------------------------------------- check cases

_SCALE_SHAPES = [(1, 1), (7, 33), (256, 8), (257, 9), (31, 4)]


def _codes(shape: tuple[int, int], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def check_scale_layouts(backend: str) -> Iterable[CheckRow]:
    from ..api.layouts import preshuffle_scales, unshuffle_scales
    from ..layouts import SCALE_LAYOUTS, scale_layout_shape

    for layout in SCALE_LAYOUTS:
        for i, shape in enumerate(_SCALE_SHAPES):
            s = _codes(shape, i)
            sm, sn = scale_layout_shape(layout, *shape)
            p = preshuffle_scales(s, layout, backend=backend)
            case = f"{layout} {shape[0]}x{shape[1]}"
            if layout == "deepgemm_ue8m0":
                yield mismatches("preshuffle_scales", case, backend, p, deepgemm_pack_oracle(s, 127))
                storage = np.lib.stride_tricks.as_strided(p, (sn // 4, sm), (4 * sm, 4), writeable=False)
                got = np.ascontiguousarray(storage).view(np.uint8).ravel()
                yield mismatches(
                    "preshuffle_scales", case + " storage", backend, got, scale_storage_oracle(layout, s, sm, sn)
                )
            else:
                yield mismatches("preshuffle_scales", case, backend, p.ravel(), scale_storage_oracle(layout, s, sm, sn))
            yield mismatches("unshuffle_scales", case + " round trip", backend, unshuffle_scales(p, layout, shape), s)


def check_scale_examples(backend: str) -> Iterable[CheckRow]:
    """First bytes of MX_REFERENCE.md 3a, 3b and 3e, and torchao to_blocked."""
    from ..api.layouts import preshuffle_scales

    r, c = np.indices((32, 8))
    p = preshuffle_scales((32 * c + r).astype(np.uint8), "aiter32x8", backend=backend).ravel()
    ex = [(0, 0), (16, 0), (0, 4), (16, 4), (1, 0), (17, 0), (1, 4), (17, 4), (2, 0), (18, 0)]
    yield mismatches("preshuffle_scales", "aiter32x8 first 10 bytes (3b)", backend, p[:10], [32 * b + a for a, b in ex])
    r, c = np.indices((16, 8))
    p = preshuffle_scales((16 * c + r).astype(np.uint8), "turbo16x4", backend=backend).ravel()
    expected = [16 * 0 + i for i in range(16)] + [16 * 1 + i for i in range(16)]
    yield mismatches(
        "preshuffle_scales", "turbo16x4 out[0..31], out[64] (3a)", backend, [*p[:32], p[64]], [*expected, 16 * 4 + 0]
    )
    r, c = np.indices((128, 4))
    pr = preshuffle_scales(r.astype(np.uint8), "cublas128x4", backend=backend).ravel()
    pc = preshuffle_scales(c.astype(np.uint8), "cublas128x4", backend=backend).ravel()
    yield mismatches(
        "preshuffle_scales",
        "cublas128x4 first 20 bytes (3e)",
        backend,
        np.stack([pr[:20], pc[:20]]),
        [[0] * 4 + [32] * 4 + [64] * 4 + [96] * 4 + [1] * 4, [0, 1, 2, 3] * 5],
    )
    s = _codes((300, 9), 5)
    got = preshuffle_scales(s, "cublas128x4", pad_value=0, backend=backend).ravel()
    yield mismatches(
        "preshuffle_scales",
        "cublas128x4 vs torchao to_blocked",
        backend,
        got,
        torchao_to_blocked(padded_scales(s, 384, 12, 0)),
    )


def check_weight_layout(backend: str) -> Iterable[CheckRow]:
    from ..layouts import preshuffle_weight, unshuffle_weight

    for i, shape in enumerate([(16, 32), (17, 33), (64, 256), (5, 100)]):
        q = _codes(shape, 10 + i)
        p = preshuffle_weight(q)
        yield mismatches("preshuffle_weight", f"aiter16x16 {shape[0]}x{shape[1]}", backend, p, weight_oracle(q))
        yield mismatches(
            "unshuffle_weight", f"round trip {shape[0]}x{shape[1]}", backend, unshuffle_weight(p, shape=shape), q
        )


def check_group_layouts(backend: str) -> Iterable[CheckRow]:
    from ..layouts import (
        contiguous_m_indices,
        contiguous_psum_layout,
        from_masked,
        group_lens_from_psum,
        pad_rows,
        to_masked,
        unpad_rows,
    )

    rng = np.random.default_rng(20)
    lens = np.array([0, 1, 31, 32, 33, 0, 200, 7])
    x = rng.integers(-1000, 1000, (int(lens.sum()), 3))
    for align in (32, 128):
        y = pad_rows(x, lens, align, -7)
        yield mismatches("pad_rows", f"align {align}", backend, y, pad_rows_oracle(x, lens, align, -7))
        yield mismatches("unpad_rows", f"align {align} round trip", backend, unpad_rows(y, lens, align), x)
    yield mismatches(
        "contiguous_m_indices", "alignment 128", backend, contiguous_m_indices(lens), m_indices_oracle(lens, 128)
    )
    psum = contiguous_psum_layout(lens, 32)
    yield mismatches("contiguous_psum_layout", "alignment 32 round trip", backend, group_lens_from_psum(psum, 32), lens)
    xm, mm = to_masked(x, lens, 256)
    yield mismatches("to_masked", "round trip", backend, from_masked(xm, mm), x)


def check_moe(backend: str) -> Iterable[CheckRow]:
    from ..api.layouts import moe_align_block_size
    from ..layouts import moe_sorting

    ids = np.array([[2, 3, 0], [1, 2, 0], [1, 3, 0], [1, 2, 3]])
    s, e, n = moe_align_block_size(ids, 4, 4, backend=backend)
    yield mismatches(
        "moe_align_block_size",
        "MX_REFERENCE 4c example",
        backend,
        np.concatenate([s[:16], e, n]),
        [2, 5, 8, 12, 3, 6, 9, 12, 0, 4, 10, 12, 1, 7, 11, 12, 0, 1, 2, 3, 0, 0, 16],
    )
    rng = np.random.default_rng(21)
    for t, k, num_e, bs in [(37, 4, 16, 16), (100, 8, 64, 64), (5, 2, 9, 1)]:
        ids = rng.integers(0, num_e + 2, (t, k))  # some ids >= num_experts: skipped
        got = moe_align_block_size(ids, bs, num_e, backend=backend)
        exp = moe_align_oracle(ids, bs, num_e)
        case = f"T={t} topk={k} E={num_e} bs={bs}"
        yield mismatches(
            "moe_align_block_size", case, backend, np.concatenate(got), np.concatenate([exp[0], exp[1], [exp[2]]])
        )
        w = rng.random((t, k)).astype(np.float32)
        mask = rng.integers(0, 2, num_e)
        got = moe_sorting(ids, w, num_e, bs, expert_mask=mask)
        exp = moe_sorting_oracle(ids, w, num_e, bs, mask)
        yield mismatches(
            "moe_sorting",
            case,
            backend,
            np.concatenate([got[0], got[2], got[3]]),
            np.concatenate([exp[0], exp[2], exp[3]]),
        )
        yield mismatches("moe_sorting", case + " weights", backend, got[1], np.array(exp[1], np.float32))


CASES: list = [check_scale_layouts, check_scale_examples, check_weight_layout, check_group_layouts, check_moe]
