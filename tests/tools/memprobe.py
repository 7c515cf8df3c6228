"""A tiny driver-API client for the tools tests, driven by lines on stdin.

Commands: "info" -> "info <free> <total>", "alloc <bytes>" -> "alloc <rc>",
"free" -> frees everything -> "free <rc>", "launch <n>" -> "launch <rc>".
It prints "ready" once a context is current (the primary context of ordinal
$MEMPROBE_DEVICE, default 0).  Exits at end of input."""

import ctypes
import os
import sys

cu = ctypes.CDLL("libcuda.so.1")
cu.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 2
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]


def check(rc: int, what: str) -> None:
    if rc:
        print(f"error {what} {rc}", flush=True)
        sys.exit(1)


check(cu.cuInit(0), "cuInit")
dev = ctypes.c_int()
check(cu.cuDeviceGet(ctypes.byref(dev), int(os.environ.get("MEMPROBE_DEVICE", "0"))),
      "cuDeviceGet")
ctx = ctypes.c_void_p()
check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
check(cu.cuCtxSetCurrent(ctx), "setcurrent")
ptrs = []
print("ready", flush=True)
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "info":
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        rc = cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
        print(f"info {free.value} {total.value}" if rc == 0 else f"info-error {rc}", flush=True)
    elif words[0] == "alloc":
        p = ctypes.c_uint64()
        rc = cu.cuMemAlloc_v2(ctypes.byref(p), int(words[1]))
        if rc == 0:
            ptrs.append(p.value)
        print(f"alloc {rc}", flush=True)
    elif words[0] == "free":
        rcs = [cu.cuMemFree_v2(p) for p in ptrs]
        ptrs.clear()
        print(f"free {max(rcs, default=0)}", flush=True)
