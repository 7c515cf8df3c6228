"""A process of a job that holds a context and 4 KiB of device memory and does nothing else
(it claims a slot in the job's files, launches nothing).  Prints "ready", then waits for the
end of its input; the suite SIGKILLs it to leave a dead process's slot behind."""

import ctypes
import sys

cu = ctypes.CDLL("libcuda.so.1")
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
for rc in (cu.cuInit(0), cu.cuDeviceGet(ctypes.byref(dev), 0),
           cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), cu.cuCtxSetCurrent(ctx),
           cu.cuMemAlloc_v2(ctypes.byref(ptr), 4096)):
    if rc:
        print(f"error {rc}", flush=True)
        sys.exit(1)
print("ready", flush=True)
sys.stdin.read()
