"""Drive the simulated driver through ctypes, one scenario per run; prints one JSON object.

Run as a child process (the simulator's state file comes from the environment):
    python api_probe.py <scenario> [args...]
"""

from __future__ import annotations

import ctypes as C
import json
import random
import struct
import sys

cu = C.CDLL("libcuda.so.1")
out: dict[str, object] = {}

u64, vp = C.c_uint64, C.c_void_p


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


PTX = b"""//
.version 8.0
.target sm_90
.address_size 64
.extern .global .align 4 .u32 elsewhere;
.global .align 4 .u32 counter;
.visible .global .align 8 .b8 table[16][4];
.global .v4 .f32 quad;
.const .align 8 .u64 a, b[3];
.visible .const .align 4 .f32 init[3] = {1.0, 2.0, 3.0};
.extern .func helper(.param .u32 x);
.visible .entry first(.param .u64 p)
{
  .reg .u32 %r<2>;
  ld.global.u32 %r1, [counter];
  ret;
}
/* .entry commented_out() */
.entry second()
{
  ret;
}
"""


def scenario_images() -> None:
    setup()
    out["junk"] = load(b"this is not a module image")[0]
    out["empty_text"] = load(b"\n\n")[0]
    out["binary_bytes"] = load(b"\x01\x02\x03\x04garbage")[0]
    out["bad_elf"] = load(b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8)[0]
    out["truncated_fatbin"] = load(struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 20))[0]
    r, mod = load(PTX)
    out["ptx"] = r
    out["kernels"] = [get_fn(mod, n) for n in (b"first", b"second", b"commented_out", b"helper")]
    out["globals"] = {n: global_size(mod, n.encode())
                      for n in ("counter", "table", "quad", "a", "b", "init", "elsewhere")}
    out["annotated"] = get_fn(load(b"// tgs-sim: cost k 2.0\n")[1], b"k")
    ok("cuModuleUnload", mod)


def scenario_link() -> None:
    setup()
    state, img, size = vp(), vp(), C.c_size_t()
    ok("cuLinkCreate_v2", 0, None, None, C.byref(state))
    a = b".version 8.0\n.target sm_90\n.global .u32 ga[8];\n.entry ka()\n{\nret;\n}\n"
    b = b".version 8.0\n.target sm_90\n// tgs-sim: cost kb 3.0\n.entry kb()\n{\nret;\n}\n"
    ok("cuLinkAddData_v2", state, 1, a, len(a), b"a.ptx", 0, None, None)
    ok("cuLinkAddData_v2", state, 1, b, len(b), b"b.ptx", 0, None, None)
    junk = b"not ptx at all"
    out["add_junk"] = call("cuLinkAddData_v2", state, 1, junk, len(junk), b"j", 0, None, None)
    out["add_object"] = call("cuLinkAddData_v2", state, 3, a, len(a), b"o", 0, None, None)
    ok("cuLinkComplete", state, C.byref(img), C.byref(size))
    cubin = C.string_at(img, size.value)
    out["elf"] = cubin[:4] == b"\x7fELF"
    mod = vp()
    ok("cuModuleLoadData", C.byref(mod), C.c_char_p(cubin))
    out["kernels"] = [get_fn(mod, n) for n in (b"ka", b"kb", b"kc")]
    out["ga"] = global_size(mod, b"ga")
    ok("cuLinkDestroy", state)


def scenario_library() -> None:
    ok("cuInit", 0)
    lib, kern, fn, mod = vp(), vp(), vp(), vp()
    img = b".version 8.0\n.target sm_90\n.global .u64 g[4];\n.entry k1()\n{\nret;\n}\n"
    ok("cuLibraryLoadData", C.byref(lib), C.c_char_p(img), None, None, 0, None, None, 0)
    ok("cuLibraryGetKernel", C.byref(kern), lib, b"k1")
    out["missing_kernel"] = call("cuLibraryGetKernel", C.byref(vp()), lib, b"nope")
    cnt = C.c_uint()
    ok("cuLibraryGetKernelCount", C.byref(cnt), lib)
    out["count"] = cnt.value
    out["function_without_context"] = call("cuKernelGetFunction", C.byref(fn), kern)
    ok("cuKernelSetAttribute", 8, 65536, kern, 0)  # MAX_DYNAMIC_SHARED_SIZE_BYTES
    setup()
    ok("cuKernelGetFunction", C.byref(fn), kern)
    v = C.c_int()
    ok("cuFuncGetAttribute", C.byref(v), 8, fn)
    out["dyn_smem"] = v.value
    d, n = u64(), C.c_size_t()
    ok("cuLibraryGetGlobal", C.byref(d), C.byref(n), lib, b"g")
    out["global_size"] = n.value
    ok("cuLibraryGetModule", C.byref(mod), lib)
    # a CUkernel launches like its function
    out["launch_kernel_handle"] = call("cuLaunchKernel", kern, 1, 1, 1, 32, 1, 1, 0, None,
                                       None, None)
    ok("cuCtxSynchronize")
    ok("cuLibraryUnload", lib)
    out["after_unload"] = call("cuKernelGetFunction", C.byref(fn), kern)


