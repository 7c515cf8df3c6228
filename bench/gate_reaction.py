"""FIT/WAIT gate reaction: microseconds from production's synchronize returning (its busy count
going 1 -> 0 in its publish page, then FUTEX_WAKE) until a held opportunistic launch returns.
Both processes run the shim over the stub driver (so only the gate is measured).
Not a test: `python -m tgs.bench.gate_reaction`.
"""

from __future__ import annotations

import argparse
import bisect
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from tgs.intercept import devseg, segment

from .overhead import CFLAGS, OUT, SHIM, SRC, build


def build_gate(stub_dir: Path) -> Path:
    exe = OUT / "gate_bench"
    subprocess.run(["gcc", *CFLAGS, "-o", str(exe), str(SRC / "gate_bench.c"),
                    "-Wl,--no-as-needed", f"-L{stub_dir}", "-lcuda"], check=True)
    return exe


def reactions(idle: list[int], go: list[int]) -> list[float]:
    """For each idle instant, the first held launch that returned after it (us)."""
    out = []
    for t in idle:
        k = bisect.bisect_left(go, t)
        if k < len(go):
            out.append((go[k] - t) / 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gaps", type=int, default=300)
    ap.add_argument("--busy-us", type=int, default=2000)
    ap.add_argument("--gap-us", type=int, default=1000)
    args = ap.parse_args()
    stub_dir, _ = build()
    exe = build_gate(stub_dir)
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        prod = segment.create(tmp / "prod.seg", "prod", nslots=4,
                              gate_flags=segment.GATE_PUBLISH)
        opp = segment.create(tmp / "opp.seg", "opp", nslots=4,
                             priority=segment.PRIORITY_OPPORTUNISTIC,
                             gate_flags=segment.GATE_WAIT, gate_max_wait_us=1_000_000)
        dev = devseg.create_device(tmp, 0)
        dev.set_jobs([devseg.DevJob("prod", segment.PRIORITY_PRODUCTION, 1),
                      devseg.DevJob("opp", segment.PRIORITY_OPPORTUNISTIC, 2)])
        base = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
        base.update(LD_LIBRARY_PATH=str(stub_dir), LD_PRELOAD=str(SHIM))
        secs = args.gaps * (args.busy_us + args.gap_us) / 1e6 + 1.0
        o = subprocess.Popen([str(exe), "opp", str(secs + 1.0)], text=True,
                             stdout=subprocess.PIPE, env={**base, "TGS_SEGMENT": str(opp.path)})
        p = subprocess.run([str(exe), "prod", str(args.gaps), str(args.busy_us),
                            str(args.gap_us)], text=True, capture_output=True, check=True,
                           env={**base, "TGS_SEGMENT": str(prod.path)}, timeout=600)
        out, _ = o.communicate(timeout=600)
        for f in (prod, opp, dev):
            f.close()
    idle = [int(ln.split()[1]) for ln in p.stdout.splitlines() if ln.startswith("idle ")]
    go = sorted(int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("go "))
    r = sorted(reactions(idle[1:], go))
    if not r:
        raise SystemExit("no held launch was released: is the gate working?")
    q = statistics.quantiles(r, n=10)
    print(f"gate reaction over {len(r)} gaps (busy {args.busy_us} us, gap {args.gap_us} us, "
          f"nproc={os.cpu_count()}): median {statistics.median(r):.1f} us, "
          f"p90 {q[8]:.1f} us, max {r[-1]:.1f} us")


if __name__ == "__main__":
    main()
