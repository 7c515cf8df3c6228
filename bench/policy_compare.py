"""Production vs opportunistic on one simulated GPU under each controller policy.

    python -m tgs.bench.policy_compare [--policy adaptive ...] [--seconds 8]

For each policy: production alone (solo it/s), then a controller with that
policy, an opportunistic job started first, and production again (shared it/s).
Prints production's shared/solo ratio, the opportunistic job's it/s and its
harvest: its GPU busy time while production ran, over the GPU idle time that
production leaves when alone (both from the simulator's busy counters).
Needs `make` (simulator, shim, workload).  Uses private temp dirs and stops
every process it started (by pid).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tgs.client import Client, ControllerUnavailable
from tgs.intercept.locate import build_path
from tgs.intercept.simstate import STATE_ENV, read_state
from tgs.testbed.workload import WorkloadSpec, run_workload, start_workload

PROD = dict(kernels=4, kernel_us=1000, gap_ms=3, name="prod")
OPP = dict(kernels=20, kernel_us=200, gap_ms=0, name="opp")


def _controller(base: Path, policy: str, env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    rt = Path(tempfile.mkdtemp(prefix="tgs-rt-"))
    log = open(base / f"controller-{policy}.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "tgs.controller", "--sim", "--policy", policy,
                             "--state-dir", str(base / f"state-{policy}"),
                             "--runtime-dir", str(rt)], stderr=log, env=env)
    log.close()
    for _ in range(200):
        try:
            Client(runtime_dir=rt, timeout=0.5).status()
            return proc, rt
        except ControllerUnavailable:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"controller did not start: see {base}")


def _busy(state: Path, pid: int | None = None) -> int:
    """Device 0's busy ns, or process pid's on device 0."""
    snap = read_state(state)
    if pid is None:
        return snap.devices[0].busy_ns
    return sum(p.busy_ns[0] for p in snap.processes if p.pid == pid)


def compare(policy: str, seconds: float, base: Path, prod_gap_ms: float = 3.0,
            opp_kernel_us: float = 200.0, opp_cost: float | None = None) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    state = base / f"sim-{policy}"
    env[STATE_ENV] = str(state)
    env["LD_LIBRARY_PATH"] = str(build_path("sim"))
    prod = WorkloadSpec(seconds=seconds, **{**PROD, "gap_ms": prod_gap_ms})  # type: ignore[arg-type]
    # the opportunistic job launches ~4 ms of work per synchronize whatever its kernel size
    okernels = max(1, round(4000 / (opp_kernel_us * (opp_cost or 1.0))))
    opp = WorkloadSpec(seconds=seconds + 1.5, cost_factor=opp_cost,  # type: ignore[arg-type]
                       **{**OPP, "kernels": okernels, "kernel_us": opp_kernel_us})
    t0 = time.monotonic()
    solo = run_workload(prod, env=env)
    idle_frac = max(1e-9, 1.0 - _busy(state) / ((time.monotonic() - t0) * 1e9))
    proc, rt = _controller(base, policy, env)
    try:
        c = Client(runtime_dir=rt, timeout=5)
        penv = {**env, **c.register("prod", priority="production", mem_quota=1 << 30)["env"]}
        oenv = {**env, **c.register("opp")["env"]}
        with start_workload(opp, env=oenv) as o:
            o.wait_started()
            time.sleep(0.5)
            b0, t0 = _busy(state, o.pid), time.monotonic()
            shared = run_workload(prod, env=penv)
            harvest = (_busy(state, o.pid) - b0) / ((time.monotonic() - t0) * 1e9 * idle_frac)
            ores = o.wait(timeout=seconds + 60)
        notes = c.status().get("policy_state", {})
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(rt, ignore_errors=True)
    return {"solo": solo.it_per_s, "shared": shared.it_per_s,
            "ratio": shared.it_per_s / solo.it_per_s, "opp": ores.it_per_s, "harvest": harvest,
            "level": float(notes.get("0", {}).get("level", float("nan")))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", action="append", choices=["adaptive", "tgs", "static", "none"])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--prod-gap-ms", type=float, default=3.0,
                    help="production's host gap after its 4 x 1 ms kernels")
    ap.add_argument("--opp-kernel-us", type=float, default=200.0,
                    help="opportunistic kernel time (x cost factor)")
    ap.add_argument("--opp-cost-factor", type=float, default=None,
                    help="opportunistic kernels cost this many times their work units")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tgs-cmp-"))
    try:
        print("policy     prod solo it/s  prod shared it/s  ratio   opp it/s  harvest")
        for pol in a.policy or ["adaptive", "none", "static", "tgs"]:
            r = compare(pol, a.seconds, base, a.prod_gap_ms, a.opp_kernel_us, a.opp_cost_factor)
            print(f"{pol:9s}  {r['solo']:14.1f}  {r['shared']:16.1f}  {r['ratio']:.3f}  "
                  f"{r['opp']:9.1f}  {r['harvest']:.3f}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