def scenario_memory() -> None:
    setup()
    n = 1 << 16
    d, h = u64(), vp()
    ok("cuMemAlloc_v2", C.byref(d), n)
    ok("cuMemHostAlloc", C.byref(h), n, 0)
    buf = (C.c_ubyte * n)()
    s = vp()
    ok("cuStreamCreate", C.byref(s), 0)
    ok("cuMemsetD16Async", d, C.c_ushort(0xBEEF), n // 2, s)
    ok("cuMemcpyAsync", u64(h.value), d, n, s)  # device -> pinned host, unified
    ok("cuStreamSynchronize", s)
    C.memmove(buf, h, n)
    out["d16"] = bytes(buf[:4]).hex()
    ok("cuMemsetD2D8_v2", d, 256, C.c_ubyte(7), 16, 4)  # 4 rows of 16 at pitch 256
    ok("cuMemcpyDtoH_v2", buf, d, 512)
    out["d2d8"] = [buf[0], buf[15], buf[16], buf[256], buf[256 + 16]]
    mt = C.c_uint()
    out["attr_dev"] = (call("cuPointerGetAttribute", C.byref(mt), 2, d), mt.value)
    out["attr_host"] = (call("cuPointerGetAttribute", C.byref(mt), 2, u64(h.value)), mt.value)
    plain = (C.c_char * 64)()
    out["attr_plain"] = call("cuPointerGetAttribute", C.byref(mt), 2,
                             u64(C.addressof(plain)))
    base, size = u64(), C.c_size_t()
    ok("cuMemGetAddressRange_v2", C.byref(base), C.byref(size), u64(d.value + 100))
    out["range"] = (base.value == d.value, size.value)
    reg = (C.c_char * 8192)()
    ok("cuMemHostRegister_v2", reg, 8192, 0)
    out["register_twice"] = call("cuMemHostRegister_v2", reg, 8192, 0)
    dp = u64()
    ok("cuMemHostGetDevicePointer_v2", C.byref(dp), reg, 0)
    out["registered_devptr"] = dp.value == C.addressof(reg)
    ok("cuMemHostUnregister", reg)
    out["unregister_twice"] = call("cuMemHostUnregister", reg)
    out["free_host_as_device"] = call("cuMemFree_v2", u64(h.value))
    ok("cuMemFreeHost", h)
    ok("cuMemFree_v2", d)


HOSTFN = C.CFUNCTYPE(None, vp)


class KernelParams(C.Structure):
    _fields_ = [("func", vp), ("gx", C.c_uint), ("gy", C.c_uint), ("gz", C.c_uint),
                ("bx", C.c_uint), ("by", C.c_uint), ("bz", C.c_uint), ("smem", C.c_uint),
                ("params", vp), ("extra", vp), ("kern", vp), ("ctx", vp)]


class MemsetParams(C.Structure):
    _fields_ = [("dst", u64), ("pitch", C.c_size_t), ("value", C.c_uint),
                ("elementSize", C.c_uint), ("width", C.c_size_t), ("height", C.c_size_t)]


class HostParams(C.Structure):
    _fields_ = [("fn", HOSTFN), ("userData", vp)]


def scenario_graph() -> None:
    ctx = setup()
    _, mod = load(b"// tgs-sim: cost k 1.0\n.version 8.0\n.entry k()\n{\nret;\n}\n")
    fn = vp()
    ok("cuModuleGetFunction", C.byref(fn), mod, b"k")
    d = u64()
    ok("cuMemAlloc_v2", C.byref(d), 4096)
    g, child = vp(), vp()
    ok("cuGraphCreate", C.byref(g), 0)
    ok("cuGraphCreate", C.byref(child), 0)
    kp = KernelParams(fn, 1000, 1, 1, 1000, 1, 1, 0, None, None, None, None)  # 1 ms
    k1, k2, ms, hn, e1, cn, em = (vp() for _ in range(7))
    ok("cuGraphAddKernelNode_v2", C.byref(k1), g, None, 0, C.byref(kp))
    mp = MemsetParams(d, 0, 0x11, 1, 4096, 1)
    ok("cuGraphAddMemsetNode", C.byref(ms), g, C.byref(k1), 1, C.byref(mp), ctx)
    calls: list[int] = []
    cb = HOSTFN(lambda _p: calls.append(1))
    hp = HostParams(cb, None)
    ok("cuGraphAddHostNode", C.byref(hn), g, C.byref(ms), 1, C.byref(hp))
    ok("cuGraphAddKernelNode_v2", C.byref(k2), child, None, 0, C.byref(kp))
    ok("cuGraphAddChildGraphNode", C.byref(cn), g, C.byref(hn), 1, child)
    ok("cuGraphAddEmptyNode", C.byref(em), g, C.byref(cn), 1)
    ev0, ev1 = vp(), vp()
    ok("cuEventCreate", C.byref(ev0), 0)
    ok("cuEventCreate", C.byref(ev1), 0)
    ok("cuGraphAddEventRecordNode", C.byref(e1), g, C.byref(em), 1, ev1)
    t = C.c_int()
    ok("cuGraphNodeGetType", cn, C.byref(t))
    out["child_type"] = t.value
    nn = C.c_size_t()
    ok("cuGraphGetNodes", g, None, C.byref(nn))
    out["nodes"] = nn.value
    ok("cuGraphGetEdges", g, None, None, C.byref(nn))
    out["edges"] = nn.value
    ex = vp()
    ok("cuGraphInstantiateWithFlags", C.byref(ex), g, C.c_ulonglong(0))
    ok("cuEventRecord", ev0, None)
    ok("cuGraphLaunch", ex, None)
    ok("cuEventSynchronize", ev1)
    elapsed = C.c_float()
    ok("cuEventElapsedTime", C.byref(elapsed), ev0, ev1)
    out["replay_ms"] = elapsed.value  # two 1 ms kernels (one in the child graph)
    out["host_calls"] = len(calls)
    b = (C.c_ubyte * 4)()
    ok("cuMemcpyDtoH_v2", b, d, 4)
    out["memset"] = list(b)
    # change the kernel's grid in the executable graph: 2000 blocks -> 2 ms
    kp2 = KernelParams(fn, 2000, 1, 1, 1000, 1, 1, 0, None, None, None, None)
    ok("cuGraphExecKernelNodeSetParams_v2", ex, k1, C.byref(kp2))
    ok("cuEventRecord", ev0, None)
    ok("cuGraphLaunch", ex, None)
    ok("cuEventSynchronize", ev1)
    ok("cuEventElapsedTime", C.byref(elapsed), ev0, ev1)
    out["replay_after_set_ms"] = elapsed.value
    # an update from a graph of another shape fails and says why
    other = vp()
    ok("cuGraphCreate", C.byref(other), 0)
    info = (C.c_uint64 * 3)()
    out["update_other_shape"] = call("cuGraphExecUpdate_v2", ex, other, info)
    out["update_result"] = info[0] & 0xffffffff
    clone = vp()
    ok("cuGraphClone", C.byref(clone), g)
    out["update_clone"] = call("cuGraphExecUpdate_v2", ex, clone, info)
    # a dependency cycle cannot be instantiated
    a, z = vp(), vp()
    cyc = vp()
    ok("cuGraphCreate", C.byref(cyc), 0)
    ok("cuGraphAddEmptyNode", C.byref(a), cyc, None, 0)
    ok("cuGraphAddEmptyNode", C.byref(z), cyc, C.byref(a), 1)
    ok("cuGraphAddDependencies", cyc, C.byref(z), C.byref(a), 1)
    out["cycle"] = call("cuGraphInstantiateWithFlags", C.byref(vp()), cyc, C.c_ulonglong(0))
    ok("cuGraphExecDestroy", ex)
    for x in (g, child, other, clone, cyc):
        ok("cuGraphDestroy", x)


class NodeUnion(C.Union):
    _fields_ = [("reserved1", C.c_longlong * 29), ("kernel", KernelParams),
                ("memset", MemsetParams), ("graph", vp * 2)]


class NodeParams(C.Structure):
    _fields_ = [("type", C.c_int), ("reserved0", C.c_int * 3), ("u", NodeUnion),
                ("reserved2", C.c_longlong)]


def scenario_generic() -> None:
    setup()
    _, mod = load(b"// tgs-sim: cost k 1.0\n.version 8.0\n.entry k()\n{\nret;\n}\n")
    fn = vp()
    ok("cuModuleGetFunction", C.byref(fn), mod, b"k")
    out["sizeof"] = C.sizeof(NodeParams)
    d = u64()
    ok("cuMemAlloc_v2", C.byref(d), 4096)
    g, child = vp(), vp()
    ok("cuGraphCreate", C.byref(g), 0)
    ok("cuGraphCreate", C.byref(child), 0)
    kp = NodeParams(type=0)
    kp.u.kernel = KernelParams(fn, 500, 1, 1, 1000, 1, 1, 0, None, None, None, None)  # 0.5 ms
    ck, k, m, c = vp(), vp(), vp(), vp()
    ok("cuGraphAddNode", C.byref(ck), child, None, 0, C.byref(kp))
    ok("cuGraphAddNode", C.byref(k), g, None, 0, C.byref(kp))
    mp = NodeParams(type=2)
    mp.u.memset = MemsetParams(d, 0, 0x22, 1, 4096, 1)
    ok("cuGraphAddNode", C.byref(m), g, C.byref(k), 1, C.byref(mp))
    cp = NodeParams(type=4)
    cp.u.graph[0] = child.value
    ok("cuGraphAddNode", C.byref(c), g, C.byref(m), 1, C.byref(cp))
    ex = vp()
    ok("cuGraphInstantiateWithFlags", C.byref(ex), g, C.c_ulonglong(0))
    # a bigger kernel in the executable graph, and a child graph of the same shape
    kp.u.kernel.gx = 1000
    ok("cuGraphExecNodeSetParams", ex, k, C.byref(kp))
    child2, ck2 = vp(), vp()
    ok("cuGraphCreate", C.byref(child2), 0)
    kp.u.kernel.gx = 3000
    ok("cuGraphAddNode", C.byref(ck2), child2, None, 0, C.byref(kp))
    out["set_child"] = call("cuGraphExecChildGraphNodeSetParams", ex, c, child2)
    ev0, ev1 = vp(), vp()
    ok("cuEventCreate", C.byref(ev0), 0)
    ok("cuEventCreate", C.byref(ev1), 0)
    ok("cuEventRecord", ev0, None)
    ok("cuGraphLaunch", ex, None)
    ok("cuEventRecord", ev1, None)
    ok("cuEventSynchronize", ev1)
    ms = C.c_float()
    ok("cuEventElapsedTime", C.byref(ms), ev0, ev1)
    out["replay_ms"] = ms.value  # 1 ms + 3 ms
    b = (C.c_ubyte * 2)()
    ok("cuMemcpyDtoH_v2", b, d, 2)
    out["memset"] = list(b)
    bad = NodeParams(type=12)  # batch mem-op: not modelled
    out["unsupported_kind"] = call("cuGraphAddNode", C.byref(vp()), g, None, 0, C.byref(bad))


def scenario_vmm_share() -> None:
    setup()
    prop = (C.c_ubyte * 32)()  # CUmemAllocationProp: PINNED, POSIX fd, device 0
    C.memmove(prop, struct.pack("<iiii", 1, 1, 1, 0), 16)
    size = 2 << 20
    h, h2, h3 = C.c_ulonglong(), C.c_ulonglong(), C.c_ulonglong()
    ok("cuMemCreate", C.byref(h), size, prop, 0)
    a, b = u64(), u64()
    ok("cuMemAddressReserve", C.byref(a), size, 0, 0, 0)
    ok("cuMemAddressReserve", C.byref(b), size, 0, 0, 0)
    ok("cuMemMap", a, size, 0, h, 0)
    ok("cuMemsetD8_v2", a, C.c_ubyte(0x5A), 64)
    fd = C.c_int(-1)
    ok("cuMemExportToShareableHandle", C.byref(fd), h, 1, 0)
    ok("cuMemImportFromShareableHandle", C.byref(h2), vp(fd.value), 1)
    ok("cuMemMap", b, size, 0, h2, 0)
    got = (C.c_ubyte * 2)()
    ok("cuMemcpyDtoH_v2", got, b, 2)
    out["shared_bytes"] = list(got)
    ok("cuMemRetainAllocationHandle", C.byref(h3), vp(a.value))
    out["retained_same"] = h3.value == h.value
    pr = (C.c_ubyte * 32)()
    ok("cuMemGetAllocationPropertiesFromHandle", pr, h)
    out["props"] = list(struct.unpack("<iiii", bytes(pr[:16])))
    plain = C.c_ulonglong()
    prop2 = (C.c_ubyte * 32)()
    C.memmove(prop2, struct.pack("<iiii", 1, 0, 1, 0), 16)
    ok("cuMemCreate", C.byref(plain), size, prop2, 0)
    out["export_unrequested"] = call("cuMemExportToShareableHandle", C.byref(fd), plain, 1, 0)
    for x in (h3, h):  # two references on the first handle
        ok("cuMemRelease", x)
    ok("cuMemUnmap", a, size)
    ok("cuMemUnmap", b, size)
    ok("cuMemRelease", h2)
    ok("cuMemRelease", plain)
    out["release_again"] = call("cuMemRelease", h2)


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


def scenario_params() -> None:
    setup()
    ptx = (b".version 8.0\n.target sm_90\n.visible .entry k(.param .u32 a, .param .u64 b,"
           b" .param .align 16 .b8 c[24], .param .f32 d)\n{\nret;\n}\n.entry none()\n{\nret;\n}\n")
    _, mod = load(ptx)
    fn, fn2 = vp(), vp()
    ok("cuModuleGetFunction", C.byref(fn), mod, b"k")
    ok("cuModuleGetFunction", C.byref(fn2), mod, b"none")
    out["ptx"] = param_layout(fn)
    out["ptx_none"] = param_layout(fn2)
    _, amod = load(b"// tgs-sim: cost k2 1.0\n")
    ok("cuModuleGetFunction", C.byref(fn2), amod, b"k2")
    out["annotated"] = param_layout(fn2)
    if len(sys.argv) > 2:
        data = open(sys.argv[2], "rb").read()
        cmod = vp()
        ok("cuModuleLoadData", C.byref(cmod), C.c_char_p(data))
        ok("cuModuleGetFunction", C.byref(fn), cmod, b"scale")
        out["cubin"] = param_layout(fn)
        lib, kern = vp(), vp()
        ok("cuLibraryLoadData", C.byref(lib), C.c_char_p(data), None, None, 0, None, None, 0)
        ok("cuLibraryGetKernel", C.byref(kern), lib, b"scale")
        out["cubin_kernel"] = param_layout(kern, "cuKernelGetParamInfo")


def scenario_graph_more() -> None:
    setup()
    _, mod = load(b".version 8.0\n.entry k()\n{\nret;\n}\n")
    fn = vp()
    ok("cuModuleGetFunction", C.byref(fn), mod, b"k")
    g, k, e = vp(), vp(), vp()
    ok("cuGraphCreate", C.byref(g), 0)
    kp = KernelParams(fn, 1, 1, 1, 32, 1, 1, 0, None, None, None, None)
    ok("cuGraphAddKernelNode_v2", C.byref(k), g, None, 0, C.byref(kp))
    ok("cuGraphAddEmptyNode", C.byref(e), g, C.byref(k), 1)
    val = (C.c_ubyte * 64)()
    C.c_int.from_buffer(val).value = -3
    ok("cuGraphKernelNodeSetAttribute", k, 8, val)  # PRIORITY
    clone, ck = vp(), vp()
    ok("cuGraphClone", C.byref(clone), g)
    ok("cuGraphNodeFindInClone", C.byref(ck), k, clone)
    back = (C.c_ubyte * 64)()
    ok("cuGraphKernelNodeGetAttribute", ck, 8, back)
    out["clone_priority"] = C.c_int.from_buffer(back).value
    out["found_differs"] = ck.value != k.value
    props = (C.c_ubyte * 88)()
    C.memmove(props, struct.pack("<iiii", 1, 0, 1, 0), 16)
    alloc = (C.c_ubyte * 128)()  # CUDA_MEM_ALLOC_NODE_PARAMS: props, access, count, size, dptr
    C.memmove(alloc, bytes(props), 88)
    C.memmove(C.byref(alloc, 104), struct.pack("<Q", 1 << 21), 8)
    a = vp()
    ok("cuGraphAddMemAllocNode", C.byref(a), g, None, 0, alloc)
    used = C.c_uint64()
    ok("cuDeviceGetGraphMemAttribute", 0, 0, C.byref(used))
    out["graph_mem"] = used.value
    ok("cuGraphDestroy", g)
    ok("cuDeviceGetGraphMemAttribute", 0, 0, C.byref(used))
    out["graph_mem_after"] = used.value
    ok("cuDeviceGetGraphMemAttribute", 0, 1, C.byref(used))
    out["graph_mem_high"] = used.value


class Memcpy2D(C.Structure):
    _fields_ = [("srcX", C.c_size_t), ("srcY", C.c_size_t), ("srcType", C.c_int),
                ("srcHost", vp), ("srcDevice", u64), ("srcArray", vp), ("srcPitch", C.c_size_t),
                ("dstX", C.c_size_t), ("dstY", C.c_size_t), ("dstType", C.c_int),
                ("dstHost", vp), ("dstDevice", u64), ("dstArray", vp), ("dstPitch", C.c_size_t),
                ("width", C.c_size_t), ("height", C.c_size_t)]


def scenario_arrays() -> None:
    setup()
    desc = struct.pack("<QQiI", 16, 4, 0x20, 1)  # 16 x 4 floats: rows of 64 bytes
    arr = vp()
    ok("cuArrayCreate_v2", C.byref(arr), desc)
    back = (C.c_ubyte * 24)()
    ok("cuArrayGetDescriptor_v2", back, arr)
    out["desc"] = list(struct.unpack("<QQiI", bytes(back)))
    src = (C.c_ubyte * 256)(*range(256))
    ok("cuMemcpyHtoA_v2", arr, 0, src, 256)
    got = (C.c_ubyte * 256)()
    ok("cuMemcpyAtoH_v2", got, arr, 0, 256)
    out["roundtrip"] = bytes(got) == bytes(src)
    out["past_end"] = call("cuMemcpyHtoA_v2", arr, 200, src, 100)
    # a 2D copy: the array's rows 1..2, bytes 8..23, into pitched device memory
    d = u64()
    ok("cuMemAlloc_v2", C.byref(d), 4096)
    c = Memcpy2D(srcX=8, srcY=1, srcType=3, srcArray=arr, dstType=2, dstDevice=d, dstPitch=512,
                 width=16, height=2)
    ok("cuMemcpy2D_v2", C.byref(c))
    row0, row1 = (C.c_ubyte * 16)(), (C.c_ubyte * 16)()
    ok("cuMemcpyDtoH_v2", row0, d, 16)
    ok("cuMemcpyDtoH_v2", row1, u64(d.value + 512), 16)
    out["rows"] = [list(row0)[:2], list(row1)[:2]]  # 64 + 8 = 72, 128 + 8 = 136


def scenario_user_objects() -> None:
    ctx = setup()
    destroyed: list[int] = []
    cb = HOSTFN(lambda _p: destroyed.append(1))
    obj, g = vp(), vp()
    ok("cuUserObjectCreate", C.byref(obj), None, cb, 1, 1)
    ok("cuGraphCreate", C.byref(g), 0)
    ok("cuGraphRetainUserObject", g, obj, 2, 0)
    ok("cuUserObjectRelease", obj, 1)
    out["after_user_release"] = len(destroyed)
    ok("cuGraphDestroy", g)
    out["after_graph_destroy"] = len(destroyed)
    out["over_release"] = call("cuUserObjectRelease", obj, 1)  # gone
    # a 3D peer copy between two allocations of the current context
    a, b = u64(), u64()
    ok("cuMemAlloc_v2", C.byref(a), 4096)
    ok("cuMemAlloc_v2", C.byref(b), 4096)
    ok("cuMemsetD8_v2", a, C.c_ubyte(0x33), 4096)
    peer = (C.c_ubyte * 200)()
    fields = struct.pack("<QQQQi4xQQQQQQ" "QQQQi4xQQQQQQ" "QQQ",
                         0, 0, 0, 0, 2, 0, a.value, 0, ctx.value or 0, 0, 0,
                         0, 0, 0, 0, 2, 0, b.value, 0, ctx.value or 0, 0, 0, 64, 1, 1)
    C.memmove(peer, fields, len(fields))
    out["peer_size"] = len(fields)
    ok("cuMemcpy3DPeer", peer)
    got = (C.c_ubyte * 2)()
    ok("cuMemcpyDtoH_v2", got, b, 2)
    out["peer_copy"] = list(got)


def scenario_batch() -> None:
    setup()
    a, b = u64(), u64()
    ok("cuMemAlloc_v2", C.byref(a), 4096)
    ok("cuMemAlloc_v2", C.byref(b), 4096)
    host = (C.c_ubyte * 64)(*range(64))
    dsts = (C.c_uint64 * 2)(a.value, b.value)
    srcs = (C.c_uint64 * 2)(C.addressof(host), C.addressof(host) + 32)
    sizes = (C.c_size_t * 2)(32, 32)
    attrs = (C.c_ubyte * 24)()
    C.memmove(attrs, struct.pack("<i", 1), 4)  # ORDER_STREAM
    idx = (C.c_size_t * 1)(0)
    fail = C.c_size_t(0)
    ok("cuMemcpyBatchAsync", dsts, srcs, sizes, C.c_size_t(2), attrs, idx, C.c_size_t(1),
       C.byref(fail), None)
    out["fail_idx_ok"] = fail.value == (1 << 64) - 1
    got = (C.c_ubyte * 2)()
    ok("cuMemcpyDtoH_v2", got, b, 2)
    out["second"] = list(got)
    sizes[1] = 1 << 20  # past the end of b
    out["overflow"] = call("cuMemcpyBatchAsync", dsts, srcs, sizes, C.c_size_t(2), attrs, idx,
                           C.c_size_t(1), C.byref(fail), None)
    out["fail_idx"] = fail.value


def scenario_fuzz() -> None:
    """Mutated images through the linker (sizes known): error codes, never a crash."""
    setup()
    ptx = (b".version 8.0\n.target sm_90\n.global .u32 g[4];\n"
           b".visible .entry k(.param .u64 p, .param .u32 n)\n{\nret;\n}\n")
    state, img, size = vp(), vp(), C.c_size_t()
    ok("cuLinkCreate_v2", 0, None, None, C.byref(state))
    ok("cuLinkAddData_v2", state, 1, ptx, len(ptx), b"a", 0, None, None)
    ok("cuLinkComplete", state, C.byref(img), C.byref(size))
    elf = C.string_at(img, size.value)
    ok("cuLinkDestroy", state)
    entry = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, len(elf), 0, 0, 8, 1, 90, 0, 0, 0x11,
                        0, len(elf))
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entry) + len(elf)) + entry + elf
    rnd = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    codes: dict[int, int] = {}
    for _ in range(1500):
        kind, seed = rnd.choice(((1, ptx), (0, elf), (2, fatbin)))
        b = bytearray(seed)
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        if rnd.random() < 0.3:
            b = b[: rnd.randrange(1, len(b))]
        st = vp()
        ok("cuLinkCreate_v2", 0, None, None, C.byref(st))
        buf = C.create_string_buffer(bytes(b), len(b))
        r = call("cuLinkAddData_v2", st, kind, buf, C.c_size_t(len(b)), b"x", 0, None, None)
        codes[r] = codes.get(r, 0) + 1
        ok("cuLinkDestroy", st)
    out["codes"] = sorted(codes)


