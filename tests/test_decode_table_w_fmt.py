"""The tuned decode table's weight-format key (CPU): the optional ``w_fmts`` sub-tables beside the fp8 ``targets``,
files without them (fp8 weights only), lookups and plans per weight format, the e2m1 fallback to the envelope
defaults (never to an fp8 entry), routing by e2m1 entries, validation with typed errors, the document round trip,
and ``mxrt tune gemm --fmts``'s candidates, fallback line and table writes on fake timings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from support.gemm_cases import h100_arch, sm90_device_gemm

from mxrt import cli, runtime
from mxrt.bench import tune
from mxrt.codes import FMT_CODES
from mxrt.errors import MxrtError
from mxrt.ops import decode_table as T
from mxrt.ops import gemm_decode, gemm_decode_wg
from mxrt.ops import gemm_decode_kernels as K
from mxrt.ops.gemm_paths import select_gemm_path

#: every test gets its own (absent) user table and fresh memos (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("user_table")

DEV = "NVIDIA H100 80GB HBM3"
H100 = dataclasses.replace(h100_arch(), name=DEV)
FP8 = {"path": "sm90_decode", "kw": 2, "stages": 3, "split": 1, "rt": 1}
E2M1 = {"path": "sm90_decode", "kw": 4, "stages": 4, "split": 1, "rt": 2, "us": 13.1}
#: a build whose rings fit in shared memory with e2m1 weights (5,416 B a stage at M 1, RT 4) but not with e4m3 ones
#: (9,512 B): 8 x 4 stages = 174,336 B against 305,408 B
E2M1_ONLY = {"path": "sm90_decode", "kw": 8, "stages": 4, "split": 1, "rt": 4}


def write(path: Path, fp8: dict | None = None, e2m1: dict | None = None, **top) -> None:
    """A user table: ``fp8`` / ``e2m1`` cells (NxK -> M bucket -> entry) of DEV; ``top`` adds or replaces keys."""
    doc = {"schema": 1, "meta": {}, "targets": {"sm_90a": {DEV: fp8 or {}}}}
    if e2m1 is not None:
        doc["w_fmts"] = {"e2m1": {"sm_90a": {DEV: e2m1}}}
    doc.update(top)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    gemm_decode.reload_table()


def dg(m: int, b_fmt: str, n: int = 7168, k: int = 12288, a_fmt: str = "e4m3"):
    return sm90_device_gemm(m=m, n=n, k=k, a_fmt=a_fmt, b_fmt=b_fmt, arch=H100)


def test_table_w_fmt():
    assert [T.table_w_fmt(f) for f in ("e4m3", "e5m2", "e2m1")] == ["e4m3", "e4m3", "e2m1"]
    assert T.W_FMTS == ("e4m3", "e2m1") and T.FP8_W_FMT == "e4m3"


def test_shipped_e2m1_entries():
    """Session 21: the shipped table's 16 N x K cells at M 1-8 measured with e2m1 weights on the H100 (all on
    sm90_decode: the wgmma decode path, timed beside, won none) and on the H200 (call 5: the wgmma decode path won 8
    cells), each planned as written; the fp8 entries as before."""
    cells, meta = T.load_file(T.shipped_path())
    e2m1 = {key: e for key, e in cells.items() if key[5] == "e2m1"}
    fp8_nk = {(n, k) for (_, _, n, k, _, f) in cells if f == "e4m3"}
    h200 = "NVIDIA H200"
    assert {(d, n, k, mb) for (_, d, n, k, mb, _) in e2m1} == {
        (d, n, k, mb) for d in (DEV, h200) for n, k in fp8_nk for mb in (1, 2, 4, 8)
    }
    assert len(fp8_nk) == 16 and len(e2m1) == 128
    runs = {r["device"]: r for r in meta["runs"] if r.get("formats") == "e4m3 x e2m1"}
    assert set(runs) == {DEV, h200}
    wg = set()
    for (target, device, n, k, mb, _), e in e2m1.items():
        assert e.us is not None and e.path in ("sm90_decode", "sm90_decode_wg")
        if e.path == "sm90_decode_wg":
            wg.add((device, n, k, mb))
            continue
        c, split = gemm_decode.plan(mb, n, k, 1, 132, target, device, fmts=("e4m3", "e2m1"))
        assert (c.kw, c.stages, c.rt, split) == (e.kw, e.stages, e.rt, e.split)
    assert len(wg) == 8 and {d for d, *_ in wg} == {h200}
    # each device its own e2m1 entries; another device of the target takes the H100's (the first device in the file)
    pcie = T.lookup("sm_90a", "NVIDIA H100 PCIe", 4608, 7168, 1, "e2m1")
    assert pcie == cells[("sm_90a", DEV, 4608, 7168, 1, "e2m1")]
    assert T.lookup("sm_90a", h200, 4608, 7168, 1, "e2m1").path == "sm90_decode_wg"
    e = T.lookup("sm_90a", h200, 7168, 18432, 1, "e2m1")
    assert e == cells[("sm_90a", h200, 7168, 18432, 1, "e2m1")] != T.lookup("sm_90a", h200, 7168, 18432, 1)
    assert T.lookup("sm_90a", DEV, 7168, 18432, 1, "e2m1") == cells[("sm_90a", DEV, 7168, 18432, 1, "e2m1")]
    assert T.lookup("sm_90a", DEV, 7168, 18432, 16, "e2m1") is None  # M 16-64: the token threshold's wgmma path


def test_lookup_per_weight_format(user_table: Path):
    write(user_table, {"7168x12288": {"1": FP8}}, {"7168x12288": {"1": E2M1}})
    fp8, e2m1 = T.Entry("sm90_decode", 2, 3, 1, None, 1), T.Entry("sm90_decode", 4, 4, 1, 13.1, 2)
    assert T.lookup("sm_90a", DEV, 7168, 12288, 1) == fp8  # the default weight format: fp8
    assert T.lookup("sm_90a", DEV, 7168, 12288, 1, "e4m3") == fp8
    assert T.lookup("sm_90a", DEV, 7168, 12288, 1, "e5m2") == fp8  # e5m2 weights read the fp8 entries
    assert T.lookup("sm_90a", DEV, 7168, 12288, 1, "e2m1") == e2m1
    assert T.lookup("sm_90a", "NVIDIA H200", 7168, 12288, 1, "e2m1") == e2m1  # any device of the target
    assert T.lookup("sm_90a", DEV, 7168, 12288, 2, "e2m1") is None  # another bucket
    cells, _ = T.load_file(user_table)
    assert set(cells) == {("sm_90a", DEV, 7168, 12288, 1, "e4m3"), ("sm_90a", DEV, 7168, 12288, 1, "e2m1")}
    # plans: each weight format its own entry (tokens e4m3 or e2m1 alike)
    assert gemm_decode.plan(1, 7168, 12288, 1, 132, "sm_90a", DEV)[0] == gemm_decode.DecodeConfig(1, 2, 3, 1)
    for fmts in (("e4m3", "e2m1"), ("e2m1", "e2m1")):
        c, split = gemm_decode.plan(1, 7168, 12288, 1, 132, "sm_90a", DEV, fmts=fmts)
        assert (c, split) == (gemm_decode.DecodeConfig(1, 4, 4, 2), 1)
    assert gemm_decode._plan(dg(1, "e2m1")) == (gemm_decode.DecodeConfig(1, 4, 4, 2), 1)
    assert gemm_decode._plan(dg(1, "e5m2")) == (gemm_decode.DecodeConfig(1, 2, 3, 1), 1)


def test_a_file_without_w_fmts_is_an_fp8_table_and_e2m1_runs_the_fp8_build(user_table: Path):
    """Every file written before the key (the shipped one of session 20 included) means fp8 weights; an e2m1 call of
    such a cell runs the fp8 entry's build, as before the key (measured closer to the e2m1 optimum than the envelope
    defaults), and a cell without any entry the defaults."""
    write(user_table, {"7168x12288": {"1": {**FP8, "kw": 8, "stages": 2}, "4": {"path": "sm90_wgmma"}}})
    assert T.lookup("sm_90a", DEV, 7168, 12288, 1, "e2m1") is None  # lookups match the weight format exactly
    assert T.lookup("sm_90a", DEV, 7168, 12288, 1).kw == 8
    fp8 = (gemm_decode.DecodeConfig(1, 8, 2, 1), 1)
    assert gemm_decode.plan(1, 7168, 12288, 1, 132)[0].kw != 8  # the defaults differ
    for fmts in (("e4m3", "e4m3"), ("e4m3", "e2m1"), ("e2m1", "e2m1"), ("e4m3", "e5m2")):
        assert gemm_decode.plan(1, 7168, 12288, 1, 132, "sm_90a", DEV, fmts=fmts) == fp8
    assert gemm_decode._plan(dg(1, "e2m1")) == fp8
    # an fp8 entry naming another path gives e2m1 calls no build (and no route): the defaults
    assert gemm_decode._plan(dg(3, "e2m1")) == gemm_decode.plan(3, 7168, 12288, 1, 132)
    assert gemm_decode.supports(dg(3, "e2m1")) is None
    assert gemm_decode._plan(dg(2, "e2m1")) == gemm_decode.plan(2, 7168, 12288, 1, 132)  # no entry at all


def test_user_e2m1_entries_override_shipped_and_shipped_e2m1_beats_user_fp8(user_table: Path, tmp_path: Path):
    shipped = tmp_path / "shipped.json"
    shipped.write_text(json.dumps({"schema": 1, "targets": {}, "w_fmts": {"e2m1": {"sm_90a": {"X": {
        "7168x12288": {"1": E2M1, "2": E2M1}}}}}}))  # fmt: skip
    import mxrt.ops.decode_table as mod

    orig = mod.shipped_path
    try:
        mod.shipped_path = lambda: shipped
        write(user_table, {"7168x12288": {"2": FP8}}, {"7168x12288": {"1": {**E2M1, "stages": 2}}})
        assert T.lookup("sm_90a", DEV, 7168, 12288, 1, "e2m1").stages == 2  # the user's e2m1 entry
        assert T.lookup("sm_90a", DEV, 7168, 12288, 2, "e2m1").stages == 4  # the shipped e2m1 entry, not user fp8
        assert T.lookup("sm_90a", DEV, 7168, 12288, 2, "e4m3").stages == 3
    finally:
        mod.shipped_path = orig
        gemm_decode.reload_table()


def test_e2m1_entries_are_sized_for_e2m1_weights(user_table: Path):
    """An e2m1 entry is validated (and planned) with e2m1 weight rows: a build too large for fp8 weights is valid
    there and runs; the same build among the fp8 entries raises."""
    assert K.smem_bytes(K.E4M3, K.E4M3, 1, 8, 4, 4) > K.DECODE_SMEM_MAX
    assert K.smem_bytes(K.E4M3, FMT_CODES["e2m1"], 1, 8, 4, 4) <= K.DECODE_SMEM_MAX
    write(user_table, e2m1={"7168x12288": {"1": E2M1_ONLY}})
    c, split = gemm_decode.plan(1, 7168, 12288, 1, 132, "sm_90a", DEV, fmts=("e4m3", "e2m1"))
    assert (c.kw, c.stages, c.rt, split) == (8, 4, 4, 1)
    write(user_table, {"7168x12288": {"1": E2M1_ONLY}})
    with pytest.raises(T.TunedTableError, match="shared memory") as ei:
        T.lookup("sm_90a", DEV, 7168, 12288, 1)
    assert ei.value.field == f"targets.sm_90a.{DEV}.7168x12288.1.stages"


@pytest.mark.parametrize(
    "w_fmts,field",
    [
        ([], "w_fmts"),
        ({"e4m3": {}}, "w_fmts.e4m3"),  # fp8 entries live in targets only: one place per cell
        ({"e5m2": {}}, "w_fmts.e5m2"),  # e5m2 weights read the fp8 entries
        ({"fp4": {}}, "w_fmts.fp4"),
        ({"e2m1": []}, "w_fmts.e2m1"),
        ({"e2m1": {"sm_90a": []}}, "w_fmts.e2m1.sm_90a"),
        (
            {"e2m1": {"sm_90a": {DEV: {"7168x4096": {"1": {**E2M1, "kw": 3}}}}}},
            f"w_fmts.e2m1.sm_90a.{DEV}.7168x4096.1.kw",
        ),
        ({"e2m1": {"sm_90a": {DEV: {"7168x4096": {"3": E2M1}}}}}, f"w_fmts.e2m1.sm_90a.{DEV}.7168x4096.3"),
        ({"e2m1": {"sm_90a": {DEV: {"7168*4096": {"1": E2M1}}}}}, f"w_fmts.e2m1.sm_90a.{DEV}.7168*4096"),
        (
            {"e2m1": {"sm_90a": {DEV: {"7168x4096": {"1": {**E2M1_ONLY, "stages": 6}}}}}},  # too large for e2m1 too
            f"w_fmts.e2m1.sm_90a.{DEV}.7168x4096.1.stages",
        ),
    ],
)
def test_w_fmts_errors_name_the_file_and_field(user_table: Path, w_fmts, field: str):
    write(user_table, w_fmts=w_fmts)
    with pytest.raises(T.TunedTableError) as ei:
        T.lookup("sm_90a", DEV, 7168, 4096, 1)
    assert ei.value.path == str(user_table) and ei.value.field == field
    assert str(user_table) in str(ei.value) and isinstance(ei.value, (MxrtError, ValueError))


def test_to_doc_round_trip_and_fp8_only_documents_unchanged(tmp_path: Path):
    key = ("sm_90a", DEV, 7168, 4096)
    fp8_only = {(*key, 1, "e4m3"): T.Entry("sm90_decode", 2, 3, 1, 13.5, 1)}
    doc = T.to_doc(fp8_only, {"a": 1})
    assert set(doc) == {"schema", "meta", "targets"}  # as written before the key existed
    both = {**fp8_only, (*key, 1, "e2m1"): T.Entry("sm90_decode", 4, 4, 1, 13.1, 2), (*key, 2, "e2m1"): T.Entry("x")}
    doc = T.to_doc(both, {})
    assert doc["targets"] == {"sm_90a": {DEV: {"7168x4096": {"1": fp8_only[(*key, 1, "e4m3")].as_dict()}}}}
    assert list(doc["w_fmts"]) == ["e2m1"] and list(doc["w_fmts"]["e2m1"]["sm_90a"][DEV]["7168x4096"]) == ["1", "2"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert T.load_file(path)[0] == both


def test_e2m1_entries_route_e2m1_calls(user_table: Path):
    """An e2m1 entry decides the path of e2m1 calls as an fp8 entry does for fp8 ones: naming the wgmma kernel at M 8
    moves those calls there, naming sm90_decode at M 32 keeps them on the decode kernel (above E2M1_MIN_M); fp8
    calls of the same cells read the fp8 entries. Without an e2m1 entry the token threshold decides."""
    wg = gemm_decode_wg.NAME
    lim = gemm_decode_wg.E2M1_MIN_M
    assert lim == 8
    write(
        user_table,
        {"7168x12288": {"8": FP8, "16": {**FP8, "stages": 2}, "32": {"path": wg}}},
        {"7168x12288": {"8": {"path": wg, "us": 9.0}, "32": {**E2M1, "rt": 1}}},
    )

    def sel(m, b_fmt):
        return select_gemm_path(dg(m, b_fmt)).name

    assert gemm_decode.supports(dg(8, "e2m1")) == f"tuned table routes it to {wg}"
    assert sel(8, "e2m1") == wg and sel(8, "e4m3") == "sm90_decode"
    assert sel(32, "e2m1") == "sm90_decode" and sel(32, "e4m3") == wg
    assert gemm_decode._plan(dg(32, "e2m1")) == (gemm_decode.DecodeConfig(4, 4, 4, 1), 1)
    assert sel(4, "e2m1") == "sm90_decode"  # no entry, m <= 8: the decode kernel's defaults
    assert gemm_decode._plan(dg(4, "e2m1")) == gemm_decode.plan(4, 7168, 12288, 1, 132)
    # no e2m1 entry at M 16: the token threshold, whatever the fp8 entry names (sm90_decode here)
    assert gemm_decode.supports(dg(16, "e2m1")) == f"m = 16 > {lim} with e2m1 weights: routed to {wg}"
    assert sel(16, "e4m3") == "sm90_decode"


# --- the tuner -----------------------------------------------------------------------------------------------


def test_parse_fmts():
    assert tune.parse_fmts("e4m3") == ("e4m3",)
    assert tune.parse_fmts("e2m1, e4m3,e2m1") == ("e2m1", "e4m3")
    with pytest.raises(ValueError, match="e5m2 weights read the e4m3 entries"):
        tune.parse_fmts("e5m2")
    for bad in ("", "fp4", "e4m3,e2m3"):
        with pytest.raises(ValueError, match="expected a comma list of e4m3, e2m1"):
            tune.parse_fmts(bad)


def test_parse_paths():
    known = ("sm90_decode_wg", "sm90_cublas", "generic")
    assert tune.parse_paths("", known) is None and tune.parse_paths(" ", known) is None  # every path
    assert tune.parse_paths("none", known) == ()
    assert tune.parse_paths("generic,sm90_decode_wg,generic", known) == ("generic", "sm90_decode_wg")
    with pytest.raises(ValueError, match="'sm90_decode' is not one of sm90_decode_wg, sm90_cublas, generic"):
        tune.parse_paths("sm90_decode", known)


def test_e2m1_candidates_fit_e2m1_rings_and_end_with_the_extra():
    fp8 = tune.decode_candidates(1, 7168, 4096, 132)
    e2m1 = tune.decode_candidates(1, 7168, 4096, 132, "e2m1")
    assert e2m1[0] == fp8[0]  # the envelope default first, the same build for both formats
    assert set(fp8) < set(e2m1) and tune.Candidate("sm90_decode", 8, 4, 1, 4) in set(e2m1) - set(fp8)
    assert all(T.parse_entry(c.entry(1e-5).as_dict(), "f", "e", 7168, 4096, 1, "e2m1") for c in e2m1)
    extra = tune.Candidate("sm90_decode", 2, 3, 1, 1)  # already a candidate: not repeated
    assert tune.decode_candidates(1, 7168, 4096, 132, "e2m1", [extra]) == e2m1
    odd = tune.Candidate("sm90_decode", 2, 3, 3, 1)  # a split the sweep does not try
    assert tune.decode_candidates(1, 7168, 4096, 132, "e2m1", [odd, odd]) == [*e2m1, odd]


def test_fallback_line():
    d, f, b = (tune.Candidate("sm90_decode", kw, 3, 1, 1) for kw in (2, 4, 8))
    best = b.entry(12e-6)
    line = tune.fallback_line([(d, 14e-6), (f, 15.5e-6), (b, 12e-6)], d, f, best)
    assert line == "fallback: default 14.00 us, fp8 entry 15.50 us, best 12.00 us"
    assert tune.fallback_line([(d, None)], d, None, best) == "fallback: default - us, fp8 entry - us, best 12.00 us"


def test_tune_gemm_fmts_writes_each_formats_entries(user_table: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    """``--fmts e4m3,e2m1``: every shape per weight format, the e2m1 cells under ``w_fmts``, the run's formats in
    meta; a later e2m1-only run keeps the fp8 entries."""
    write(user_table, {"7168x4096": {"2": {"path": "sm90_wgmma"}}})
    monkeypatch.setattr(runtime, "device_available", lambda: True)
    monkeypatch.setattr(runtime, "get_arch", lambda: H100)
    seen = []

    def fake_cell(ses, arch, m, n, k, reps, w_fmt="e4m3", paths=None):
        seen.append((m, n, k, w_fmt) if paths is None else (m, n, k, w_fmt, paths))
        cands = tune.decode_candidates(m, n, k, arch.num_cus, w_fmt)
        # fp8 weights: the widest CTA with the deepest ring wins; e2m1: the most rows per CTA, then the deepest ring
        key = (lambda c: -c.kw - c.stages / 10) if w_fmt == "e4m3" else (lambda c: -c.rt - c.stages / 10)
        return tune.best_entry([(c, 1e-5 * (20 + key(c))) for c in cands])

    monkeypatch.setattr(tune, "tune_cell", fake_cell)
    args = ["tune", "gemm", "--shapes", "1x7168x4096,3x1280x8192", "--fmts", "e4m3,e2m1", "--no-progress"]
    assert cli.main(args) == 0
    assert seen == [(1, 7168, 4096, "e4m3"), (4, 1280, 8192, "e4m3"), (1, 7168, 4096, "e2m1"), (4, 1280, 8192, "e2m1")]
    doc = json.loads(user_table.read_text())
    assert doc["meta"]["runs"][-1]["formats"] == "e4m3 x e4m3, e4m3 x e2m1" and doc["meta"]["runs"][-1]["cells"] == 4
    assert set(doc["w_fmts"]["e2m1"]["sm_90a"][DEV]) == {"7168x4096", "1280x8192"}
    fp8, e2m1 = T.lookup("sm_90a", DEV, 7168, 4096, 1), T.lookup("sm_90a", DEV, 7168, 4096, 1, "e2m1")
    assert fp8.kw == 8 and e2m1.rt == 4 and fp8 != e2m1
    assert T.lookup("sm_90a", DEV, 7168, 4096, 2).path == "sm90_wgmma"  # kept
    assert T.lookup("sm_90a", DEV, 1280, 8192, 3, "e2m1").rt == 4  # MT 1 at bucket 4: RT 4 allowed
    seen.clear()
    assert cli.main(["tune", "gemm", "--shapes", "2x7168x4096", "--fmts", "e2m1", "--no-progress"]) == 0
    assert seen == [(2, 7168, 4096, "e2m1")]
    assert T.lookup("sm_90a", DEV, 7168, 4096, 1) == fp8 and T.lookup("sm_90a", DEV, 7168, 4096, 2).path == "sm90_wgmma"
    assert T.lookup("sm_90a", DEV, 7168, 4096, 2, "e2m1").rt == 4
    assert json.loads(user_table.read_text())["meta"]["runs"][-1]["formats"] == "e4m3 x e2m1"
    seen.clear()
    args = ["tune", "gemm", "--shapes", "8x7168x4096", "--fmts", "e2m1", "--paths", "sm90_decode_wg", "--no-progress"]
    assert cli.main(args) == 0 and seen == [(8, 7168, 4096, "e2m1", ("sm90_decode_wg",))]
    capsys.readouterr()
    assert cli.main(["tune", "gemm", "--shapes", "1x7168x4096", "--fmts", "e5m2"]) == 2
    assert "e5m2 weights read the e4m3 entries" in capsys.readouterr().err
    assert cli.main(["tune", "gemm", "--shapes", "1x7168x4096", "--paths", "sm90_nope"]) == 2
    assert "'sm90_nope' is not one of sm90_decode_wg" in capsys.readouterr().err
