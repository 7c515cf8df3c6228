"""cuMemSetAccess over several VMM mappings side by side, as the real driver takes it (PyTorch's
expandable segments set access once over all the chunks they mapped)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
ctx = ctypes.c_void_p()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
class Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]
class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Loc),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", ctypes.c_ubyte * 8)]
class Access(ctypes.Structure):
    _fields_ = [("location", Loc), ("flags", ctypes.c_int)]
MB2 = 2 << 20
prop = Prop(type=1, location=Loc(1, 0))                   # pinned, on device 0
base = ctypes.c_uint64()
assert cu.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(4 * MB2), ctypes.c_size_t(0),
                              ctypes.c_uint64(0), ctypes.c_uint64(0)) == 0
for i in range(3):                                        # three chunks side by side
    h = ctypes.c_uint64()
    assert cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(MB2), ctypes.byref(prop),
                          ctypes.c_uint64(0)) == 0
    assert cu.cuMemMap(ctypes.c_uint64(base.value + i * MB2), ctypes.c_size_t(MB2),
                       ctypes.c_size_t(0), h, ctypes.c_uint64(0)) == 0
acc = Access(Loc(1, 0), 3)
def set_access(off, n):
    return cu.cuMemSetAccess(ctypes.c_uint64(base.value + off), ctypes.c_size_t(n),
                             ctypes.byref(acc), ctypes.c_size_t(1))
print(set_access(0, 3 * MB2), set_access(MB2, 2 * MB2), set_access(0, 4 * MB2),
      set_access(3 * MB2, MB2))
"""


def test_set_access_spans_adjacent_mappings(sim_env: dict[str, str], sim_lib: Path) -> None:
    p = subprocess.run([sys.executable, "-c", _CHILD], env=sim_env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    # all three, the last two: fine; past the mapped chunks, or an unmapped one: INVALID_VALUE
    assert p.stdout.split() == ["0", "0", "1", "1"]