def scenario_occupancy() -> None:
    setup()
    _, mod = load(b".version 8.0\n.entry k()\n{\nret;\n}\n")
    fn = vp()
    ok("cuModuleGetFunction", C.byref(fn), mod, b"k")
    nb = C.c_int()
    res = {}
    for bs, smem in ((256, 0), (1024, 0), (128, 48 * 1024), (64, 0)):
        ok("cuOccupancyMaxActiveBlocksPerMultiprocessor", C.byref(nb), fn, bs, C.c_size_t(smem))
        res[f"{bs}/{smem}"] = nb.value
    out["blocks"] = res
    grid, block = C.c_int(), C.c_int()
    ok("cuOccupancyMaxPotentialBlockSize", C.byref(grid), C.byref(block), fn, None,
       C.c_size_t(0), 0)
    out["potential"] = (grid.value, block.value)
    out["set_readonly"] = call("cuFuncSetAttribute", fn, 4, 64)  # NUM_REGS: read-only
    lim = C.c_size_t()
    ok("cuCtxGetLimit", C.byref(lim), 0)
    out["stack"] = lim.value


def scenario_pools() -> None:
    setup()
    pool, cur = vp(), vp()
    ok("cuDeviceGetMemPool", C.byref(cur), 0)
    ok("cuDeviceGetDefaultMemPool", C.byref(pool), 0)
    out["current_is_default"] = cur.value == pool.value
    props = (C.c_ubyte * 88)()  # CUmemPoolProps: PINNED (1), location DEVICE (1) id 0
    C.memmove(props, struct.pack("<iiii", 1, 0, 1, 0), 16)
    mine = vp()
    ok("cuMemPoolCreate", C.byref(mine), props)
    ok("cuDeviceSetMemPool", 0, mine)
    d = u64()
    ok("cuMemAllocAsync", C.byref(d), 1 << 20, None)
    used = C.c_uint64()
    ok("cuMemPoolGetAttribute", mine, 7, C.byref(used))  # USED_MEM_CURRENT
    out["used_after_alloc"] = used.value
    ok("cuMemFreeAsync", d, None)
    ok("cuMemPoolGetAttribute", mine, 7, C.byref(used))
    out["used_after_free"] = used.value
    ok("cuMemPoolGetAttribute", mine, 8, C.byref(used))  # USED_MEM_HIGH
    out["used_high"] = used.value
    thr = C.c_uint64(1 << 30)
    ok("cuMemPoolSetAttribute", mine, 4, C.byref(thr))
    thr.value = 0
    ok("cuMemPoolGetAttribute", mine, 4, C.byref(thr))
    out["threshold"] = thr.value
    out["destroy_default"] = call("cuMemPoolDestroy", pool)
    ok("cuMemPoolDestroy", mine)
    ok("cuDeviceGetMemPool", C.byref(cur), 0)
    out["current_after_destroy_is_default"] = cur.value == pool.value


