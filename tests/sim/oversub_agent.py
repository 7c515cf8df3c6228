"""tgs.testbed.um_agent plus the commands the oversubscription tests need (run as a script).

Extra commands, one JSON line back each:
  sync                       -> {"r": code}        (cuCtxSynchronize)
  busy                       -> {"r": 0, "ns": this process's device time so far}
  pstream P N DEV            -> {"r": code, "ms": device time of the prefetch}: a prefetch on
                                a stream of its own, synchronized
  hostalloc N | hostmalloc N -> {"r": code, "ptr": address}  (cuMemHostAlloc / cuMemAllocHost)
  freehost P                 -> {"r": code}
  hostreg N                  -> {"r": code, "ptr": address}  (cuMemHostRegister of N new bytes)
  unreg P                    -> {"r": code}
  launch                     -> {"r": code}        (one 1-thread kernel, not synchronized)
  amalloc N / afree P        -> cuMemAllocAsync / cuMemFreeAsync on the legacy default stream
  malloc32 N / free32 P      -> the legacy 32-bit cuMemAlloc / cuMemFree
  ctx D                      -> {"r": code}: device D's primary context becomes current
  kernels N T                -> {"r": code, "s": wall seconds}: N kernels of T threads each
                                (T ns each at the default cost), each synchronized
"""

from __future__ import annotations

import ctypes as C
import mmap
import time

from tgs.testbed import um_agent as ua

_registered: dict[int, mmap.mmap] = {}


def _pstream(words: list[int]) -> dict[str, object]:
    s = C.c_void_p()
    r = ua.call("cuStreamCreate", C.byref(s), 1)
    if r:
        return {"r": r}
    ua.call("cuCtxSynchronize")
    before = ua.busy_ns()
    r = ua.call("cuMemPrefetchAsync", C.c_uint64(words[0]), C.c_size_t(words[1]), words[2], s)
    ua.call("cuStreamSynchronize", s)
    ua.call("cuCtxSynchronize")
    ms = (ua.busy_ns() - before) / 1e6
    ua.call("cuStreamDestroy_v2", s)
    return {"r": r, "ms": ms}


def run(fn: C.c_void_p, words: list[str]) -> dict[str, object]:
    op, a = words[0], [int(w) for w in words[1:]]
    p = C.c_void_p()
    if op == "sync":
        return {"r": ua.call("cuCtxSynchronize")}
    if op == "busy":
        return {"r": 0, "ns": ua.busy_ns()}
    if op == "pstream":
        return _pstream(a)
    if op in ("hostalloc", "hostmalloc"):
        r = (ua.call("cuMemHostAlloc", C.byref(p), C.c_size_t(a[0]), 0) if op == "hostalloc"
             else ua.call("cuMemAllocHost_v2", C.byref(p), C.c_size_t(a[0])))
        return {"r": r, "ptr": p.value or 0}
    if op == "freehost":
        return {"r": ua.call("cuMemFreeHost", C.c_void_p(a[0]))}
    if op == "hostreg":
        m = mmap.mmap(-1, a[0])
        addr = C.addressof(C.c_char.from_buffer(m))
        r = ua.call("cuMemHostRegister_v2", C.c_void_p(addr), C.c_size_t(a[0]), 0)
        if r == 0:
            _registered[addr] = m
        return {"r": r, "ptr": addr}
    if op == "unreg":
        return {"r": ua.call("cuMemHostUnregister", C.c_void_p(a[0]))}
    if op == "amalloc":
        q = C.c_uint64()
        return {"r": ua.call("cuMemAllocAsync", C.byref(q), C.c_size_t(a[0]), None),
                "ptr": q.value}
    if op == "afree":
        return {"r": ua.call("cuMemFreeAsync", C.c_uint64(a[0]), None)}
    if op == "malloc32":
        u = C.c_uint()
        return {"r": ua.call("cuMemAlloc", C.byref(u), C.c_uint(a[0])), "ptr": u.value}
    if op == "free32":
        return {"r": ua.call("cuMemFree", C.c_uint(a[0]))}
    if op == "ctx":
        ctx = C.c_void_p()
        r = ua.call("cuDevicePrimaryCtxRetain", C.byref(ctx), a[0])
        return {"r": r or ua.call("cuCtxSetCurrent", ctx)}
    if op == "kernels":
        t0, r = time.monotonic(), 0
        for _ in range(a[0]):
            r = r or ua.call("cuLaunchKernel", fn, a[1] // 1000 or 1, 1, 1, min(a[1], 1000),
                             1, 1, 0, None, None, None) or ua.call("cuCtxSynchronize")
        return {"r": r, "s": time.monotonic() - t0}
    if op == "launch":
        return {"r": ua.call("cuLaunchKernel", fn, 1, 1, 1, 1, 1, 1, 0, None, None, None)}
    return ua.run(fn, words)


def main() -> None:
    ua.serve(run)


if __name__ == "__main__":
    main()
