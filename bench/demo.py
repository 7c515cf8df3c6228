"""`make demo`: two driver-API jobs alone and then together on one GPU.

On a machine without a GPU this runs on the simulated driver (build/sim/libcuda.so.1) with a
private state file, so it never disturbs anything else. It prints each job's throughput alone and
when sharing the device, side by side.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tgs.bench.workload import WorkloadHandle, WorkloadSpec, start_workload

ROOT = Path(__file__).resolve().parents[1]
SIM_DIR = ROOT / "build" / "sim"
SECONDS = float(os.environ.get("TGS_DEMO_SECONDS", "4"))


@dataclass
class Job:
    label: str
    spec: WorkloadSpec


def demo_jobs(seconds: float) -> list[Job]:
    # A training-like job: 4 x 1 ms kernels then a 2 ms host gap (about 2/3 GPU duty cycle),
    # and a saturating job that never leaves the GPU idle.
    return [
        Job("train (4 x 1 ms kernels + 2 ms gap)",
            WorkloadSpec(name="train", kernels=4, kernel_us=1000, gap_ms=2, seconds=seconds)),
        Job("batch (saturating, 2 ms kernels)",
            WorkloadSpec(name="batch", kernels=8, kernel_us=2000, gap_ms=0, seconds=seconds)),
    ]


def sim_env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TGS_SIM_")}
    env.pop("LD_PRELOAD", None)
    env["TGS_SIM_STATE"] = str(state)
    env["LD_LIBRARY_PATH"] = f"{SIM_DIR}:{env['LD_LIBRARY_PATH']}" if env.get(
        "LD_LIBRARY_PATH") else str(SIM_DIR)
    return env


def run_together(jobs: list[Job], env: dict[str, str]) -> list[float]:
    handles: list[WorkloadHandle] = []
    try:
        for job in jobs:
            handles.append(start_workload(job.spec, env))
        timeout = SECONDS * 4 + 30
        return [h.wait(timeout).it_per_s for h in handles]
    finally:
        for h in handles:
            h.kill()


def main() -> int:
    jobs = demo_jobs(SECONDS)
    with tempfile.TemporaryDirectory(prefix="tgs-demo-") as tmp:
        env = sim_env(Path(tmp) / "sim-state")
        print(f"TGS demo on the simulated GPU ({SECONDS:g} s per run)\n")
        solo: list[float] = []
        for job in jobs:
            print(f"  running {job.spec.name} alone ...", flush=True)
            solo.append(run_together([job], env)[0])
        print("  running both together ...\n", flush=True)
        shared = run_together(jobs, env)
    width = max(len(j.label) for j in jobs)
    print(f"{'job':<{width}}  {'alone it/s':>10}  {'shared it/s':>11}  {'shared/alone':>12}")
    for job, a, s in zip(jobs, solo, shared):
        ratio = s / a if a > 0 else 0.0
        print(f"{job.label:<{width}}  {a:>10.1f}  {s:>11.1f}  {ratio:>12.2f}")
    print("\nWithout control, plain co-execution slows the training job down: the GPU time-slices "
          "between them.\nThe controller (tgs-controller) exists to keep production at full speed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