def scenario_misc() -> None:
    setup()
    major, minor, dev = C.c_int(), C.c_int(), C.c_int(-1)
    ok("cuDeviceComputeCapability", C.byref(major), C.byref(minor), 0)
    out["cc"] = [major.value, minor.value]
    ok("cuDeviceGetByPCIBusId", C.byref(dev), b"0000:01:00.0")
    out["pci_dev"] = dev.value
    out["pci_bad"] = call("cuDeviceGetByPCIBusId", C.byref(dev), b"0000:09:00.0")
    can = C.c_int(-1)
    ok("cuDeviceCanAccessPeer", C.byref(can), 0, 0)
    out["peer_self"] = can.value
    s = vp()
    ok("cuStreamCreateWithPriority", C.byref(s), 0, -2)
    val = (C.c_ubyte * 64)()
    ok("cuStreamGetAttribute", s, 8, val)  # PRIORITY
    out["stream_priority"] = C.c_int.from_buffer(val).value
    C.c_int.from_buffer(val).value = -4
    ok("cuStreamSetAttribute", s, 8, val)
    prio = C.c_int()
    ok("cuStreamGetPriority", s, C.byref(prio))
    out["priority_after_set"] = prio.value
    d = u64()
    ok("cuMemAlloc_v2", C.byref(d), 64)
    ok("cuStreamWriteValue32_v2", s, d, C.c_uint32(0xCAFE), 0)
    got = C.c_uint32()
    ok("cuMemcpyDtoH_v2", C.byref(got), d, 4)
    out["write_value"] = got.value
    # graph edits
    g = vp()
    ok("cuGraphCreate", C.byref(g), 0)
    a, b2, c = vp(), vp(), vp()
    ok("cuGraphAddEmptyNode", C.byref(a), g, None, 0)
    ok("cuGraphAddEmptyNode", C.byref(b2), g, C.byref(a), 1)
    ok("cuGraphAddEmptyNode", C.byref(c), g, C.byref(a), 1)
    n = C.c_size_t()
    ok("cuGraphNodeGetDependentNodes", a, None, C.byref(n))
    out["dependents"] = n.value
    ok("cuGraphRemoveDependencies", g, C.byref(a), C.byref(b2), 1)
    ok("cuGraphNodeGetDependencies", b2, None, C.byref(n))
    out["deps_after_remove"] = n.value
    out["remove_missing_edge"] = call("cuGraphRemoveDependencies", g, C.byref(a), C.byref(b2), 1)
    path = sys.argv[2].encode()
    ok("cuGraphDebugDotPrint", g, path, 0)
    out["dot"] = open(path).read().count("->")
    ok("cuGraphDestroy", g)


