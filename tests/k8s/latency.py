"""Latency of the plugin's kubelet calls (a measurement, not a test):

    .venv/bin/python tests/k8s/latency.py [N]

tgs-device-plugin (64 shares) against the test kubelet and a controller on one simulated
GPU: the time from the plugin's start to its registration, then N (64) Allocate calls
(each registers a job) and N PreStartContainer calls (pod resources lookup, then `set`)."""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fake_kubelet import FakeKubelet
from tgs.k8s.api import dp

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _q(xs: list[float]) -> str:
    return (f"median {statistics.median(xs) * 1e3:.1f} ms, "
            f"p95 {sorted(xs)[int(0.95 * len(xs))] * 1e3:.1f} ms")


def stage_env(prefix: str) -> tuple[Path, Path, dict[str, str]]:
    """A private root, runtime dir and environment for a controller on one simulated GPU."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    rt = root / "rt"
    rt.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TGS_")}
    env.update(TGS_SIM_STATE=str(root / "sim"), LD_LIBRARY_PATH=str(ROOT / "build" / "sim"),
               TGS_RUNTIME_DIR=str(rt), TGS_CONTROLLER=f"ipc://{rt}/control.sock",
               TGS_SIM_DEVICES="1")
    return root, rt, env


def main(n: int) -> None:
    root, rt, env = stage_env("tgs-kl-")
    ctl = subprocess.Popen([BIN / "tgs-controller", "--foreground", "--sim", "--state-dir",
                            str(root / "state"), "--runtime-dir", str(rt)],
                           env=env, stderr=subprocess.DEVNULL)
    kubelet = FakeKubelet(root)
    kubelet.start()
    t0 = time.monotonic()
    plugin = subprocess.Popen([BIN / "tgs-device-plugin", "--plugin-dir", str(kubelet.dir),
                               "--shares", "64", "--pod-resources", str(kubelet.pod_resources),
                               "--api-server", "none"], env=env, stderr=subprocess.DEVNULL)
    try:
        reg = kubelet.next_registration(timeout=60)
        print(f"plugin start to registration: {time.monotonic() - t0:.2f} s")
        stub = kubelet.plugin(reg.endpoint)
        alloc, pre = [], []
        for i in range(n):
            ids = [f"GPU-sim-0-share-{i % 64}"]
            t = time.perf_counter()
            stub.Allocate(dp.AllocateRequest(container_requests=[
                dp.ContainerAllocateRequest(devices_ids=ids)]), timeout=30)
            alloc.append(time.perf_counter() - t)
            kubelet.hold("ns", f"p{i}", "c", "tgs.io/gpu", ids)
            t = time.perf_counter()
            stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=ids), timeout=30)
            pre.append(time.perf_counter() - t)
        print(f"Allocate (registers a job), {n} calls: {_q(alloc)}")
        print(f"PreStartContainer (pod lookup + set), {n} calls: {_q(pre)}")
    finally:
        for proc in (plugin, ctl):
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        kubelet.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
