"""Offline: a digest of the PTX of every spec variant of the named kernels (NVRTC, sm_90a), one line per build, to
compare a header refactor before and after (comment lines dropped: the source stamp differs).

    python3 benchmarks/dev_ptx_digest.py SYMBOL[,SYMBOL...] [--jobs N] > digests.txt
"""

from __future__ import annotations

import hashlib
import sys
from concurrent.futures import ProcessPoolExecutor


def _digest(job):
    symbol, d = job
    from cuda.bindings import nvrtc

    from mxrt.runtime.compile_check import _define_flags, _nvrtc_text
    from mxrt.runtime.source import stamped_source

    spec = _spec(symbol)
    code = stamped_source(spec.file, "sm_90a").encode()
    _err, prog = nvrtc.nvrtcCreateProgram(code, f"{symbol}.cu".encode(), 0, [], [])
    try:
        opts = [b"--gpu-architecture=sm_90a", b"-std=c++17"] + [f.encode() for f in _define_flags(d)]
        (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if res != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return f"{symbol} {tuple(d)} FAILED"
        ptx = _nvrtc_text(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, prog)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    body = "\n".join(ln for ln in ptx.splitlines() if not ln.lstrip().startswith("//"))
    return f"{symbol} {tuple(d)} {hashlib.sha256(body.encode()).hexdigest()[:16]}"


def _spec(symbol):
    from mxrt.ops import ALL_SPECS

    return next(s for s in ALL_SPECS if s.symbol == symbol)


def main() -> int:
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 2
    work = [(s, d) for s in sys.argv[1].split(",") for d in _spec(s).variants]
    with ProcessPoolExecutor(jobs) as ex:
        for line in ex.map(_digest, work):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
