"""cuda.core (the pythonic layer of cuda-python) as its users drive it; run in a child process.

Compiles a kernel with NVRTC, loads it (cuLibraryLoadData), allocates from the device's memory
pool, launches on a stream, records an event.  Prints one JSON object.
"""

from __future__ import annotations

import json

import numpy as np
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

SRC = (
    'extern "C" __global__ void scale(float *p, int n)'
    " { int i = threadIdx.x; if (i < n) p[i] *= 2; }"
)


def main() -> dict[str, object]:
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    prog = Program(SRC, code_type="c++", options=ProgramOptions(arch="sm_90"))
    kernel = prog.compile("cubin").get_kernel("scale")
    buf = dev.allocate(4096, stream=stream)
    launch(stream, LaunchConfig(grid=1, block=256), kernel, buf, np.int32(256))
    event = stream.record()
    stream.sync()
    out = {"name": dev.name, "cc": list(dev.compute_capability), "event_done": event.is_done}
    buf.close(stream)
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
