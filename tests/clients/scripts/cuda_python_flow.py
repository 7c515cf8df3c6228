"""cuda-python (cuda.bindings.driver) driven the way its users do; run in a child process.

argv: [cubin path or "-"] [bytes to allocate past the quota, or 0].
Prints one JSON object: what each step returned.
"""

from __future__ import annotations

import ctypes
import json
import sys

import numpy as np
from cuda.bindings import driver as cu

PTX = b"""
.version 8.0
.target sm_90
.address_size 64
.visible .global .align 4 .u32 counter;
.visible .global .align 8 .b8 table[64];
.visible .entry scale(.param .u64 p, .param .u32 n)
{
  ret;
}
"""

out: dict[str, object] = {}


def ck(r: tuple) -> object:
    if r[0] != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{r[0].name}")
    rest = r[1:]
    return rest[0] if len(rest) == 1 else (rest or None)


def code(r: tuple) -> str:
    return r[0].name


def kernel_args(*vals: np.ndarray) -> np.ndarray:
    return np.array([v.ctypes.data for v in vals], dtype=np.uint64)


def main() -> None:
    cubin = sys.argv[1] if len(sys.argv) > 1 else "-"
    too_big = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    ck(cu.cuInit(0))
    out["driver_version"] = ck(cu.cuDriverGetVersion())
    dev = ck(cu.cuDeviceGet(0))
    out["sms"] = ck(cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))
    ctx = ck(cu.cuDevicePrimaryCtxRetain(dev))
    ck(cu.cuCtxSetCurrent(ctx))

    # images: junk, PTX, an unknown kernel, globals with their real size
    out["junk"] = code(cu.cuModuleLoadData(b"this is not a module image\0"))
    mod = ck(cu.cuModuleLoadData(PTX))
    out["unknown_kernel"] = code(cu.cuModuleGetFunction(mod, b"no_such_kernel"))
    fn = ck(cu.cuModuleGetFunction(mod, b"scale"))
    _, size = ck(cu.cuModuleGetGlobal(mod, b"table"))
    out["global_size"] = int(size)
    out["regs"] = ck(cu.cuFuncGetAttribute(
        cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn))
    out["occupancy_256"] = ck(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, 256, 0))
    if cubin != "-":
        data = open(cubin, "rb").read()
        cmod = ck(cu.cuModuleLoadData(data))
        ck(cu.cuModuleGetFunction(cmod, b"scale"))
        _, gsize = ck(cu.cuModuleGetGlobal(cmod, b"gbuf"))
        out["cubin_global_size"] = int(gsize)
        lib = ck(cu.cuLibraryLoadData(data, None, None, 0, None, None, 0))
        kern = ck(cu.cuLibraryGetKernel(lib, b"other"))
        out["cubin_library_kernel"] = code(cu.cuKernelGetFunction(kern))
        ck(cu.cuLibraryUnload(lib))
        ck(cu.cuModuleUnload(cmod))

    # async copies on two streams, a launch, events, a memset, a cross-stream wait
    n = 1 << 16
    host = np.arange(n, dtype=np.float32)
    back = np.zeros(n, dtype=np.float32)
    s1 = ck(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value))
    s2 = ck(cu.cuStreamCreateWithPriority(0, -1))
    d = ck(cu.cuMemAlloc(host.nbytes))
    e0, e1 = ck(cu.cuEventCreate(0)), ck(cu.cuEventCreate(0))
    ck(cu.cuMemcpyHtoDAsync(d, host.ctypes.data, host.nbytes, s1))
    ck(cu.cuEventRecord(e0, s1))
    pd, pn = np.array([int(d)], dtype=np.uint64), np.array([n], dtype=np.uint32)
    args = kernel_args(pd, pn)
    ck(cu.cuLaunchKernel(fn, n // 256, 1, 1, 256, 1, 1, 0, s1, args.ctypes.data, 0))
    ck(cu.cuEventRecord(e1, s1))
    ck(cu.cuStreamWaitEvent(s2, e1, 0))
    ck(cu.cuMemcpyDtoHAsync(back.ctypes.data, d, host.nbytes, s2))
    ck(cu.cuStreamSynchronize(s2))
    out["roundtrip"] = bool(np.array_equal(host, back))
    out["elapsed_ms"] = float(ck(cu.cuEventElapsedTime(e0, e1)))
    ck(cu.cuMemsetD32Async(d, 7, n, s1))
    ck(cu.cuMemcpyDtoHAsync(back.ctypes.data, d, host.nbytes, s1))
    ck(cu.cuStreamSynchronize(s1))
    out["memset"] = bool((back.view(np.uint32) == 7).all())

    # host memory and pointer attributes
    hp = ck(cu.cuMemHostAlloc(4096, 0))
    out["host_ptr_type"] = int(ck(cu.cuPointerGetAttribute(
        cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, hp)))
    out["dev_ptr_type"] = int(ck(cu.cuPointerGetAttribute(
        cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d)))
    ck(cu.cuMemFreeHost(hp))
    called: list[int] = []
    cb = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _p: called.append(1))
    fnptr = ctypes.cast(cb, ctypes.c_void_p).value
    ck(cu.cuLaunchHostFunc(s1, cu.CUhostFn(fnptr), 0))
    ck(cu.cuStreamSynchronize(s1))
    out["host_func_called"] = len(called)

    # a graph built with the graph API, instantiated and replayed
    graph = ck(cu.cuGraphCreate(0))
    kp = cu.CUDA_KERNEL_NODE_PARAMS()
    kp.func = fn
    kp.gridDimX, kp.gridDimY, kp.gridDimZ = n // 256, 1, 1
    kp.blockDimX, kp.blockDimY, kp.blockDimZ = 256, 1, 1
    kp.kernelParams = args.ctypes.data
    k1 = ck(cu.cuGraphAddKernelNode(graph, None, 0, kp))
    ck(cu.cuGraphAddKernelNode(graph, [k1], 1, kp))
    out["graph_nodes"] = int(ck(cu.cuGraphGetNodes(graph, 0))[1])
    ex = ck(cu.cuGraphInstantiate(graph, 0))
    ck(cu.cuEventRecord(e0, s1))
    for _ in range(3):
        ck(cu.cuGraphLaunch(ex, s1))
    ck(cu.cuEventRecord(e1, s1))
    ck(cu.cuEventSynchronize(e1))
    out["graph_replay_ms"] = float(ck(cu.cuEventElapsedTime(e0, e1)))
    ck(cu.cuGraphExecDestroy(ex))
    ck(cu.cuGraphDestroy(graph))

    free, total = ck(cu.cuMemGetInfo())
    out["mem_total"] = int(total)
    if too_big:
        out["too_big"] = code(cu.cuMemAlloc(too_big))
    ck(cu.cuMemFree(d))
    ck(cu.cuModuleUnload(mod))
    ck(cu.cuDevicePrimaryCtxRelease(dev))


if __name__ == "__main__":
    main()
    print(json.dumps(out))
