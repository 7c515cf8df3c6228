"""The launch path of a multi-device job's process (one part per GPU, TGS_PARTS) against a
single-device job's, on the simulator with two GPUs: ns per cuLaunchKernel (medians of rounds
alternating the modes) and callgrind instructions per launch (noise-free).  The part is chosen
once at attach, so the two should not differ.  Not a test: `python -m tgs.bench.parts_overhead`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from tgs.intercept import segment

from .overhead import SIM_DIR, _env, _time, build


def _uuid(exe_env: dict[str, str], tmp: Path) -> str:
    """The simulator's UUID of device 0 (cuDeviceGetUuid_v2 through ctypes)."""
    code = ("import ctypes; lib = ctypes.CDLL('libcuda.so.1'); assert lib.cuInit(0) == 0; "
            "u = (ctypes.c_ubyte * 16)(); assert lib.cuDeviceGetUuid_v2(u, 0) == 0; "
            "h = bytes(u).hex(); "
            "print(f'GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}')")
    import sys
    return subprocess.run([sys.executable, "-c", code], env=exe_env, check=True,
                          capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--no-callgrind", action="store_true")
    args = ap.parse_args()
    _, exe = build()
    with tempfile.TemporaryDirectory(prefix="tgs-parts-bench-") as td:
        tmp = Path(td)
        state = tmp / "state"
        base = _env(SIM_DIR, True, None, state)
        base["TGS_SIM_DEVICES"] = "2"
        uuid0 = _uuid(base, tmp)
        single = segment.create(tmp / "one.seg", "one", nslots=64)
        parts = [segment.create(tmp / f"mj@{k}.seg", f"mj@{k}", device_index=k,
                                device_uuid=uuid0 if k == 0 else "GPU-other", nslots=64)
                 for k in range(2)]
        modes = {
            "single-device slot": {**base, "TGS_SEGMENT": str(single.path)},
            "multi-device part": {**base, "TGS_SEGMENT": str(parts[0].path),
                                  "TGS_PARTS": ";".join(str(p.path) for p in parts)},
        }
        res: dict[str, list[float]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for m, env in modes.items():
                res[m].append(_time(exe, env, args.batches, args.batch)[0])
        assert parts[0].live_slots() == [] and parts[0].ledger()[2] > 0, "part 0 not used"
        print("| mode (simulator, 2 GPUs) | ns/launch |")
        print("|---|---|")
        for m, v in res.items():
            print(f"| {m} | {statistics.median(v):.1f} |")
        if not args.no_callgrind:
            for m, env in modes.items():
                def ir(n: int, env: dict[str, str] = env) -> int:
                    p = subprocess.run(["valgrind", "--tool=callgrind",
                                        f"--callgrind-out-file={tmp}/cg.%p", str(exe), "count",
                                        str(n)], env=env, capture_output=True, text=True,
                                       timeout=900)
                    found = re.search(r"Collected : (\d+)", p.stderr)
                    assert found, p.stderr[-500:]
                    return int(found.group(1))
                print(f"callgrind {m}: {(ir(4000) - ir(2000)) / 2000:.1f} instr/launch")
        for s in (single, *parts):
            s.close()


if __name__ == "__main__":
    main()
