"""What the CUDA runtime's libraries rely on, each as the real driver documents it: a kernel is
an entry function whatever its ELF binding (nvcc makes kernels in anonymous namespaces local);
a cluster past what the kernel may launch with is CUDA_ERROR_INVALID_CLUSTER_SIZE; library
options may come without values; the CIG limits can be queried; timing events have no limit."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

EM_CUDA, STO_ENTRY = 190, 0x10
STB_LOCAL, STB_GLOBAL, STT_FUNC = 0, 1, 2


def cubin(symbols: list[tuple[str, int, int]]) -> bytes:
    """A minimal sm_90 cubin: .strtab, .symtab with (name, binding, st_other) functions."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n, _, _ in symbols)
    syms = [bytes(24)]
    off = 1
    for name, bind, other in symbols:
        syms.append(struct.pack("<IBBHQQ", off, (bind << 4) | STT_FUNC, other, 1, 0, 0))
        off += len(name) + 1
    symtab = b"".join(syms)
    data_off = 64
    sh_off = data_off + len(strtab) + len(symtab)
    sh = bytes(64)                                         # section 0: null
    sh += struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, data_off, len(strtab), 0, 0, 1, 0)
    sh += struct.pack("<IIQQQQIIQQ", 0, 2, 0, 0, data_off + len(strtab), len(symtab), 1, 1, 8,
                      24)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    eh = ident + struct.pack("<HHIQQQIHHHHHH", 2, EM_CUDA, 1, 0, 0, sh_off, 0, 64, 0, 0, 64,
                             3, 0)
    return eh + strtab + symtab + sh


_CHILD = r"""
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
image = open(sys.argv[1], "rb").read()
assert cu.cuInit(0) == 0
ctx = ctypes.c_void_p()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
print("load", cu.cuModuleLoadData(ctypes.byref(mod), image))
for name in (b"k_global", b"k_local", b"device_fn"):
    print("func", name.decode(), cu.cuModuleGetFunction(ctypes.byref(fn), mod, name))
# a library with one option and no value array (cuBLASLt's CU_LIBRARY_BINARY_IS_PRESERVED)
lib = ctypes.c_void_p()
opt = (ctypes.c_int * 1)(1)
print("library", cu.cuLibraryLoadData(ctypes.byref(lib), image, None, None, 0, opt, None, 1))
# cluster occupancy of k_global: 8 blocks portably, 9 is past it
assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"k_global") == 0
class Attr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_int), ("x", ctypes.c_uint),
                ("y", ctypes.c_uint), ("z", ctypes.c_uint), ("rest", ctypes.c_char * 52)]
class Config(ctypes.Structure):
    _fields_ = [("gx", ctypes.c_uint), ("gy", ctypes.c_uint), ("gz", ctypes.c_uint),
                ("bx", ctypes.c_uint), ("by", ctypes.c_uint), ("bz", ctypes.c_uint),
                ("shmem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(Attr)), ("nattrs", ctypes.c_uint)]
for size in (8, 9, 32):
    a = Attr(id=4, x=size, y=1, z=1)                     # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    c = Config(size, 1, 1, 128, 1, 1, 0, None, ctypes.pointer(a), 1)
    n = ctypes.c_int()
    print("clusters", size, cu.cuOccupancyMaxActiveClusters(ctypes.byref(n), fn, ctypes.byref(c)))
# the CIG limits (CUDA 12.8): a simulated context is never a CIG one
v = ctypes.c_size_t(7)
for limit in (7, 8, 9):
    print("limit", limit, cu.cuCtxGetLimit(ctypes.byref(v), limit), v.value)
print("limit", 10, cu.cuCtxGetLimit(ctypes.byref(v), 10), 0)
# timing events: 3000 records later, the first pair still times
e0, e1 = ctypes.c_void_p(), ctypes.c_void_p()
cu.cuEventCreate(ctypes.byref(e0), 0)
cu.cuEventCreate(ctypes.byref(e1), 0)
cu.cuEventRecord(e0, None)
cu.cuEventRecord(e1, None)
x = ctypes.c_void_p()
cu.cuEventCreate(ctypes.byref(x), 0)
for _ in range(3000):
    cu.cuEventRecord(x, None)
cu.cuCtxSynchronize()
ms = ctypes.c_float()
print("elapsed", cu.cuEventElapsedTime(ctypes.byref(ms), e0, e1))
"""


def test_runtime_needs(sim_env: dict[str, str], sim_lib: Path, tmp_path: Path) -> None:
    img = tmp_path / "k.cubin"
    img.write_bytes(cubin([("k_global", STB_GLOBAL, STO_ENTRY), ("k_local", STB_LOCAL, STO_ENTRY),
                           ("device_fn", STB_LOCAL, 0)]))
    p = subprocess.run([sys.executable, "-c", _CHILD, str(img)], env=sim_env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    got = {tuple(line.split()[:-1]): line.split()[-1] for line in p.stdout.splitlines()}
    assert got[("load",)] == "0"
    assert got[("func", "k_global")] == "0"
    assert got[("func", "k_local")] == "0"        # a local entry function is a kernel
    assert got[("func", "device_fn")] == "500"    # a device function is not: NOT_FOUND
    assert got[("library",)] == "0"
    assert got[("clusters", "8")] == "0"
    assert got[("clusters", "9")] == "912"        # CUDA_ERROR_INVALID_CLUSTER_SIZE
    assert got[("clusters", "32")] == "912"
    for limit in ("7", "8", "9"):
        assert got[("limit", limit, "0")] == "0"  # queried: success, value 0
    assert got[("limit", "10", "1")] == "0"       # past CU_LIMIT_MAX: INVALID_VALUE
    assert got[("elapsed",)] == "0"
