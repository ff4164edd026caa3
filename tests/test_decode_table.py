"""The tuned decode table (CPU): bucket choice, device fallback, user file over the shipped one, routing to another
path, schema validation with typed errors, the shipped file (package data, the session-5 defaults), and
``mxrt tune gemm``'s selection and merge on fake timings, plus its refusal without a GPU."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from mxrt import cli, runtime
from mxrt.bench import tune
from mxrt.config import ENV_GEMM_PATH, ENV_TUNED_TABLE, tuned_table_path
from mxrt.errors import MxrtError, UnsupportedArchError
from mxrt.ops import decode_table as T
from mxrt.ops import gemm_decode, gemm_paths
from mxrt.ops.gemm_paths import GemmPath, select_gemm_path
from mxrt.runtime.arch import Arch

#: every test gets its own (absent) user table and fresh memos (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("user_table")

ROOT = Path(__file__).resolve().parents[1]
DEV = "NVIDIA H100 80GB HBM3"
H100 = Arch(vendor="nvidia", target="sm_90a", name=DEV, wave_size=32, num_cus=132, smem_per_block=232448)


def write(path: Path, cells: dict, device: str = DEV, target: str = "sm_90a", schema: int = 1) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": schema, "meta": {}, "targets": {target: {device: cells}}}))
    gemm_decode.reload_table()


def dense(m=1, n=7168, k=12288, arch=H100):
    p = NS(m=m, n=n, k=k, k_blocks=k // 32, split_k=1, a_scale_layout=None, b_scale_layout=None, b_weight_layout=None,
           out_dtype="bfloat16", a_fmt="e4m3", b_fmt="e4m3", op="gemm_mx")  # fmt: skip
    buf = NS(data=NS(ptr=0x10000))
    return NS(p=p, a_codes=buf, b_codes=buf, a_scales=buf, b_scales=buf, arch=arch)


def test_buckets():
    assert [T.bucket(m) for m in (1, 2, 3, 4, 5, 8, 9, 16, 17, 33, 64)] == [1, 2, 4, 4, 8, 8, 16, 16, 32, 64, 64]
    with pytest.raises(ValueError):
        T.bucket(65)
    assert T.lookup("sm_90a", DEV, 7168, 12288, 65) is None


def test_default_user_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv(ENV_TUNED_TABLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tuned_table_path() == tmp_path / "mxrt" / "tuned_decode.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert tuned_table_path() == Path.home() / ".cache" / "mxrt" / "tuned_decode.json"


def test_shipped_table_is_package_data_with_measured_cells_only():
    assert T.shipped_path().is_file()
    assert 'mxrt = ["py.typed", "data/*.json"]' in (ROOT / "pyproject.toml").read_text()  # non-editable installs
    cells, meta = T.load_file(T.shipped_path())
    assert "measured cells only" in meta["source"]
    assert {tuple(r["argv"][:2]) for r in meta["runs"]} == {("tune", "gemm")}
    # the 15 N x K decode cells of benchmarks/bench_decode.py (TP 1 and 8) at every bucket up to 64, measured on an
    # H200, and those cells and the 7168 x 4096 at buckets 1-8 as `mxrt tune gemm` measured them on the H100
    # (session 25); from M 16 most H200 entries name sm90_decode_wg (session 12), which an H100 then takes too (its
    # own M >= 16 entries, measured before that path existed, were dropped)
    h100 = {(n, k, mb) for (_, d, n, k, mb, f) in cells if d == DEV and f == "e4m3"}
    h200 = {(n, k, mb) for (_, d, n, k, mb, f) in cells if d == "NVIDIA H200" and f == "e4m3"}
    h100_nk = {(n, k) for n, k, _ in h200} | {(7168, 4096)}
    assert h100 == {(n, k, mb) for n, k in h100_nk for mb in T.M_BUCKETS if mb <= 8}
    fp8 = [key for key in cells if key[5] == "e4m3"]
    assert len({(n, k) for n, k, _ in h200}) == 15 and len(h200) == 15 * 7 and len(fp8) == len(h100) + len(h200)
    paths = {}
    for (target, device, n, k, mb, w_fmt), e in cells.items():
        assert target == "sm_90a" and e.path in ("sm90_decode", "sm90_decode_wg")
        assert e.us is not None  # measured
        if w_fmt == "e4m3":  # the e2m1 entries: tests/test_decode_table_w_fmt.py
            paths.setdefault(e.path, set()).add(mb)
        if e.path == "sm90_decode":
            c, split = gemm_decode.plan(mb, n, k, 1, 132, "sm_90a", device, fmts=("e4m3", w_fmt))
            assert (c.kw, c.stages, c.rt, split) == (e.kw, e.stages, e.rt or 1, e.split)
    assert paths["sm90_decode_wg"] <= {16, 32, 64} and 64 in paths["sm90_decode_wg"]
    assert T.lookup("sm_90a", DEV, 7168, 8192, 40).path == "sm90_decode_wg"  # an H100 takes the H200's entry
    assert T.lookup("sm_90a", DEV, 7168, 4096, 40) is None  # no entry left: the envelope default


def test_lookup_device_fallback_and_misses():
    e = T.lookup("sm_90a", DEV, 7168, 4096, 3)
    assert e is not None and e.path == "sm90_decode"
    assert T.lookup("sm_90a", "NVIDIA H100 PCIe", 7168, 4096, 3) == e  # any device of the target
    assert T.lookup("sm_100a", DEV, 7168, 4096, 3) is None
    assert T.lookup("sm_90a", DEV, 7168, 6144, 3) is None  # not a shipped cell: the envelope default runs
    assert gemm_decode.plan(3, 7168, 6144, 1, 132, "sm_90a", DEV) == gemm_decode.plan(3, 7168, 6144, 1, 132)


def test_user_table_overrides_shipped(user_table: Path):
    write(user_table, {"7168x12288": {"4": {"path": "sm90_decode", "kw": 8, "stages": 2, "split": 2, "us": 9.5}}})
    e = T.lookup("sm_90a", DEV, 7168, 12288, 3)
    assert e == T.Entry("sm90_decode", 8, 2, 2, 9.5)
    assert T.lookup("sm_90a", DEV, 7168, 12288, 1) is None  # no shipped cell: the envelope default runs
    c, split = gemm_decode.plan(3, 7168, 12288, 1, 132, "sm_90a", DEV)
    assert (c.mt, c.kw, c.stages, split) == (1, 8, 2, 2)
    assert gemm_decode.plan(3, 7168, 12288, 2, 132, "sm_90a", DEV)[0].kw == 8  # the entry's own split
    assert gemm_decode.plan(3, 7168, 12288, 3, 132, "sm_90a", DEV) == gemm_decode.plan(3, 7168, 12288, 3, 132)
    # another device's user entry still beats the shipped file of this device
    write(user_table, {"7168x12288": {"4": {"path": "sm90_decode", "kw": 4, "stages": 4, "split": 1}}}, "Other")
    assert T.lookup("sm_90a", DEV, 7168, 12288, 4).stages == 4


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch):
    """A registry of the real decode path and a stand-in sm90_wgmma (its support answer set per test)."""
    decode = next(p for p in gemm_paths.gemm_paths("sm_90a") if p.name == "sm90_decode")
    state = {"why": None}
    wg = GemmPath("sm90_wgmma", "sm_90a", 20, lambda dg: state["why"], lambda dg: None)
    monkeypatch.setattr(gemm_paths, "_PATHS", {"sm90_decode": decode, "sm90_wgmma": wg})
    monkeypatch.setattr(gemm_paths, "_SORTED", {})
    return state


def test_an_entry_whose_rings_outgrow_a_layouts_staged_words_runs_the_defaults(user_table: Path):
    """A scattered scale layout stages 4 words per row: an entry that fits shared memory only with row-major
    scales (kw 4, 6 stages, RT 4 at M = 1: 229,312 B) gives way to the envelope defaults for those calls."""
    write(user_table, {"7168x4096": {"1": {"path": "sm90_decode", "kw": 4, "stages": 6, "rt": 4, "split": 1}}})
    c, split = gemm_decode.plan(1, 7168, 4096, 1, 132, "sm_90a", DEV)
    assert (c.kw, c.stages, c.rt, split) == (4, 6, 4, 1)
    for layouts in ((0, 5), (0, 1), (2, 2)):  # weights in turbo16x4 words / aiter32x8, both in turbo16x4 bytes
        assert gemm_decode.plan(1, 7168, 4096, 1, 132, "sm_90a", DEV, layouts) == gemm_decode.plan(
            1, 7168, 4096, 1, 132, layouts=layouts
        )
    # cublas128x4 / deepgemm_ue8m0 stage one word per row, as row-major does, and 8 scattered token rows add only
    # 96 B per stage (231,616 B): the entry runs
    assert gemm_decode.plan(1, 7168, 4096, 1, 132, "sm_90a", DEV, (3, 4)) == (c, split)
    assert gemm_decode.plan(1, 7168, 4096, 1, 132, "sm_90a", DEV, (1, 0)) == (c, split)


def test_path_entry_routes_to_the_other_path(user_table: Path, registry: dict, monkeypatch: pytest.MonkeyPatch):
    assert gemm_decode.supports(dense()) is None
    assert select_gemm_path(dense()).name == "sm90_decode"
    write(user_table, {"7168x12288": {"1": {"path": "sm90_wgmma", "us": 30.0}}})
    assert gemm_decode.supports(dense()) == "tuned table routes it to sm90_wgmma"
    assert select_gemm_path(dense()).name == "sm90_wgmma"
    assert gemm_decode.supports(dense(m=2)) is None  # another bucket: the shipped decode entry
    monkeypatch.setenv(ENV_GEMM_PATH, "sm90_decode")  # forcing the decode path ignores the routing
    assert select_gemm_path(dense()).name == "sm90_decode"
    monkeypatch.delenv(ENV_GEMM_PATH)
    registry["why"] = "declines"  # the routed path cannot run the call: the decode path keeps it
    assert gemm_decode.supports(dense()) is None
    write(user_table, {"7168x12288": {"1": {"path": "no_such_path"}}})
    assert gemm_decode.supports(dense()) is None
    with pytest.raises(UnsupportedArchError):
        select_gemm_path(dense(m=65), "sm90_decode")


GOOD = {"path": "sm90_decode", "kw": 2, "stages": 3, "split": 1}


@pytest.mark.parametrize(
    "cells,field",
    [
        ({"7168x4096": {"1": {**GOOD, "kw": 3}}}, "7168x4096.1.kw"),
        ({"7168x4096": {"1": {**GOOD, "stages": "3"}}}, "7168x4096.1.stages"),
        ({"7168x4096": {"64": {**GOOD, "kw": 8, "stages": 6}}}, "7168x4096.64.stages"),  # over the shared memory
        ({"7168x4096": {"1": {**GOOD, "split": 33}}}, "7168x4096.1.split"),  # more splits than groups of 4 blocks
        ({"7168x4096": {"1": {**GOOD, "split": True}}}, "7168x4096.1.split"),
        ({"7168x4096": {"1": {"path": "sm90_decode", "kw": 2, "stages": 3}}}, "7168x4096.1.split"),
        ({"7168x4096": {"1": {**GOOD, "tile": 4}}}, "7168x4096.1.tile"),
        ({"7168x4096": {"1": {**GOOD, "us": -1}}}, "7168x4096.1.us"),
        ({"7168x4096": {"1": {"kw": 2}}}, "7168x4096.1.path"),
        ({"7168x4096": {"3": GOOD}}, "7168x4096.3"),
        ({"7168x4096": {"128": GOOD}}, "7168x4096.128"),
        ({"7168*4096": {"1": GOOD}}, "7168*4096"),
        ({"7168x4096": []}, "7168x4096"),
    ],
)
def test_schema_errors_name_the_file_and_field(user_table: Path, cells: dict, field: str):
    write(user_table, cells)
    with pytest.raises(T.TunedTableError) as ei:
        T.lookup("sm_90a", DEV, 7168, 4096, 1)
    assert ei.value.path == str(user_table) and ei.value.field == f"targets.sm_90a.{DEV}.{field}"
    assert str(user_table) in str(ei.value) and field in str(ei.value)
    assert isinstance(ei.value, MxrtError)


def test_schema_errors_top_level(user_table: Path):
    write(user_table, {}, schema=2)
    with pytest.raises(T.TunedTableError, match="schema"):
        T.lookup("sm_90a", DEV, 7168, 4096, 1)
    user_table.write_text("{not json")
    gemm_decode.reload_table()
    with pytest.raises(T.TunedTableError, match="<file>"):
        T.lookup("sm_90a", DEV, 7168, 4096, 1)
    user_table.write_text(json.dumps({"schema": 1, "targets": []}))
    gemm_decode.reload_table()
    with pytest.raises(T.TunedTableError, match="targets"):
        T.lookup("sm_90a", DEV, 7168, 4096, 1)


def test_lookups_are_memoised(user_table: Path):
    write(user_table, {"7168x4096": {"1": GOOD}})
    assert T.lookup("sm_90a", DEV, 7168, 4096, 1) == T.Entry("sm90_decode", 2, 3, 1)
    user_table.write_text("{broken")  # not read again until the memo is cleared
    assert T.lookup("sm_90a", DEV, 7168, 4096, 1) == T.Entry("sm90_decode", 2, 3, 1)
    gemm_decode.reload_table()
    with pytest.raises(T.TunedTableError):
        T.lookup("sm_90a", DEV, 7168, 4096, 1)


# --- the tuner -----------------------------------------------------------------------------------------------


def test_decode_candidates():
    cands = tune.decode_candidates(1, 7168, 4096, 132)
    c, split = gemm_decode.plan(1, 7168, 4096, 1, 132)
    assert cands[0] == tune.Candidate("sm90_decode", c.kw, c.stages, split, c.rt)
    assert len(set(cands)) == len(cands)
    assert {x.rt for x in cands} == {1, 2, 4}  # MT 1 builds take RT 1, 2, 4: M = 1 tries them all
    assert {x.rt for x in tune.decode_candidates(64, 7168, 4096, 132)} == {1, 2}  # MT 8: RT * MT <= 16
    assert {x.split for x in cands if x.rt == 1} == {1}  # 448 CTAs fill 132 SMs: no K split tried
    assert {x.split for x in cands if x.rt == 4} == {1, 2, 4}  # 112 CTAs of 64 rows do not
    small = tune.decode_candidates(64, 1280, 8192, 132)
    assert {x.split for x in small} >= {1, 2, 4} and all(x.split * x.kw <= 64 for x in small[1:])
    assert all(T.parse_entry(x.entry(1e-5).as_dict(), "f", "e", 1280, 8192, 64) for x in small)  # all valid


def test_best_entry_and_merge():
    a, b, c = (tune.Candidate("sm90_decode", 2, s, 1, 1) for s in (2, 3, 4))
    wg = tune.Candidate("sm90_wgmma")
    assert tune.best_entry([(a, 20e-6), (b, None), (wg, 15e-6), (c, 18e-6)]) == T.Entry("sm90_wgmma", us=15.0)
    assert tune.best_entry([(a, 20e-6), (b, 20e-6)]).stages == 2  # a tie: the first listed
    assert tune.best_entry([(a, None)]) is None and tune.best_entry([]) is None
    key = ("sm_90a", DEV, 7168, 4096)
    old = {(*key, 1, "e4m3"): T.Entry("sm90_wgmma"), (*key, 2, "e4m3"): T.Entry("x"), (*key, 1, "e2m1"): T.Entry("y")}
    new = {(*key, 1, "e4m3"): a.entry(1e-5)}
    merged = tune.merge(old, new)
    assert merged[(*key, 1, "e4m3")] == T.Entry("sm90_decode", 2, 2, 1, 10.0, 1)
    assert merged[(*key, 2, "e4m3")] == T.Entry("x")
    assert merged[(*key, 1, "e2m1")] == T.Entry("y")  # another weight format's entry of the cell is kept


def test_tune_gemm_on_fake_timings_merges_and_reloads(user_table: Path, monkeypatch: pytest.MonkeyPatch):
    """The whole command with the GPU timing replaced: best per cell, merged into the user table, memo cleared."""
    write(user_table, {"7168x4096": {"1": {"path": "sm90_wgmma"}, "2": {"path": "sm90_wgmma"}}})
    assert T.lookup("sm_90a", DEV, 7168, 4096, 1).path == "sm90_wgmma"
    monkeypatch.setattr(runtime, "device_available", lambda: True)
    monkeypatch.setattr(runtime, "get_arch", lambda: H100)

    def fake_cell(ses, arch, m, n, k, reps, w_fmt="e4m3", paths=None):
        cands = [*tune.decode_candidates(m, n, k, arch.num_cus), tune.Candidate("sm90_wgmma")]
        # the deepest ring of the widest CTA wins; the wgmma path fails
        times = [(c, None if c.kw is None else 1e-5 * (10 - c.kw - c.stages / 10)) for c in cands]
        return tune.best_entry(times)

    monkeypatch.setattr(tune, "tune_cell", fake_cell)
    assert cli.main(["tune", "gemm", "--shapes", "1x7168x4096,3x1280x8192", "--no-progress"]) == 0
    doc = json.loads(user_table.read_text())
    assert doc["meta"]["runs"][-1]["device"] == DEV and doc["meta"]["written_by"] == "mxrt tune gemm"
    cells, _ = T.load_file(user_table)
    assert cells[("sm_90a", DEV, 7168, 4096, 2, "e4m3")].path == "sm90_wgmma"  # kept
    assert "w_fmts" not in doc and doc["meta"]["runs"][-1]["formats"] == "e4m3 x e4m3"  # an fp8 run: as before
    e = T.lookup("sm_90a", DEV, 7168, 4096, 1)  # re-read without a manual reset
    assert (e.path, e.kw) == ("sm90_decode", 8) and e.us is not None
    assert T.lookup("sm_90a", DEV, 1280, 8192, 3).kw == 8  # stored under bucket 4


def test_tune_gemm_refuses_without_gpu(user_table: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    monkeypatch.setattr(runtime, "device_available", lambda: False)
    out = user_table.parent / "t.json"
    assert cli.main(["tune", "gemm", "--shapes", "1x7168x4096", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "mxrt tune gemm: no GPU" in err and "nothing was written" in err
    assert not out.exists()


def test_tune_gemm_bad_arguments(user_table: Path, capsys):
    assert cli.main(["tune", "gemm", "--shapes", "65x7168x4096"]) == 2
    assert "m = 65" in capsys.readouterr().err
    assert cli.main(["tune", "gemm", "--shapes", "1x7168x4000"]) == 2
    assert "multiple of 128" in capsys.readouterr().err
    bad = user_table.parent / "bad.json"
    write(bad, {"7168x4096": {"1": {"path": ""}}})
    assert cli.main(["tune", "gemm", "--shapes", "1x7168x4096", "--out", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


def test_e2m1_weights_route_by_token_count(user_table: Path):
    """MXFP4 weights leave the MXFP8-tuned table aside: above ``E2M1_MIN_M`` tokens the wgmma kernel, at or below it
    sm90_decode, whatever the cell's entry names; fp8 weights of the same cell follow the entry."""
    from support.gemm_cases import sm90_device_gemm

    from mxrt.ops import gemm_decode_wg

    write(user_table, {"7168x4096": {"32": {"path": "sm90_decode", "kw": 8, "stages": 2, "split": 1}}})
    gemm_decode.reload_table()
    lim = gemm_decode_wg.E2M1_MIN_M
    assert lim == 8

    def dg(m, b_fmt):
        return sm90_device_gemm(m=m, n=7168, k=4096, b_fmt=b_fmt, arch=H100)

    assert gemm_decode.supports(dg(32, "e2m1")) == "m = 32 > 8 with e2m1 weights: routed to sm90_decode_wg"
    assert select_gemm_path(dg(32, "e2m1")).name == gemm_decode_wg.NAME
    assert select_gemm_path(dg(9, "e2m1")).name == gemm_decode_wg.NAME
    assert select_gemm_path(dg(8, "e2m1")).name == "sm90_decode"
    assert select_gemm_path(dg(32, "e4m3")).name == "sm90_decode"  # the entry
    assert select_gemm_path(dg(64, "e4m3")).name == gemm_decode_wg.NAME  # no entry: the envelope default


def test_stream_k_grid_choice():
    """The wgmma decode path's grid: stream-K only where the older grid leaves SMs idle (a quarter of them in its
    only wave, or a tail wave under 90% full) and each CTA keeps enough units: the cells measured faster."""
    from mxrt.ops import gemm_decode_wg

    assert gemm_decode_wg.sk_ctas(10240, 8192, 132) == 132  # 160 slabs: 1.21 waves
    assert gemm_decode_wg.sk_ctas(36864, 7168, 132) == 132  # 576 slabs: 4.36 waves
    assert gemm_decode_wg.sk_ctas(4608, 7168, 132) == 132  # 72 slabs, 30 units per CTA
    assert gemm_decode_wg.sk_ctas(7168, 8192, 132) == 0  # 112 slabs: 85% of the SMs in one wave
    assert gemm_decode_wg.sk_ctas(57344, 8192, 132) == 0  # 896 slabs: a 79% tail after 6 full waves: 97% overall
    assert gemm_decode_wg.sk_ctas(4608, 2048, 132) == 0  # short K: 8.7 units per CTA
    assert gemm_decode_wg.sk_ctas(1280, 8192, 132) == 0  # 20 slabs: the K split of the older grid
