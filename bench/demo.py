"""`make demo`: TGS on one GPU in about a minute.

Starts a tgs-controller on the simulated GPU (or the real one when NVML and the driver are
there), runs scenario S1 (a production job with ~70 % GPU duty cycle and a saturating
opportunistic job) under the default policy and under `none` (plain co-execution), plus each
job alone as the baseline, and prints production's speed against solo, the harvest of idle GPU
time and the GPU's utilisation side by side.  Writes the throughput plot to results/demo/ and
stops every process and removes every temporary file it created, also on Ctrl-C.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tgs.bench.scenarios import Budget
from tgs.bench.suite import SuiteConfig, interrupt_on_sigterm, run_suite
from tgs.testbed.gpu import resolve_gpu

ROOT = Path(__file__).resolve().parents[1]
SECONDS = float(os.environ.get("TGS_DEMO_SECONDS", "10"))


def table(doc: dict) -> str:
    s1 = doc["scenarios"]["S1"]
    rows = [("solo (alone)", 1.0, None, s1["baseline"]["gpu_util"])]
    names = {"none": "none (plain co-execution)", "adaptive": "adaptive (TGS default)"}
    for pol, m in s1["policies"].items():
        rows.append((names.get(pol, pol), m["prod_vs_solo"], m.get("harvest"), m.get("gpu_util")))

    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    out = [f"{'policy':<28} {'production vs solo':>18} {'harvest':>8} {'GPU util':>9}"]
    out += [f"{n:<28} {f(p):>18} {f(h):>8} {f(u):>9}" for n, p, h, u in rows]
    return "\n".join(out)


def main() -> int:
    interrupt_on_sigterm()
    gpu = resolve_gpu("auto")
    out = ROOT / "results" / "demo"
    budget = Budget(prod_s=SECONDS, tgs_prod_s=SECONDS, solo_s=min(SECONDS, 5.0))
    print(f"TGS demo on the {'simulated' if gpu == 'sim' else 'real'} GPU: scenario S1, "
          f"production runs {SECONDS:g} s next to a saturating opportunistic job (which starts "
          f"1 s before it and ends 1 s after: {SECONDS + 2:g} s a run), under `none` and the "
          "default policy, each job also alone\n", flush=True)
    try:
        doc = run_suite(SuiteConfig(keys=["S1"], policies=["none", "adaptive"], budget=budget,
                                    gpu=gpu, out=out))
    except KeyboardInterrupt:
        print("interrupted: every process the demo started was stopped", file=sys.stderr)
        return 130
    print()
    print(table(doc))
    print("\nproduction vs solo: its throughput next to the opportunistic job / alone."
          "\nharvest: GPU time the opportunistic job got / the idle time production left "
          "alone (> 1: it took production's time)."
          "\nGPU util: busy time / wall time; `none` shows more than the default because it "
          "lets the opportunistic job run into production's time as well: production's loss.")
    for plot in doc.get("plots") or []:
        what = {"S1.png": "throughput over time, one panel per run",
                "headline.png": "production vs solo, harvest and GPU utilisation per policy; "
                                "dotted lines: the targets (0.97, 0.8)"}.get(Path(plot).name, "")
        print(f"plot: {plot}" + (f" ({what})" if what else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
