"""Real CuPy (the CUDA runtime, NVRTC-compiled kernels, cuBLAS); the last line is JSON."""

from __future__ import annotations

import json
import sys

try:
    import cupy as cp
    import numpy as np

    host = np.arange(1 << 16, dtype=np.float32)
    a = cp.asarray(host)
    b = a * 2 + 1                                              # an elementwise kernel (NVRTC)
    k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 3", "tgs_triple")
    c = k(a)
    s = cp.sum(b)                                              # a reduction
    # cuBLAS; CuPy's GEMMs of 256 x 256 and up still fail on the simulator
    # (CUBLAS_STATUS_INTERNAL_ERROR, docs/simulator.md), PyTorch's do not
    m = cp.asarray(np.ones((128, 128), dtype=np.float32))
    p = m @ m
    cp.cuda.Device().synchronize()
    free, total = cp.cuda.runtime.memGetInfo()
    print(json.dumps({"roundtrip": bool((cp.asnumpy(a) == host).all()), "mm": list(p.shape),
                      "shapes": [list(c.shape), list(s.shape)], "free": free, "total": total}))
except Exception as exc:  # noqa: BLE001 - the test reads the error from the JSON line
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:2000]}))
    sys.exit(1)
