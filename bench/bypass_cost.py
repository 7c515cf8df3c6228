"""Cost of one BypassDetector.look (a measurement, not a test): N GPU processes, each a real
process with ~100 open fds (the real /proc), every second one (or, with a second argument
`all`, every one) holding a job segment open.

Run: .venv/bin/python -m tgs.bench.bypass_cost 64 [all]
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tgs.controller.bypass import BypassDetector, GpuProcess
from tgs.controller.devices import Device

CHILD = """import sys, time
fds = [open('/dev/null') for _ in range(100)]
seg = open(sys.argv[1]) if sys.argv[1] else None
print(1, flush=True)
time.sleep(120)
"""


def main() -> None:
    logging.disable(logging.WARNING)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    every = len(sys.argv) > 2
    d = Path(tempfile.mkdtemp())
    for i in range(n):
        (d / f"job{i}.seg").write_bytes(b"x" * 4096)
    procs = []
    try:
        for i in range(n):
            seg = str(d / f"job{i}.seg") if every or i % 2 else ""
            procs.append(subprocess.Popen([sys.executable, "-c", CHILD, seg],
                                          stdout=subprocess.PIPE))
        for p in procs:
            assert p.stdout is not None
            p.stdout.readline()
        gpu = [GpuProcess(p.pid, 0, 1, 1) for p in procs]
        det = BypassDetector([Device(0, "u", "n", 1, "sim")], d, lister=lambda _: gpu)
        det.look(0.0)
        rounds = 50
        t0, c0 = time.perf_counter(), time.process_time()
        for k in range(rounds):
            det.look(float(k + 1))
        wall = (time.perf_counter() - t0) / rounds * 1e3
        cpu = (time.process_time() - c0) / rounds * 1e3
        print(f"N={n} processes ({'all' if every else 'half'} managed, ~100 fds each): "
              f"look {wall:.2f} ms wall, {cpu:.2f} ms CPU; reported {len(det.last[0])}")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for f in d.iterdir():
            f.unlink()
        d.rmdir()


if __name__ == "__main__":
    main()
