"""Debian's python3-torch does its matrix products through the system
libblas.so.3. Where that is netlib's reference BLAS (libblas3, the default
without OpenBLAS) training runs ~25x slower (measured here: 6 vs 150 GFLOP/s
on one core) and the full run would take many hours instead of < 1.

ensure_fast_blas() re-executes the script with Debian's OpenBLAS
(libopenblas0-openmp) first on the library path when it is installed but not
the selected alternative, and refuses to start on the reference BLAS."""
import os
import sys

OPENBLAS_DIRS = ["/usr/lib/%s-linux-gnu/openblas-openmp" % m for m in ("x86_64", "aarch64")]
MARK = "TRILLION_TRAIN_BLAS"


def loaded_blas():
    """Path of the BLAS this process mapped, None where /proc is missing (not Linux)."""
    import torch
    torch.ones(2, 2) @ torch.ones(2, 2)
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.split()[-1]}
    except OSError:
        return None
    return os.path.realpath(sorted(libs)[0]) if libs else ""


def ensure_fast_blas(allow_slow=False):
    lib = loaded_blas()
    if lib is None or "openblas" in lib or allow_slow:
        return
    for d in OPENBLAS_DIRS:
        if os.path.exists(os.path.join(d, "libblas.so.3")) and os.environ.get(MARK) != d:
            env = dict(os.environ, LD_LIBRARY_PATH=d + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""), **{MARK: d})
            os.execve(sys.executable, [sys.executable] + sys.argv, env)
    sys.exit("torch is using the reference BLAS (%s): ~25x slower. Install OpenBLAS "
             "(apt-get install libopenblas0-openmp) or pass --allow-slow-blas" % (lib or "libblas.so.3"))
