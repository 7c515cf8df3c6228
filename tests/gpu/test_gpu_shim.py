"""The shim against the real driver (issue: validate on a real NVIDIA GPU).

Each test runs a real client under the shim with a job segment and checks what the shim saw:
every resolution path reaches the hooks, quotas behave as PyTorch expects, graph replays are
charged. Skipped without a real GPU (conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_helpers import ROOT, gpu_env
from tgs.intercept import segment

pytestmark = pytest.mark.gpu
WORKLOAD = ROOT / "build" / "bin" / "tgs-workload"
SHIM = ROOT / "build" / "libtgs.so"


def _job_env(tmp_path: Path, **seg_kw: int) -> tuple[segment.Segment, dict[str, str]]:
    seg = segment.create(tmp_path / "job.seg", "gpu-test", nslots=8, **seg_kw)
    env = gpu_env()
    env.update(LD_PRELOAD=str(SHIM), TGS_SEGMENT=str(seg.path))
    return seg, env


def _launches(seg: segment.Segment) -> int:
    h = seg.header
    live = sum(seg.counters(i).launches for i in range(seg.nslots))
    return int(h.retired_launches) + live


@pytest.mark.parametrize("resolve,extra", [
    ("proc", []), ("proc", ["--per-thread"]), ("proc", ["--cuda-version", "11030"]),
    ("proc", ["--cuda-version", "13000"]), ("dlsym", []), ("dlsym", ["--per-thread"]),
    ("link", []),
])
@pytest.mark.parametrize("launch", ["kernel", "ex", "coop", "graph"])
def test_every_path_reaches_the_hooks(tmp_path: Path, resolve: str, extra: list[str],
                                      launch: str) -> None:
    seg, env = _job_env(tmp_path)
    try:
        exe = WORKLOAD.with_name("tgs-workload-linked") if resolve == "link" else WORKLOAD
        r = subprocess.run([str(exe), "--resolve", resolve, *extra, "--launch", launch,
                            "--iters", "5", "--warmup", "0", "--kernels", "3", "--kernel-us",
                            "100", "--gap-ms", "0"], env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        summary = json.loads(r.stdout.strip().splitlines()[-1])
        assert _launches(seg) == summary["kernels"] == 15
    finally:
        seg.close()


_TORCH_QUOTA = r"""
import torch
free, total = torch.cuda.mem_get_info()
assert total == 1 << 30, total
x = torch.empty(600 << 20, dtype=torch.uint8, device="cuda")
try:
    y = torch.empty(600 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("oom")
del x
torch.cuda.empty_cache()
y = torch.empty(600 << 20, dtype=torch.uint8, device="cuda")
print("recovered")
"""


def test_pytorch_quota(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    seg, env = _job_env(tmp_path, mem_quota=1 << 30)
    try:
        r = subprocess.run([sys.executable, "-c", _TORCH_QUOTA], env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.split() == ["oom", "recovered"]
    finally:
        seg.close()


_TORCH_GRAPH = r"""
import torch
s = torch.cuda.Stream()
x = torch.ones(1 << 20, device="cuda")
with torch.cuda.stream(s):
    for _ in range(3):
        x.mul_(1.0001)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(4):
        x.mul_(1.0001)
torch.cuda.synchronize()
print("ready", flush=True)
input()
for _ in range(10):
    g.replay()
torch.cuda.synchronize()
print("done", flush=True)
"""


def test_cuda_graph_replay_is_charged(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    seg, env = _job_env(tmp_path)
    try:
        p = subprocess.Popen([sys.executable, "-c", _TORCH_GRAPH], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert p.stdout is not None and p.stdin is not None
            assert p.stdout.readline().strip() == "ready"
            before = _launches(seg)
            p.stdin.write("\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "done"
            # 10 replays of a graph of (at least) 4 kernels
            assert _launches(seg) - before >= 40
        finally:
            p.kill()
            p.wait()
    finally:
        seg.close()
