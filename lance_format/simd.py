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
_ARM_FEATURES = (("neon", "ASIMD"), ("fp16", "ASIMDHP"), ("dotprod", "ASIMDDP"), ("sve", "SVE"))


def _cpu_features() -> dict[str, bool]:
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__  # type: ignore[no-redef]
    return dict(__cpu_features__)


def simd_info() -> dict[str, Any]:
    """``{"tier": ..., "target_arch": ..., "host_features": [...]}`` like pylance's ``lance.simd_info()``."""
    arch = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    found = _cpu_features()
    table = _X86_FEATURES if arch == "x86_64" else _ARM_FEATURES
    features = [name for name, numpy_name in table if found.get(numpy_name)]
    if arch == "x86_64":
        tier = "avx512" if "avx512f" in features else "avx2" if "avx2" in features else "scalar"
    else:
        tier = "neon" if "neon" in features else "scalar"
    return {"tier": tier, "target_arch": arch, "host_features": features}
