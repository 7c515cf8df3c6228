"""Oversubscription on the simulator, three ways side by side (docs/oversubscription.md).

An opportunistic job holds ~60 % of the GPU and runs; production then ramps its memory to
~70 % in steps, runs, and frees.  Modes:
  none: both use device memory (the opportunistic job under a hard quota): production OOMs;
  tgs:  the published TGS behaviour: both use managed memory, production's advised to prefer
        the GPU (the driver evicts the opportunistic pages first);
  ours: the shim with mem_total: the opportunistic job's allocations become managed memory,
        production's stay device memory (never evicted).
Figures are the simulator's: kernel device time = migration of non-resident bytes at
TGS_SIM_PCIE_GBPS; an evicting allocation waits for the write-back.  They show the mechanism,
not a real GPU's speed.  Run: python -m tgs.bench.oversub_sim [--mem 16GiB] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tgs.intercept import segment
from tgs.intercept.locate import build_path

BUILD = build_path()
PREFERRED = 3  # CU_MEM_ADVISE_SET_PREFERRED_LOCATION
GiB = 1 << 30


class Agent:
    def __init__(self, env: dict[str, str]) -> None:
        self.p = subprocess.Popen([sys.executable, "-m", "tgs.testbed.um_agent"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.ask()["ready"]

    def ask(self, *words: object) -> dict[str, Any]:
        assert self.p.stdin is not None and self.p.stdout is not None
        if words:
            self.p.stdin.write(" ".join(str(w) for w in words) + "\n")
            self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("agent exited")
        return dict(json.loads(line))

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)


def run_mode(mode: str, mem: int, tmp: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    env.update(TGS_SIM_STATE=str(tmp / f"sim-{mode}"), TGS_SIM_MEM=str(mem),
               LD_LIBRARY_PATH=str(BUILD / "sim"))
    opp_env = dict(env)
    seg = None
    if mode == "ours":
        seg = segment.create(tmp / "opp.seg", "opp", mem_quota=mem,
                             priority=segment.PRIORITY_OPPORTUNISTIC, nslots=4)
        seg.set_mem_total(2 * mem)
        opp_env.update(LD_PRELOAD=str(BUILD / "libtgs.so"), TGS_SEGMENT=str(seg.path))
    opp, prod = Agent(opp_env), Agent(env)
    out: dict[str, Any] = {"mode": mode, "steps": []}
    try:
        opp_kind = "managed" if mode == "tgs" else "malloc"  # ours: the shim converts it
        out["opp_alloc_rc"] = opp.ask(opp_kind, int(mem * 0.6))["r"]
        opp.ask("kernel")
        out["opp_kernel_ms_before"] = opp.ask("kernel")["ms"]
        ptrs = []
        for _ in range(7):  # production ramps to 70 % in 10 % steps
            n = mem // 10
            if mode == "tgs":
                got = prod.ask("managed", n)
                prod.ask("advise", got["ptr"], n, PREFERRED, 0)
                got["first_kernel_ms"] = prod.ask("kernel")["ms"]
            else:
                got = prod.ask("malloc", n)
            out["steps"].append({k: got[k] for k in ("r", "us", "first_kernel_ms") if k in got})
            if got["r"] != 0:
                break
            ptrs.append(got["ptr"])
        out["prod_allocs_ok"] = sum(1 for s in out["steps"] if s["r"] == 0)
        out["prod_kernel_ms"] = prod.ask("kernel")["ms"]
        out["opp_kernel_ms_evicted"] = [opp.ask("kernel")["ms"] for _ in range(3)]
        for p in ptrs:
            prod.ask("free", p)
        out["opp_kernel_ms_after_free"] = [opp.ask("kernel")["ms"] for _ in range(2)]
    finally:
        opp.close()
        prod.close()
        if seg is not None:
            seg.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mem", default="16GiB")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    mem = segment_size(a.mem)
    with tempfile.TemporaryDirectory() as d:
        res = [run_mode(m, mem, Path(d)) for m in ("none", "tgs", "ours")]
    if a.json:
        print(json.dumps(res, indent=1))
        return
    for r in res:
        slow = max(r["opp_kernel_ms_evicted"]) if r["opp_kernel_ms_evicted"] else 0.0
        waits = [s["us"] / 1000 for s in r["steps"] if s["r"] == 0]
        faults = [s.get("first_kernel_ms", 0.0) for s in r["steps"] if s["r"] == 0]
        print(f"{r['mode']:5s} production allocations ok {r['prod_allocs_ok']}/7 "
              f"(slowest {max(waits, default=0):.1f} ms wall, its kernels' faults up to "
              f"{max(faults, default=0):.1f} ms); "
              f"opportunistic kernel {r['opp_kernel_ms_before']:.3f} ms before, "
              f"{slow:.1f} ms while evicted, "
              f"{r['opp_kernel_ms_after_free'][0]:.1f} then "
              f"{r['opp_kernel_ms_after_free'][1]:.3f} ms after production freed")


def segment_size(text: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, m in units.items():
        if text.endswith(u):
            return int(float(text[: -len(u)]) * m)
    return int(text)


if __name__ == "__main__":
    main()
