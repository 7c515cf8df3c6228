"""Driver-API scenarios run by api_probe.py: the device, stream and occupancy scenarios."""

from __future__ import annotations

import sys

from probe_common import C, TensorMap, call, load, ok, out, setup, u64, vp


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
    cfg = C.c_int()
    ok("cuCtxGetSharedMemConfig", C.byref(cfg))
    out["bank_default"] = cfg.value
    ok("cuCtxSetSharedMemConfig", 2)
    ok("cuCtxGetSharedMemConfig", C.byref(cfg))
    out["bank_set"] = cfg.value
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
