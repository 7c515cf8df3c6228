"""Driver-API scenarios run by api_probe.py: the graph scenarios."""

from __future__ import annotations

import struct

from probe_common import (
    HOSTFN,
    C,
    HostParams,
    KernelParams,
    MemsetParams,
    NodeParams,
    call,
    load,
    ok,
    out,
    setup,
    u64,
    vp,
)


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
