"""Shim overhead, side by side: ns added per cuLaunchKernel, per cuMemAlloc_v2+cuMemFree_v2
pair and per launch+cuCtxSynchronize cycle (for a production process: a busy/idle transition
with its FUTEX_WAKE), for an unthrottled process, against a do-nothing stub driver and against
the simulator; plus callgrind instructions per launch (noise-free).
Not a test: `python -m tgs.bench.overhead`.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tgs.intercept import devseg, segment
from tgs.intercept.locate import build_path
from tgs.intercept.simstate import STATE_ENV

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "bench" / "csrc" / "overhead"
OUT = build_path("bench")
SHIM = build_path("libtgs.so")
SIM_DIR = build_path("sim")
CFLAGS = ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
          f"-I{ROOT / 'contracts' / 'include'}"]


@dataclass
class Figures:
    driver: str
    mode: str
    launch_ns: float
    alloc_free_ns: float
    cycle_ns: float


def build() -> tuple[Path, Path]:
    stub_dir = OUT / "stub"
    stub_dir.mkdir(parents=True, exist_ok=True)
    stub = stub_dir / "libcuda.so.1"
    subprocess.run(["gcc", *CFLAGS, "-fPIC", "-shared", "-Wl,-soname,libcuda.so.1",
                    "-o", str(stub), str(SRC / "stub_driver.c")], check=True)
    link = stub_dir / "libcuda.so"
    if not link.exists():
        link.symlink_to("libcuda.so.1")
    exe = OUT / "launch_bench"
    subprocess.run(["gcc", *CFLAGS, "-o", str(exe), str(SRC / "launch_bench.c"),
                    "-Wl,--no-as-needed", f"-L{stub_dir}", "-lcuda"], check=True)
    return stub_dir, exe


def _env(lib_dir: Path, shim: bool, seg: Path | None, state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    env["LD_LIBRARY_PATH"] = str(lib_dir)
    env[STATE_ENV] = str(state)
    if shim:
        env["LD_PRELOAD"] = str(SHIM)
        if seg is not None:
            env["TGS_SEGMENT"] = str(seg)
    return env


def _time(exe: Path, env: dict[str, str], batches: int, batch: int
          ) -> tuple[float, float, float]:
    out = subprocess.run([str(exe), "time", str(batches), str(batch)], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout.split()
    return float(out[1]), float(out[3]), float(out[5])


def measure(exe: Path, lib_dir: Path, driver: str, seg: Path, tmp: Path, rounds: int,
            batches: int, batch: int) -> list[Figures]:
    """Alternate the modes round by round, so machine noise hits them alike.

    "production slot": unthrottled with gate PUBLISH, as the adaptive policy runs production:
    the first launch of each batch (after a synchronize) is an idle->busy transition."""
    modes = {"no shim": (False, None), "shim, no segment": (True, None),
             "shim, unthrottled slot": (True, seg),
             "shim, production slot": (True, seg.with_name("prod.seg"))}
    res: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
    for r in range(rounds):
        for m, (shim, s) in modes.items():
            res[m].append(_time(exe, _env(lib_dir, shim, s, tmp / f"st{r}"), batches, batch))
    return [Figures(driver, m, statistics.median(x[0] for x in v),
                    statistics.median(x[1] for x in v), statistics.median(x[2] for x in v))
            for m, v in res.items()]


def callgrind_ir(exe: Path, lib_dir: Path, seg: Path | None, shim: bool, tmp: Path) -> float:
    """Instructions per launch: (Ir at 2N - Ir at N) / N, so start-up cancels out."""
    def ir(n: int) -> int:
        p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.%p",
                            str(exe), "count", str(n)], env=_env(lib_dir, shim, seg, tmp / "cg"),
                           capture_output=True, text=True, timeout=600)
        m = re.search(r"Collected : (\d+)", p.stderr)
        if not m:
            raise RuntimeError(p.stderr[-2000:])
        return int(m.group(1))

    n = 20000
    return (ir(2 * n) - ir(n)) / n


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--no-callgrind", action="store_true")
    args = ap.parse_args()
    stub_dir, exe = build()
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        seg = segment.create(tmp / "bench.seg", "bench", nslots=8)
        seg.close()
        seg = segment.create(tmp / "prod.seg", "prod", nslots=8, gate_flags=segment.GATE_PUBLISH)
        seg.close()
        devseg.create_device(tmp, 0).close()
        rows = measure(exe, stub_dir, "stub", tmp / "bench.seg", tmp, args.rounds, args.batches,
                       args.batch)
        if (SIM_DIR / "libcuda.so.1").exists():
            rows += measure(exe, SIM_DIR, "simulator", tmp / "bench.seg", tmp, args.rounds,
                            max(args.batches // 4, 20), min(args.batch, 256))
        print(f"machine: nproc={os.cpu_count()}, cpu={cpu_model()}")
        print("| driver | mode | ns/launch | added | ns/alloc+free | added | ns/launch+sync "
              "| added |")
        print("|---|---|---|---|---|---|---|---|")
        base = {r.driver: r for r in rows if r.mode == "no shim"}
        for r in rows:
            b = base[r.driver]
            print(f"| {r.driver} | {r.mode} | {r.launch_ns:.1f} | {r.launch_ns - b.launch_ns:+.1f}"
                  f" | {r.alloc_free_ns:.0f} | {r.alloc_free_ns - b.alloc_free_ns:+.0f}"
                  f" | {r.cycle_ns:.0f} | {r.cycle_ns - b.cycle_ns:+.0f} |")
        if not args.no_callgrind and shutil.which("valgrind"):
            plain = callgrind_ir(exe, stub_dir, None, False, tmp)
            slot = callgrind_ir(exe, stub_dir, tmp / "bench.seg", True, tmp)
            print(f"callgrind (stub): {plain:.1f} instr/launch without the shim, {slot:.1f} with "
                  f"an unthrottled slot: {slot - plain:+.1f} instructions added")


if __name__ == "__main__":
    main()
