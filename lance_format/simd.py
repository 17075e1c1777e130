"""``simd_info``: the CPU vector features this process can use, in pylance's shape.

The vectorized data paths here run in numpy and pyarrow, which pick their kernels from the same
CPU features at run time; numpy's feature detection reports them.
"""

from __future__ import annotations

import platform
from typing import Any

# pylance's feature names -> numpy's, in pylance's order
_X86_FEATURES = (("sse2", "SSE2"), ("sse3", "SSE3"), ("ssse3", "SSSE3"), ("sse4.1", "SSE41"), ("sse4.2", "SSE42"),
                 ("popcnt", "POPCNT"), ("avx", "AVX"), ("avx2", "AVX2"), ("fma", "FMA3"), ("f16c", "F16C"),
                 ("bmi1", "BMI"), ("bmi2", "BMI2"), ("avx512f", "AVX512F"), ("avx512bw", "AVX512BW"),
                 ("avx512cd", "AVX512CD"), ("avx512dq", "AVX512DQ"), ("avx512vl", "AVX512VL"))


def _cpu_features() -> dict[str, bool]:
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__  # type: ignore[no-redef]
    return dict(__cpu_features__)


def _x86_tier(found: dict[str, bool]) -> str:
    """pylance's x86-64 dispatch tier: AVX-512 (with FP16 arithmetic when the CPU has it), AVX2
    with FMA, AVX with FMA, AVX, else none."""
    if found.get("AVX512F"):
        return "avx512_fp16" if found.get("AVX512FP16") else "avx512"
    if found.get("AVX2") and found.get("FMA3"):
        return "avx2"
    if found.get("AVX"):
        return "avx_fma" if found.get("FMA3") else "avx"
    return "none"


def _tier(arch: str, found: dict[str, bool]) -> str:
    if arch == "x86_64":
        return _x86_tier(found)
    if arch == "aarch64":
        # pylance dispatches to NEON when half-precision arithmetic is there (Linux: HWCAP_FPHP;
        # always on macOS, never on Windows)
        system = platform.system()
        if system == "Darwin":
            return "neon"
        if system == "Windows":
            return "none"
        return "neon" if found.get("FPHP") or found.get("ASIMDHP") else "none"
    return "none"


def simd_info() -> dict[str, Any]:
    """``{"tier": ..., "target_arch": ..., "host_features": [...]}`` like pylance's ``lance.simd_info()``:
    the tier is one of pylance's (``none``, ``neon``, ``avx``, ``avx_fma``, ``avx2``, ``avx512``,
    ``avx512_fp16``); the raw features are listed on x86-64 only, as pylance lists them."""
    arch = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    found = _cpu_features()
    features = [name for name, numpy_name in _X86_FEATURES if found.get(numpy_name)] if arch == "x86_64" else []
    return {"tier": _tier(arch, found), "target_arch": arch, "host_features": features}
