"""numba-cuda as its users drive it; run in a child process.

argv: [bytes of a device array that must not fit, or 0].  Prints one JSON object.
"""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
from numba import cuda

warnings.simplefilter("ignore")  # NumbaPerformanceWarning for the small grid


@cuda.jit
def add_one(x):  # noqa: ANN001 - a numba kernel
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0


def main() -> dict[str, object]:
    too_big = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    out: dict[str, object] = {}
    host = np.arange(4096, dtype=np.float32)
    d = cuda.to_device(host)
    add_one[16, 256](d)
    cuda.synchronize()
    back = d.copy_to_host()
    # the simulator does not compute: the bytes come back as they went
    out["roundtrip"] = bool(np.array_equal(back, host))
    s = cuda.stream()
    d2 = cuda.device_array_like(host, stream=s)
    d2.copy_to_device(host, stream=s)
    add_one[16, 256, s](d2)
    s.synchronize()
    out["stream_roundtrip"] = bool(np.array_equal(d2.copy_to_host(), host))
    free, total = cuda.current_context().get_memory_info()
    out["free"], out["total"] = int(free), int(total)
    out["device"] = cuda.get_current_device().name.decode() if isinstance(
        cuda.get_current_device().name, bytes) else str(cuda.get_current_device().name)
    if too_big:
        try:
            cuda.device_array(too_big, dtype=np.uint8)
            out["too_big"] = "allocated"
        except Exception as e:  # numba's CudaAPIError
            out["too_big"] = f"{type(e).__name__}: {e}"
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
