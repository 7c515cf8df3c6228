"""Driver-API scenarios run by api_probe.py: the memory scenarios."""

from __future__ import annotations

import struct

from probe_common import C, Memcpy2D, call, ok, out, setup, u64, vp


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
