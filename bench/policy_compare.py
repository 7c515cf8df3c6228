"""Production vs opportunistic on one simulated GPU under each controller policy.

    python -m tgs.bench.policy_compare [--policy adaptive ...] [--seconds 8]

For each policy: production alone (solo it/s), then a controller with that
policy, an opportunistic job started first, and production again (shared it/s).
Prints production's shared/solo ratio and the opportunistic job's it/s.
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

from tgs.bench.workload import WorkloadSpec, run_workload, start_workload
from tgs.controller.client import Client, ControllerUnavailable

ROOT = Path(__file__).resolve().parents[1]
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


def compare(policy: str, seconds: float, base: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    env["TGS_SIM_STATE"] = str(base / f"sim-{policy}")
    env["LD_LIBRARY_PATH"] = str(ROOT / "build" / "sim")
    prod = WorkloadSpec(seconds=seconds, **PROD)   # type: ignore[arg-type]
    opp = WorkloadSpec(seconds=seconds + 1.5, **OPP)  # type: ignore[arg-type]
    solo = run_workload(prod, env=env)
    proc, rt = _controller(base, policy, env)
    try:
        c = Client(runtime_dir=rt, timeout=5)
        penv = {**env, **c.register("prod", priority="production", mem_quota=1 << 30)["env"]}
        oenv = {**env, **c.register("opp")["env"]}
        with start_workload(opp, env=oenv) as o:
            o.wait_started()
            time.sleep(0.5)
            shared = run_workload(prod, env=penv)
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
            "ratio": shared.it_per_s / solo.it_per_s, "opp": ores.it_per_s,
            "level": float(notes.get("0", {}).get("level", float("nan")))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", action="append", choices=["adaptive", "tgs", "static", "none"])
    ap.add_argument("--seconds", type=float, default=8.0)
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tgs-cmp-"))
    try:
        print("policy     prod solo it/s  prod shared it/s  ratio   opp it/s")
        for pol in a.policy or ["adaptive", "none", "static", "tgs"]:
            r = compare(pol, a.seconds, base)
            print(f"{pol:9s}  {r['solo']:14.1f}  {r['shared']:16.1f}  {r['ratio']:.3f}  "
                  f"{r['opp']:9.1f}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
