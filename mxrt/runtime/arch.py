"""The GPU target: one frozen :class:`Arch` per device, read once, overridable with ``MXRT_ARCH``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from ..config import ENV_ARCH, arch_override
from ..errors import UnsupportedArchError


@dataclass(frozen=True)
class Arch:
    """What the runtime needs to know about one device.

    ``target`` is the compile target: ``sm_90a`` (Hopper), ``sm_XY`` for other NVIDIA GPUs, ``gfx942``,
    ``gfx950``, ... (the ``gcnArchName`` without its ``:feature`` suffixes) on AMD.
    """

    vendor: str  # "nvidia" or "amd"
    target: str
    name: str
    wave_size: int
    num_cus: int  # SMs (NVIDIA) or CUs (AMD)
    smem_per_block: int  # bytes of shared memory / LDS a block may use
    offload_arch: str = ""  # what the compiler is told: gcnArchName with its features on AMD, else target
    device_id: int = 0
    overridden: bool = False

    @property
    def family(self) -> str:
        return "cuda" if self.vendor == "nvidia" else "rocm"


def normalize_target(name: str) -> str:
    """The one place that maps a target's spellings to mxrt's names.

    ``"gfx942:sramecc+:xnack-"`` -> ``"gfx942"``; ``"sm_90"``, ``"sm90"``, ``"90"``, ``"9.0"``,
    ``"compute_90"`` -> ``"sm_90a"`` (Hopper kernels are built for the arch-specific target, which enables
    wgmma); ``"sm_100"`` -> ``"sm_100a"``; other NVIDIA compute capabilities -> ``"sm_XY"``.
    """
    s = str(name).strip().lower()
    if s.startswith("gfx"):
        base = s.split(":", 1)[0]
        if not re.fullmatch(r"gfx[0-9a-f]{3,4}", base):
            raise UnsupportedArchError(f"mxrt: target {name!r} is not a gfx target name")
        return base
    m = re.fullmatch(r"(?:sm_?|compute_?)?(\d+)(?:\.(\d))?(a|f)?", s)
    if not m:
        raise UnsupportedArchError(
            f"mxrt: target {name!r} is not understood; expected e.g. 'gfx942', 'gfx950', 'sm_90a' or '9.0'"
        )
    digits = m.group(1) + (m.group(2) or "")
    if m.group(2) is None and len(digits) == 1:
        digits += "0"
    cc = int(digits)
    if cc in (90, 100, 103):
        return f"sm_{cc}a"
    return f"sm_{cc}{m.group(3) or ''}"


def vendor_of(target: str) -> str:
    return "amd" if target.startswith("gfx") else "nvidia"


@cache
def get_arch(device_id: int | None = None) -> Arch:
    """The :class:`Arch` of a device (default: CuPy's current device), detected once per device (and
    ``MXRT_ARCH`` value): reading the device properties costs tens of microseconds, every op launch needs it."""
    import cupy

    dev_id = int(device_id) if device_id is not None else cupy.cuda.runtime.getDevice()
    return _detect_arch(dev_id, arch_override())


@cache
def _detect_arch(dev_id: int, override: str | None) -> Arch:
    import cupy

    dev = cupy.cuda.Device(dev_id)
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    is_hip = bool(cupy.cuda.runtime.is_hip)
    raw_name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    gcn = ""
    if is_hip:
        raw = props.get("gcnArchName", b"")
        gcn = raw.decode() if isinstance(raw, bytes) else str(raw)
        detected = normalize_target(gcn)
    else:
        detected = normalize_target(f"{props['major']}.{props['minor']}")
    target = normalize_target(override) if override else detected
    if vendor_of(target) != ("amd" if is_hip else "nvidia"):
        raise UnsupportedArchError(
            f"mxrt: {ENV_ARCH}={override!r} names a {vendor_of(target)} target, but device {dev.id} "
            f"({raw_name}) is {'AMD' if is_hip else 'NVIDIA'}"
        )
    return Arch(
        vendor="amd" if is_hip else "nvidia",
        target=target,
        name=raw_name,
        wave_size=int(props.get("warpSize", 64 if is_hip else 32)),
        num_cus=int(props["multiProcessorCount"]),
        smem_per_block=int(props["sharedMemPerBlock"]),
        offload_arch=(gcn if is_hip and not override else target),
        device_id=dev.id,
        overridden=bool(override),
    )
