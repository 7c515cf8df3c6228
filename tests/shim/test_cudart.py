"""The real CUDA runtime (cudart 12.9 and 13.x from PyPI) as a client of the shim.

cudart resolves its driver entry points through cuGetProcAddress_v2 (found with dlsym on
libcuda), then asks cuGetExportTable for its private tables (which the simulator serves), and
cudaGetDeviceCount answers 1: this test checks that every entry point cudart resolved for a
hooked function received the shim's hook of the variant the driver chose, and that nothing else
was touched.  Real frameworks on top of cudart are tests/frameworks.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

_CHILD = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
n = ctypes.c_int(-1)
rc = lib.cudaGetDeviceCount(ctypes.byref(n))
hits = ctypes.CDLL(None).tgs_shim_debug_hits
hits.restype = ctypes.c_longlong
print(rc, n.value, hits(b"cuGetProcAddress_v2"), flush=True)
"""

_LINE = re.compile(r"^tgs: (cuGetProcAddress(?:_v2)?) (\S+) (\d+) (\d+) -> (hook|pass) (\S+)$")


def _cudart(name: str) -> Path:
    try:
        import nvidia  # noqa: F401
    except ImportError:
        pytest.skip("nvidia cudart wheels not installed (pip install -e '.[test]')")
    for base in map(Path, nvidia.__path__):
        hits = sorted(base.glob(f"*/lib/{name}"))
        if hits:
            return hits[0]
    pytest.skip(f"{name} not found in the nvidia wheels")


@pytest.mark.parametrize("soname", ["libcudart.so.12", "libcudart.so.13"])
def test_cudart_resolves_hooks(soname: str, shim_env: dict[str, str], shim_lib: Path) -> None:
    lib = _cudart(soname)
    env = dict(shim_env, TGS_LOG_LEVEL="debug", TGS_DEBUG_HITS="1")
    p = subprocess.run([sys.executable, "-c", _CHILD, str(lib)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rc, count, proc_hits = map(int, p.stdout.split())
    assert (rc, count) == (0, 1)  # cudaSuccess: the runtime started on the simulator's tables
    assert proc_hits > 300  # cudart's own resolution went through our cuGetProcAddress_v2
    hooked = set(subprocess.run(
        ["nm", "-D", "--defined-only", str(shim_lib)], capture_output=True, text=True, check=True
    ).stdout.split()[2::3]) - {"dlsym", "dlvsym", "tgs_shim_debug_hits"}
    got: dict[str, str] = {}
    for line in p.stderr.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        _, _, _, _, what, variant = m.groups()
        # a hooked variant always became its hook; an unhooked one always passed
        assert (what == "hook") == (variant in hooked), line
        got[variant] = what
    for must in ("cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuGraphLaunch",
                 "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemGetInfo_v2",
                 "cuStreamSynchronize", "cuCtxSynchronize", "cuGetProcAddress_v2"):
        assert got.get(must) == "hook", f"{must} not resolved to its hook by {soname}"
    assert sum(1 for v in got.values() if v == "pass") > 20
