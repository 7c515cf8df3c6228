"""Scenarios: stream capture of the copies, memsets, host functions and graph launches that the
whole-API simulator models (each becomes a node; nothing runs until the graph is launched)."""

from __future__ import annotations

import ctypes as C

from probe_common import HOSTFN, MemsetParams, call, ok, out, setup, u64, vp

GLOBAL = 0


def _stream() -> vp:
    s = vp()
    ok("cuStreamCreate", C.byref(s), 0)
    return s


def _node_types(graph: vp) -> list[int]:
    n = C.c_size_t(0)
    ok("cuGraphGetNodes", graph, None, C.byref(n))
    nodes = (vp * n.value)()
    ok("cuGraphGetNodes", graph, nodes, C.byref(n))
    types = []
    for node in nodes:
        t = C.c_int()
        ok("cuGraphNodeGetType", vp(node), C.byref(t))
        types.append(t.value)
    return types


def scenario_capture_work() -> None:
    setup()
    s, s2 = _stream(), _stream()
    d = u64()
    ok("cuMemAlloc_v2", C.byref(d), 4096)
    C.memset(d.value, 0, 4096)
    host = (C.c_ubyte * 16)(*range(1, 17))
    calls = []
    fn = HOSTFN(lambda _: calls.append(1))

    # a graph made before the capture: one memset node (byte 0xAB over [256, 272))
    sub, ex, node = vp(), vp(), vp()
    ok("cuGraphCreate", C.byref(sub), 0)
    mp = MemsetParams(d.value + 256, 0, 0xAB, 1, 16, 1)
    ok("cuGraphAddMemsetNode", C.byref(node), sub, None, C.c_size_t(0), C.byref(mp), None)
    ok("cuGraphInstantiateWithFlags", C.byref(ex), sub, u64(0))

    out["begin"] = call("cuStreamBeginCapture_v2", s, GLOBAL)
    out["memset"] = call("cuMemsetD32Async", u64(d.value), C.c_uint(7), C.c_size_t(16), s)
    out["memcpy"] = call("cuMemcpyAsync", u64(d.value + 64), u64(d.value), C.c_size_t(64), s)
    out["htod"] = call("cuMemcpyHtoDAsync_v2", u64(d.value + 128), host, C.c_size_t(16), s)
    out["hostfn"] = call("cuLaunchHostFunc", s, fn, None)
    out["graph_launch"] = call("cuGraphLaunch", ex, s)
    ev = vp()
    ok("cuEventCreate", C.byref(ev), 0)
    out["record"] = call("cuEventRecord", ev, s)
    out["wait_ptsz"] = call("cuStreamWaitEvent_ptsz", s2, ev, 0)
    st = C.c_int(-1)
    out["joined"] = call("cuStreamIsCapturing", s2, C.byref(st)) or st.value
    out["memset_s2"] = call("cuMemsetD8Async", u64(d.value + 512), C.c_ubyte(5), C.c_size_t(8),
                            s2)
    ok("cuEventRecord", ev, s2)
    out["join_back"] = call("cuStreamWaitEvent", s, ev, 0)
    out["untouched"] = C.string_at(d.value, 4096) == bytes(4096) and not calls
    graph = vp()
    out["end"] = call("cuStreamEndCapture", s, C.byref(graph))
    out["types"] = _node_types(graph)
    g_ex = vp()
    ok("cuGraphInstantiateWithFlags", C.byref(g_ex), graph, u64(0))
    ok("cuGraphLaunch", g_ex, s)
    ok("cuStreamSynchronize", s)
    mem = C.string_at(d.value, 4096)
    out["replayed"] = {
        "memset": mem[0:64] == bytes([7, 0, 0, 0]) * 16,
        "memcpy": mem[64:128] == mem[0:64],
        "htod": mem[128:144] == bytes(range(1, 17)),
        "graph": mem[256:272] == b"\xab" * 16,
        "s2": mem[512:520] == b"\x05" * 8,
        "hostfn": len(calls),
    }

    # a stream callback may not be captured: the capture is invalidated
    out["begin2"] = call("cuStreamBeginCapture_v2", s, GLOBAL)
    cb = C.CFUNCTYPE(None, vp, C.c_int, vp)(lambda *_: None)
    out["callback"] = call("cuStreamAddCallback", s, cb, None, 0)
    g2 = vp()
    out["end2"] = call("cuStreamEndCapture", s, C.byref(g2))
