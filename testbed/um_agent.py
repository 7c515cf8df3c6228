"""A driver-API process steered line by line on stdin (residency tests, oversub_sim.py).

Each command line gets one JSON line back on stdout:
  malloc N | managed N        -> {"r": code, "ptr": address, "us": wall time of the call}
  free P                      -> {"r": code}
  prefetch P N DEV            -> {"r": code}            (DEV -1: the host)
  advise P N ADVICE DEV       -> {"r": code}
  info                        -> {"r": code, "free": bytes, "total": bytes}
  kernel                      -> {"r": code, "ms": device time of one 1-thread kernel}
  fill P N BYTE / check P N BYTE -> {"r": code, "ok": whether every byte is BYTE}
  quit
"""

from __future__ import annotations

import ctypes as C
import json
import os
import sys
import time
from collections.abc import Callable

from tgs.intercept import simstate

cu = C.CDLL("libcuda.so.1")
u64, vp = C.c_uint64, C.c_void_p
IMG = b"// tgs-sim: cost k 1.0\n.version 8.0\n.entry k()\n{\nret;\n}\n"


def call(name: str, *args: object) -> int:
    return int(getattr(cu, name)(*args))


def setup() -> vp:
    assert call("cuInit", 0) == 0
    dev, ctx, mod, fn = C.c_int(), vp(), vp(), vp()
    assert call("cuDeviceGet", C.byref(dev), 0) == 0
    assert call("cuDevicePrimaryCtxRetain", C.byref(ctx), dev) == 0
    assert call("cuCtxSetCurrent", ctx) == 0
    assert call("cuModuleLoadData", C.byref(mod), C.c_char_p(IMG)) == 0
    assert call("cuModuleGetFunction", C.byref(fn), mod, b"k") == 0
    return fn


def busy_ns() -> int:
    """Device time this process has consumed (the state file's exact counter)."""
    snap = simstate.read_state(os.environ["TGS_SIM_STATE"])
    mine = [p for p in snap.processes if p.pid == os.getpid() and p.alive]
    return mine[0].busy_ns[0] if mine else -1


def kernel(fn: vp) -> dict[str, object]:
    call("cuCtxSynchronize")
    before = busy_ns()
    r = call("cuLaunchKernel", fn, 1, 1, 1, 1, 1, 1, 0, None, None, None)
    call("cuCtxSynchronize")
    return {"r": r, "ms": (busy_ns() - before) / 1e6}


def run(fn: vp, words: list[str]) -> dict[str, object]:
    op, a = words[0], [int(w) for w in words[1:]]
    if op in ("malloc", "managed"):
        p = u64()
        t0 = time.perf_counter()
        r = (call("cuMemAlloc_v2", C.byref(p), C.c_size_t(a[0])) if op == "malloc" else
             call("cuMemAllocManaged", C.byref(p), C.c_size_t(a[0]), 1))
        return {"r": r, "ptr": p.value, "us": (time.perf_counter() - t0) * 1e6}
    if op == "free":
        return {"r": call("cuMemFree_v2", u64(a[0]))}
    if op == "prefetch":
        return {"r": call("cuMemPrefetchAsync", u64(a[0]), C.c_size_t(a[1]), a[2], None)}
    if op == "advise":
        return {"r": call("cuMemAdvise", u64(a[0]), C.c_size_t(a[1]), a[2], a[3])}
    if op == "info":
        f, t = C.c_size_t(), C.c_size_t()
        r = call("cuMemGetInfo_v2", C.byref(f), C.byref(t))
        return {"r": r, "free": f.value, "total": t.value}
    if op == "kernel":
        return kernel(fn)
    if op == "fill":
        return {"r": call("cuMemsetD8_v2", u64(a[0]), C.c_ubyte(a[2]), C.c_size_t(a[1]))}
    if op == "check":
        buf = C.create_string_buffer(a[1])
        r = call("cuMemcpyDtoH_v2", buf, u64(a[0]), C.c_size_t(a[1]))
        return {"r": r, "ok": r == 0 and buf.raw == bytes([a[2]]) * a[1]}
    return {"r": -1, "error": f"unknown command {op}"}


def serve(handler: Callable[[vp, list[str]], dict[str, object]] = run) -> None:
    """Say ready, then answer one JSON line per command line until "quit" or EOF."""
    fn = setup()
    print(json.dumps({"r": 0, "ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        print(json.dumps(handler(fn, words)), flush=True)


def main() -> None:
    serve()


if __name__ == "__main__":
    main()