def scenario_managed() -> None:
    setup()
    d = u64()
    ok("cuMemAllocManaged", C.byref(d), 1 << 16, 1)
    v = C.c_int()
    ok("cuMemRangeGetAttribute", C.byref(v), 4, 2, d, 4096)  # PREFERRED_LOCATION
    out["preferred_before"] = v.value
    ok("cuMemAdvise", d, 4096, 3, 0)  # SET_PREFERRED_LOCATION device 0
    ok("cuMemAdvise", d, 4096, 1, 0)  # SET_READ_MOSTLY
    ok("cuMemAdvise", d, 4096, 5, -1)  # SET_ACCESSED_BY the host
    ok("cuMemPrefetchAsync", d, 4096, -1, None)  # to the host
    res = {}
    for name, attr in (("read_mostly", 1), ("preferred", 2), ("last_prefetch", 4),
                       ("preferred_type", 5)):
        ok("cuMemRangeGetAttribute", C.byref(v), 4, attr, d, 4096)
        res[name] = v.value
    acc = (C.c_int * 3)()
    ok("cuMemRangeGetAttribute", acc, 12, 3, d, 4096)
    res["accessed_by"] = list(acc)
    out["attrs"] = res
    plain = u64()
    ok("cuMemAlloc_v2", C.byref(plain), 4096)
    out["not_managed"] = call("cuMemRangeGetAttribute", C.byref(v), 4, 1, plain, 4096)


