"""Controller cost: CPU time of the control loop at 8 GPUs x 256 live processes.

    python -m tgs.bench.controller_cost [--seconds 10] [--jobs 32] [--procs 256]

Creates 8 device segments and N job segments (1 production + the rest
opportunistic per device) in a temporary directory; a child process holds 256
slots the way shims do (one open file description and OFD slot lock per
"process") and bumps their lane counters every 10 ms; this process runs the
real ControlLoop (registry, adaptive policy, segment reads and writes) every
period and reports the loop's CPU time per wall second.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from tgs.controller import protocol as P
from tgs.controller.devices import Device
from tgs.controller.loop import ControlLoop
from tgs.controller.policy import make_policy
from tgs.controller.registry import Registry
from tgs.controller.segments import SegmentFactory, device_segment
from tgs.controller.state import StateStore

NDEV = 8


def _holder(paths: list[tuple[str, int]], ready: mp.Event, stop: mp.Event) -> None:
    """Claim `count` slots in each segment like shims do, then count work until told."""
    from tgs.intercept import ofd
    from tgs.intercept import segment as S
    held = []
    for path, count in paths:
        for _ in range(count):
            seg = S.open_segment(path)          # one open file description per "process"
            for i in range(seg.nslots):
                if ofd.try_lock(seg.fd, S.LOCK_SLOT_BASE + i):
                    s = seg.slot(i)
                    s.pid, s.generation, s.state = os.getpid(), s.generation + 1, S.SLOT_ACTIVE
                    s.lanes_used = 1            # one thread launches, as a shim counts it
                    held.append((seg, s))
                    break
    ready.set()
    n = 0
    while not stop.is_set():
        n += 1
        for _, s in held:
            s.lanes[0].launches = n
            s.lanes[0].work = n * 1000
        time.sleep(0.01)
    for seg, _ in held:
        seg.close()


def run(seconds: float, jobs: int, procs: int, period: float) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="tgs-cost-"))
    try:
        seg_dir = tmp / "segments"
        devices = [Device(i, f"GPU-bench-{i}", "bench", 80 << 30, "sim") for i in range(NDEV)]
        dev_segs = {d.index: device_segment(seg_dir, d.index) for d in devices}
        reg = Registry(StateStore(tmp / "state"), devices, seg_dir, SegmentFactory(seg_dir))
        per_job = [procs // jobs + (1 if i < procs % jobs else 0) for i in range(jobs)]
        for i in range(jobs):
            prio = "production" if i < NDEV else "opportunistic"
            reg.register(P.Register(id=str(i), name=f"job{i}", priority=prio, device=i % NDEV,
                                    mem_quota=1 << 30, nslots=max(1, per_job[i])))
        paths = [(reg.jobs[f"job{i}"].rec.segment, per_job[i]) for i in range(jobs)]
        ready, stop = mp.Event(), mp.Event()
        child = mp.Process(target=_holder, args=(paths, ready, stop))
        child.start()
        try:
            if not ready.wait(60):
                raise RuntimeError("slot holder did not start")
            loop = ControlLoop(reg, make_policy("adaptive"), dev_segs, period)
            t0, c0 = time.monotonic(), time.process_time()
            nxt = t0
            while time.monotonic() - t0 < seconds:
                loop.step(time.monotonic())
                nxt += period
                time.sleep(max(0.0, nxt - time.monotonic()))
            wall, cpu = time.monotonic() - t0, time.process_time() - c0
            live = sum(j.stats.processes for j in reg.jobs.values() if j.stats is not None)
        finally:
            stop.set()
            child.join(10)
            if child.is_alive():
                child.kill()
                child.join()
        reg.close()
        for d in dev_segs.values():
            d.close()
        return {"wall_s": wall, "cpu_s": cpu, "cpu_pct": 100 * cpu / wall, "live": live,
                "steps": loop.steps, "loop_ms_avg": 1000 * loop.busy_s / max(1, loop.steps)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--procs", type=int, default=256)
    ap.add_argument("--period-ms", type=float, default=50.0)
    a = ap.parse_args()
    if not NDEV <= a.jobs <= a.procs:
        ap.error(f"need {NDEV} <= jobs <= procs")
    r = run(a.seconds, a.jobs, a.procs, a.period_ms / 1000)
    print(f"controller cost: {NDEV} GPUs, {a.jobs} jobs, {r['live']} live processes, "
          f"period {a.period_ms:g} ms, {r['steps']} periods in {r['wall_s']:.1f} s: "
          f"CPU {r['cpu_s']:.3f} s = {r['cpu_pct']:.2f} % of one core "
          f"(mean step {r['loop_ms_avg']:.3f} ms) on {platform.processor() or platform.machine()}"
          f", {os.cpu_count()} CPUs, Python {platform.python_version()}")


if __name__ == "__main__":
    main()
