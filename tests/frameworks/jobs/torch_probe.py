"""Real PyTorch, one check per subcommand; the last stdout line is a JSON result.

    python torch_probe.py basics|quota|events|graph|nvml|compile|hold|share|multigpu

Runs on whatever libcuda.so.1 the loader finds (the simulated driver in CI, through the shim
under tgs-run).  The simulated GPU's kernels take time but compute nothing, so data checks use
bytes that only copies move (host -> device -> host round trips are exact there and on a GPU).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import torch

MiB = 1 << 20


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _mlp(width: int = 256) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    m = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.ReLU(),
                            torch.nn.Linear(2 * width, 10)).cuda()
    return m, torch.optim.Adam(m.parameters(), lr=1e-3, capturable=True)


def _step(m: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
          y: torch.Tensor) -> torch.Tensor:
    opt.zero_grad(set_to_none=False)
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss


def basics() -> dict[str, Any]:
    host = torch.arange(4096, dtype=torch.float32)
    back = host.cuda().cpu()
    a = torch.randn(512, 512, device="cuda")
    c = a @ a                                                  # cuBLAS(Lt)
    conv = torch.nn.Conv2d(3, 8, 3).cuda()
    y = conv(torch.randn(2, 3, 32, 32, device="cuda"))          # cuDNN
    m, opt = _mlp()
    x, t = torch.randn(64, 256, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
    for _ in range(3):
        _step(m, opt, x, t)
    torch.cuda.synchronize()
    return {"available": torch.cuda.is_available(), "count": torch.cuda.device_count(),
            "name": torch.cuda.get_device_name(0), "roundtrip": bool(torch.equal(host, back)),
            "mm": list(c.shape), "conv": list(y.shape), "cudnn": torch.backends.cudnn.version(),
            "trained": True}


def quota() -> dict[str, Any]:
    free, total = torch.cuda.mem_get_info()
    held, oom = [], None
    try:
        while len(held) < 4096:
            held.append(torch.empty(8 * MiB, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError as exc:
        oom = str(exc).splitlines()[0][:200]
    got = len(held) * 8 * MiB
    held.clear()
    torch.cuda.empty_cache()
    again = torch.empty(got // 2, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    return {"free": free, "total": total, "allocated_before_oom": got, "oom": oom,
            "recovered": again.numel() == got // 2,
            "backend": torch.cuda.memory.get_allocator_backend()}


def events() -> dict[str, Any]:
    m, opt = _mlp()
    x, t = torch.randn(64, 256, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    steps = int(os.environ.get("PROBE_STEPS", "60"))
    side = torch.cuda.Stream()
    start.record()
    for _ in range(steps):
        e = torch.cuda.Event(enable_timing=True)
        _step(m, opt, x, t)
        e.record()
        with torch.cuda.stream(side):                   # work on a second stream, ordered
            side.wait_event(e)
            torch.ones(16, device="cuda")
    end.record()
    torch.cuda.synchronize()
    return {"elapsed_ms": start.elapsed_time(end), "steps": steps}


def graph() -> dict[str, Any]:
    m, opt = _mlp()
    x, t = torch.randn(64, 256, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            _step(m, opt, x, t)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=False)
    with torch.cuda.graph(g):
        _step(m, opt, x, t)
    replays = int(os.environ.get("PROBE_REPLAYS", "20"))
    t0 = time.monotonic()
    for _ in range(replays):
        g.replay()
    torch.cuda.synchronize()
    return {"replays": replays, "replay_s": time.monotonic() - t0}


def nvml() -> dict[str, Any]:
    import pynvml
    held = torch.empty(32 * MiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    info = pynvml.nvmlDeviceGetMemoryInfo(h)
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    listing = torch.cuda.list_gpu_processes(0)
    del held
    return {"total": info.total, "used": info.used,
            "pids": [p.pid for p in procs], "mine": os.getpid(),
            "my_used": sum(p.usedGpuMemory or 0 for p in procs if p.pid == os.getpid()),
            "listing": listing}


def compile_() -> dict[str, Any]:
    @torch.compile
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a * b + 1.0).sum(dim=-1)

    out = f(torch.randn(64, 128, device="cuda"), torch.randn(64, 128, device="cuda"))
    torch.cuda.synchronize()
    return {"shape": list(out.shape)}


def hold() -> dict[str, Any]:
    """Hold PROBE_MIB of tensors with known bytes; on each stdin line, check them and answer."""
    mib = int(os.environ.get("PROBE_MIB", "256"))
    pattern = torch.arange(MiB // 4, dtype=torch.int32)
    held = [(pattern + i).cuda() for i in range(mib)]
    torch.cuda.synchronize()
    _emit(ready=True, mib=mib)
    for line in sys.stdin:
        if line.strip() == "check":
            ok = all(torch.equal(t.cpu(), pattern + i) for i, t in enumerate(held))
            _emit(intact=ok)
        elif line.strip() == "work":
            for t in held[:8]:
                t.add_(0)
            torch.cuda.synchronize()
            _emit(worked=True)
    return {"done": True}


def _share_worker(rank: int, step_mib: int, q: Any) -> None:
    held = []
    try:
        while True:
            held.append(torch.empty(step_mib * MiB, dtype=torch.uint8, device="cuda"))
            if len(held) >= 4096:
                break
    except torch.OutOfMemoryError:
        pass
    q.put((rank, len(held) * step_mib))
    time.sleep(1.0)                   # hold until both reported


def share() -> dict[str, Any]:
    """Two torch.multiprocessing workers of one job fill the GPU together."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_share_worker, args=(r, 4, q)) for r in range(2)]
    for p in procs:
        p.start()
    got = dict(q.get(timeout=90) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    return {"mib": [got[0], got[1]], "exitcodes": [p.exitcode for p in procs]}


def _gpu_worker(dev: int, q: Any) -> None:
    torch.cuda.set_device(dev)
    free, total = torch.cuda.mem_get_info(dev)
    x = torch.randn(256, 256, device=f"cuda:{dev}")
    (x @ x).sum().item()
    q.put((dev, free, total, str(torch.cuda.get_device_properties(dev).uuid)))


def multigpu() -> dict[str, Any]:
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    n = torch.cuda.device_count()
    procs = [ctx.Process(target=_gpu_worker, args=(d, q)) for d in range(n)]
    for p in procs:
        p.start()
    got = sorted(q.get(timeout=90) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    return {"count": n, "per_gpu": [list(g) for g in got],
            "exitcodes": [p.exitcode for p in procs]}


CHECKS = {"basics": basics, "quota": quota, "events": events, "graph": graph, "nvml": nvml,
          "compile": compile_, "hold": hold, "share": share, "multigpu": multigpu}

if __name__ == "__main__":
    try:
        _emit(**CHECKS[sys.argv[1]]())
    except Exception as exc:  # noqa: BLE001 - the test reads the error from the JSON line
        _emit(error=f"{type(exc).__name__}: {exc}"[:2000])
        sys.exit(1)