class TensorMap(C.Structure):
    _fields_ = [("opaque", C.c_uint64 * 16)]


def scenario_tensormap() -> None:
    setup()
    d = u64()
    ok("cuMemAlloc_v2", C.byref(d), 1 << 20)
    raw = (C.c_ubyte * 256)()  # a 64-byte aligned descriptor inside it
    tm = TensorMap.from_buffer(raw, (-C.addressof(raw)) % 64)
    dims = (C.c_uint64 * 2)(256, 256)
    strides = (C.c_uint64 * 1)(512)  # bytes between rows of fp16
    box = (C.c_uint32 * 2)(64, 64)
    es = (C.c_uint32 * 2)(1, 1)
    # fp16, rank 2, 128-byte swizzle: the inner box (64 x 2 B) fits the span
    out["tiled"] = call("cuTensorMapEncodeTiled", C.byref(tm), 6, 2, vp(d.value), dims, strides,
                        box, es, 0, 3, 2, 0)
    out["address_kept"] = tm.opaque[0] == d.value
    bad_strides = (C.c_uint64 * 1)(500)  # not a multiple of 16
    out["bad_stride"] = call("cuTensorMapEncodeTiled", C.byref(tm), 6, 2, vp(d.value), dims,
                             bad_strides, box, es, 0, 3, 2, 0)
    out["misaligned"] = call("cuTensorMapEncodeTiled", C.byref(tm), 6, 2, vp(d.value + 8),
                             dims, strides, box, es, 0, 3, 2, 0)
    _, mod = load(b".version 8.0\n.entry k()\n{\nret;\n}\n")
    fn = vp()
    ok("cuModuleGetFunction", C.byref(fn), mod, b"k")

    class Attr(C.Structure):
        _fields_ = [("id", C.c_int), ("pad", C.c_int), ("x", C.c_uint), ("y", C.c_uint),
                    ("z", C.c_uint), ("rest", C.c_ubyte * 52)]

    class Config(C.Structure):
        _fields_ = [("g", C.c_uint * 3), ("b", C.c_uint * 3), ("smem", C.c_uint),
                    ("stream", vp), ("attrs", C.POINTER(Attr)), ("nattrs", C.c_uint)]

    attr = Attr(4, 0, 2, 1, 1)  # CLUSTER_DIMENSION 2x1x1
    cfg = Config((C.c_uint * 3)(64, 1, 1), (C.c_uint * 3)(256, 1, 1), 0, None,
                 C.pointer(attr), 1)
    n = C.c_int()
    ok("cuOccupancyMaxActiveClusters", C.byref(n), fn, C.byref(cfg))
    out["clusters"] = n.value
    ok("cuOccupancyMaxPotentialClusterSize", C.byref(n), fn, C.byref(cfg))
    out["cluster_size"] = n.value


if __name__ == "__main__":
    globals()[f"scenario_{sys.argv[1]}"]()
    print(json.dumps(out))
