"""The thrashing guard on the simulator (docs/oversubscription.md, "Thrashing guard").

An opportunistic job holds 48 of a 64 MiB GPU (mem_total on) and loops 1 ms kernels;
production takes 40 MiB, so 24 MiB of the job live on the host and each of its kernels pays
their migration (TGS_SIM_PCIE_GBPS, 2.5 GB/s here: ~10 ms).  Production then runs 20 ms
kernels (time-sliced with the other job's, 2 ms slices).  Measured: production's kernels
per second (wall) against its solo rate, and the opportunistic job's device time over the
same period, with the guard off (TGS_OVERSUB_PAUSE_MS=0) and on.  Simulator figures: they
show the mechanism, not a real GPU's speed.
Run: python -m tgs.bench.oversub_guard_sim [--kernels 40] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tgs.bench.oversub_sim import Agent
from tgs.intercept import segment, simstate
from tgs.intercept.locate import build_path

BUILD = build_path()
MiB = 1 << 20


def _busy(state: str, pid: int) -> int:
    procs = simstate.read_state(state).processes
    return next((p.busy_ns[0] for p in procs if p.pid == pid), 0)


def run(pause_ms: int, kernels: int, tmp: Path) -> dict[str, Any]:
    state = str(tmp / f"sim-{pause_ms}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    env.update(TGS_SIM_STATE=state, TGS_SIM_MEM="64MiB", LD_LIBRARY_PATH=str(BUILD / "sim"),
               TGS_SIM_NS_PER_THREAD="1000000", TGS_SIM_PCIE_GBPS="2.5")
    seg = segment.create(tmp / f"opp-{pause_ms}.seg", "opp", mem_quota=64 * MiB,
                         priority=segment.PRIORITY_OPPORTUNISTIC, nslots=4)
    seg.set_mem_total(96 * MiB)
    opp = Agent({**env, "LD_PRELOAD": str(BUILD / "libtgs.so"), "TGS_SEGMENT": str(seg.path),
                 "TGS_OVERSUB_PAUSE_MS": str(pause_ms)})
    prod = Agent({**env, "TGS_SIM_NS_PER_THREAD": "20000000"})  # 20 ms kernels
    stop = threading.Event()
    try:
        opp.ask("malloc", 48 * MiB)
        opp.ask("kernel")
        solo_t0 = time.perf_counter()
        for _ in range(kernels // 4):
            prod.ask("kernel")
        solo = (kernels // 4) / (time.perf_counter() - solo_t0)
        prod.ask("malloc", 40 * MiB)

        def opp_loop() -> None:
            while not stop.is_set():
                try:
                    opp.ask("kernel")
                except (RuntimeError, OSError, ValueError):  # closed under it at the end
                    return

        th = threading.Thread(target=opp_loop, daemon=True)
        th.start()
        time.sleep(0.3)  # the job thrashes (or the guard engages)
        busy0 = _busy(state, opp.p.pid)
        t0 = time.perf_counter()
        for _ in range(kernels):
            prod.ask("kernel")
        wall = time.perf_counter() - t0
        opp_busy_ms = (_busy(state, opp.p.pid) - busy0) / 1e6
        stop.set()
        return {"pause_ms": pause_ms, "prod_kernels_per_s_solo": round(solo, 1),
                "prod_kernels_per_s": round(kernels / wall, 1),
                "opp_device_ms": round(opp_busy_ms, 1), "wall_s": round(wall, 2)}
    finally:
        stop.set()
        opp.close()  # unblocks the loop thread (its agent is gone)
        prod.close()
        seg.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = [run(p, a.kernels, Path(d)) for p in (0, 60000)]
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return
    for r in rows:
        print(f"guard {'off' if r['pause_ms'] == 0 else 'on '}: production "
              f"{r['prod_kernels_per_s']} kernels/s (solo {r['prod_kernels_per_s_solo']}), "
              f"opportunistic device time {r['opp_device_ms']} ms over {r['wall_s']} s")


if __name__ == "__main__":
    main()
