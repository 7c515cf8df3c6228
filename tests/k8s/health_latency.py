"""How long after a controller's death the shares turn Unhealthy (a measurement, not a test):

    .venv/bin/python tests/k8s/health_latency.py [N] [plugin options...]

tgs-device-plugin with its defaults (--health-interval 1, --timeout 3, --unhealthy-after 3)
against the test kubelet and a controller on one simulated GPU; N (5) times: the controller
started, the shares Healthy on ListAndWatch, the controller killed with SIGKILL (its socket
file stays behind, as after a crash), and the time until ListAndWatch reports every share
Unhealthy."""

from __future__ import annotations

import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fake_kubelet import FakeKubelet, Watch
from latency import stage_env

BIN = Path(sys.executable).parent


def _controller(root: Path, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen([BIN / "tgs-controller", "--foreground", "--sim", "--state-dir",
                             str(root / "state"), "--runtime-dir", env["TGS_RUNTIME_DIR"]],
                            env=env, stderr=subprocess.DEVNULL)
    sock = Path(env["TGS_RUNTIME_DIR"]) / "control.sock"
    deadline = time.monotonic() + 30
    while not sock.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("the controller did not come up")
        time.sleep(0.05)
    return proc


def main(n: int, extra: list[str]) -> None:
    root, _, env = stage_env("tgs-hl-")
    kubelet = FakeKubelet(root)
    kubelet.start()
    ctl = _controller(root, env)
    plugin = subprocess.Popen([BIN / "tgs-device-plugin", "--plugin-dir", str(kubelet.dir),
                               "--pod-resources", str(kubelet.pod_resources),
                               "--api-server", "none", *extra], env=env,
                              stderr=open(os.environ.get("HL_LOG", os.devnull), "w"))
    watch = None
    took = []
    try:
        watch = Watch(kubelet.plugin(kubelet.next_registration(timeout=60).endpoint))
        for i in range(n):
            if i:
                ctl = _controller(root, env)
            watch.until(lambda d: set(d.values()) == {"Healthy"}, timeout=60)
            time.sleep(random.uniform(1.0, 3.0))    # a death at any moment of the poll cycle
            ctl.send_signal(signal.SIGKILL)
            t0 = time.monotonic()
            ctl.wait()
            watch.until(lambda d: set(d.values()) == {"Unhealthy"}, timeout=60)
            took.append(time.monotonic() - t0)
            print(f"run {i + 1}: Unhealthy {took[-1]:.2f} s after SIGKILL", flush=True)
        print(f"SIGKILL to Unhealthy, {n} runs: median {statistics.median(took):.2f} s, "
              f"min {min(took):.2f} s, max {max(took):.2f} s")
    finally:
        if watch is not None:
            watch.close()
        for proc in (plugin, ctl):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)
        kubelet.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    count = int(args.pop(0)) if args and args[0].isdigit() else 5
    main(count, args)
