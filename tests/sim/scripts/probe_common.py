"""Shared ctypes helpers and structures of the driver-API scenarios (api_probe.py)."""

from __future__ import annotations

import ctypes as C

cu = C.CDLL("libcuda.so.1")
out: dict[str, object] = {}

u64, vp = C.c_uint64, C.c_void_p
HOSTFN = C.CFUNCTYPE(None, vp)


def call(name: str, *args: object) -> int:
    return int(getattr(cu, name)(*args))


def ok(name: str, *args: object) -> None:
    r = call(name, *args)
    if r:
        raise RuntimeError(f"{name} -> {r}")


def setup() -> C.c_void_p:
    ok("cuInit", 0)
    dev, ctx = C.c_int(), vp()
    ok("cuDeviceGet", C.byref(dev), 0)
    ok("cuDevicePrimaryCtxRetain", C.byref(ctx), dev)
    ok("cuCtxSetCurrent", ctx)
    return ctx


def load(img: bytes) -> tuple[int, vp]:
    mod = vp()
    return call("cuModuleLoadData", C.byref(mod), C.c_char_p(img)), mod


def get_fn(mod: vp, name: bytes) -> int:
    f = vp()
    return call("cuModuleGetFunction", C.byref(f), mod, name)


def global_size(mod: vp, name: bytes) -> int | str:
    d, n = u64(), C.c_size_t()
    r = call("cuModuleGetGlobal_v2", C.byref(d), C.byref(n), mod, name)
    return n.value if r == 0 else f"error {r}"


class KernelParams(C.Structure):
    _fields_ = [("func", vp), ("gx", C.c_uint), ("gy", C.c_uint), ("gz", C.c_uint),
                ("bx", C.c_uint), ("by", C.c_uint), ("bz", C.c_uint), ("smem", C.c_uint),
                ("params", vp), ("extra", vp), ("kern", vp), ("ctx", vp)]


class MemsetParams(C.Structure):
    _fields_ = [("dst", u64), ("pitch", C.c_size_t), ("value", C.c_uint),
                ("elementSize", C.c_uint), ("width", C.c_size_t), ("height", C.c_size_t)]


class HostParams(C.Structure):
    _fields_ = [("fn", HOSTFN), ("userData", vp)]


class Memcpy2D(C.Structure):
    _fields_ = [("srcX", C.c_size_t), ("srcY", C.c_size_t), ("srcType", C.c_int),
                ("srcHost", vp), ("srcDevice", u64), ("srcArray", vp), ("srcPitch", C.c_size_t),
                ("dstX", C.c_size_t), ("dstY", C.c_size_t), ("dstType", C.c_int),
                ("dstHost", vp), ("dstDevice", u64), ("dstArray", vp), ("dstPitch", C.c_size_t),
                ("width", C.c_size_t), ("height", C.c_size_t)]


class NodeUnion(C.Union):
    _fields_ = [("reserved1", C.c_longlong * 29), ("kernel", KernelParams),
                ("memset", MemsetParams), ("graph", vp * 2)]


class NodeParams(C.Structure):
    _fields_ = [("type", C.c_int), ("reserved0", C.c_int * 3), ("u", NodeUnion),
                ("reserved2", C.c_longlong)]


class TensorMap(C.Structure):
    _fields_ = [("opaque", C.c_uint64 * 16)]


def param_layout(fn: vp, getter: str = "cuFuncGetParamInfo") -> list | int:
    res, off, size = [], C.c_size_t(), C.c_size_t()
    for i in range(8):
        r = call(getter, fn, C.c_size_t(i), C.byref(off), C.byref(size))
        if r == 1:  # past the last parameter
            return res
        if r:
            return r
        res.append([off.value, size.value])
    return res
