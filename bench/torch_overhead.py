"""The shim's cost to a real PyTorch job, side by side: the same training loop
(bench/torch_train.py, no host gap: launch-bound) bare and as a production job alone under
tgs-run with a controller, alternating, on the same simulated GPU.
Not a test: `python -m tgs.bench.torch_overhead [--rounds 3] [--seconds 4]`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tgs.testbed.frameworks_venv import torch_python
from tgs.testbed.gpu import job_env

ROOT = Path(__file__).resolve().parents[1]
TRAIN = Path(__file__).with_name("torch_train.py")
BIN = Path(sys.executable).parent


def _it_per_s(argv: list[str], env: dict[str, str]) -> float:
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    lines = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines or lines[-1].get("type") != "summary":
        raise SystemExit(f"{' '.join(argv[:3])}...: exit {p.returncode} {p.stderr[-800:]}")
    return float(lines[-1]["it_per_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--hidden", type=int, default=256)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tgs-tov-"))
    env = job_env("sim", work / "sim-state")
    runtime = Path(tempfile.mkdtemp(prefix="tgs-rt-"))
    ctl = subprocess.Popen([str(BIN / "tgs-controller"), "--foreground", "--sim", "--state-dir",
                            str(work / "state"), "--runtime-dir", str(runtime)], env=env,
                           stderr=subprocess.DEVNULL)
    env["TGS_CONTROLLER"] = f"ipc://{runtime / 'control.sock'}"
    loop = [torch_python(), str(TRAIN), "--seconds", str(a.seconds), "--hidden",
            str(a.hidden), "--gap-ms", "0"]
    try:
        time.sleep(2)
        bare, shim = [], []
        for i in range(a.rounds):
            bare.append(_it_per_s(loop, env))
            shim.append(_it_per_s([str(BIN / "tgs-run"), "--name", f"tov{i}", "--priority",
                                   "production", "--mem", "4GiB", "--", *loop], env))
    finally:
        ctl.send_signal(signal.SIGTERM)
        ctl.wait(timeout=20)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)
    ratios = [s / b for s, b in zip(shim, bare)]
    print("| run | bare it/s | under the shim it/s | ratio |\n|---|---|---|---|")
    for i, (b, s, r) in enumerate(zip(bare, shim, ratios)):
        print(f"| {i + 1} | {b:.1f} | {s:.1f} | {r:.3f} |")
    print(f"\nmedian ratio {statistics.median(ratios):.3f} (range {min(ratios):.3f}-"
          f"{max(ratios):.3f}); torch_train --hidden {a.hidden} --gap-ms 0, {a.seconds:g} s "
          f"a run, simulated GPU")


if __name__ == "__main__":
    main()
