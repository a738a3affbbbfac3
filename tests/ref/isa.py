"""isa.py - whether oneDNN dispatches AVX-512 kernels in a test's dpc.

DNNL_MAX_CPU_ISA=AVX2 (or lower) runs oneDNN as on a machine without
AVX-512: how the AVX2 paths are checked on an AVX-512 machine. The paths
that depend on it: oneDNN's Winograd and brgemm matmul (AVX-512 only), the
default conv layout and the padded sgemm (runtime/cpu/conv_dnnl.c,
linear_dnnl.c)."""
import os


def avx512() -> bool:
    isa = os.environ.get("DNNL_MAX_CPU_ISA", "").upper()
    if isa and not isa.startswith("AVX512") and isa not in ("ALL", "AVX10_1_512", "AVX10_1_512_AMX"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            return any(l.startswith("flags") and " avx512f " in l + " " for l in f)
    except OSError:
        return False
