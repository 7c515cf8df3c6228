"""A PyTorch inference server on synthetic requests: Poisson arrivals, one forward each.

    python -m tgs.bench.torch_infer [--seconds 10] [--rate 100] [--hidden 1024] [--batch 8]
                                    [--report-ms 0] [--seed 0]

Requests arrive as a Poisson process of --rate per second (exponential inter-arrival times
from --seed); each is served in arrival order by one forward pass of an MLP under
torch.inference_mode(), ended by copying the logits to the host (the reply), so a request's
latency is queueing + GPU time.  JSON lines like bench/torch_train.py: start, progress (every
--report-ms: requests done, it_per_s = requests/s), summary (lat_ms p50/p99 from arrival to
reply), or error with exit 1; exit 2 on bad arguments.  Needs PyTorch with a CUDA device: a
real GPU or the simulated driver.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import sys
import time
from typing import Any


def _emit(kind: str, name: str, **fields: Any) -> None:
    print(json.dumps({"type": kind, "name": name, **fields}), flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="PyTorch inference server, Poisson arrivals")
    ap.add_argument("--name", default="torch-infer")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=100.0, help="requests per second")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--report-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args(argv)
    if not (a.seconds > 0 and a.rate > 0 and math.isfinite(a.rate)) or min(
            a.hidden, a.layers, a.batch) < 1:
        ap.error("--seconds, --rate, --hidden, --layers, --batch must be positive")
    return a


def _quantile(s: list[float], p: float) -> float:
    return s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))] if s else 0.0


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        import torch
    except ImportError:
        _emit("error", a.name, error="PyTorch is not installed")
        return 1
    if not torch.cuda.is_available():
        _emit("error", a.name, error="PyTorch sees no CUDA device")
        return 1
    dev = torch.device("cuda", a.device)
    torch.manual_seed(0)
    layers: list[Any] = []
    for _ in range(a.layers - 1):
        layers += [torch.nn.Linear(a.hidden, a.hidden), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(a.hidden, 10)).to(dev).eval()
    x = torch.randn(a.batch, a.hidden, device=dev)

    def serve() -> None:
        with torch.inference_mode():
            model(x).cpu()         # the reply: waits for the GPU

    serve()                         # warm-up (cuBLAS handles, allocator)
    rng = random.Random(a.seed)
    _emit("start", a.name, pid=os.getpid(), device=a.device, torch=torch.__version__,
          config={"rate": a.rate, "hidden": a.hidden, "layers": a.layers, "batch": a.batch,
                  "seconds": a.seconds, "report_ms": a.report_ms, "seed": a.seed})
    lat: list[float] = []
    start = last = time.monotonic()
    arrival = start + rng.expovariate(a.rate)
    last_done = 0
    while not stop["now"] and arrival - start < a.seconds:
        now = time.monotonic()
        if now < arrival:
            time.sleep(arrival - now)
        serve()
        done = time.monotonic()
        lat.append((done - arrival) * 1000)
        arrival += rng.expovariate(a.rate)
        if a.report_ms > 0 and (done - last) * 1000 >= a.report_ms:
            _emit("progress", a.name, t_s=done - start, iters=len(lat), window_s=done - last,
                  window_iters=len(lat) - last_done,
                  it_per_s=(len(lat) - last_done) / (done - last), mono_s=done)
            last, last_done = done, len(lat)
    elapsed = time.monotonic() - start
    s = sorted(lat)
    _emit("summary", a.name, iters=len(lat), elapsed_s=elapsed,
          it_per_s=len(lat) / elapsed if elapsed > 0 else 0.0,
          lat_ms={"mean": sum(lat) / len(lat) if lat else 0.0, "p50": _quantile(s, 0.5),
                  "p99": _quantile(s, 0.99), "min": s[0] if s else 0.0,
                  "max": s[-1] if s else 0.0},
          interrupted=stop["now"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
