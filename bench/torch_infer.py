"""A PyTorch inference server on synthetic requests: Poisson arrivals, one forward each.

    python -m tgs.bench.torch_infer [--seconds 10] [--rate 100] [--hidden 1024] [--batch 8]
                                    [--report-ms 0] [--seed 0] [--step-times] [--go-signal]

Requests arrive as a Poisson process of --rate per second (exponential inter-arrival times
from --seed); each is served in arrival order by one forward pass of an MLP under
torch.inference_mode(), ended by copying the logits to the host (the reply), so a request's
latency is queueing + GPU time.  JSON lines like bench/torch_train.py: start, progress (every
--report-ms: requests done, it_per_s = requests/s), summary (lat_ms p50/p99 from arrival to
reply; with --step-times each request's [reply time, latency ms] in `steps`, for the paired
scenarios), or error with exit 1; exit 2 on bad arguments; --go-signal as bench/torch_train.py.
Needs PyTorch with a CUDA device: a real GPU or the simulated driver.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import sys
import time

if __package__:
    from .job_report import Progress, arm_go, emit, wait_go
    from .torch_setup import mlp, open_device
else:   # run as a script by a framework's own interpreter: bench/ is on sys.path
    from job_report import Progress, arm_go, emit, wait_go  # type: ignore[no-redef]
    from torch_setup import mlp, open_device  # type: ignore[no-redef]


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
    ap.add_argument("--go-signal", action="store_true",
                    help="after the warm-up print `ready` and wait for SIGUSR1 to start")
    ap.add_argument("--step-times", action="store_true",
                    help="each request's reply time and latency in the summary (`steps`)")
    a = ap.parse_args(argv)
    if not (a.seconds > 0 and a.rate > 0 and math.isfinite(a.rate)) or min(
            a.hidden, a.layers, a.batch) < 1:
        ap.error("--seconds, --rate, --hidden, --layers, --batch must be positive")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    if a.go_signal:
        arm_go()
    opened = open_device(a.name, a.device)
    if opened is None:
        return 1
    torch, dev = opened
    model = mlp(torch, a.hidden, a.layers, dev).eval()
    x = torch.randn(a.batch, a.hidden, device=dev)

    def serve() -> None:
        with torch.inference_mode():
            model(x).cpu()         # the reply: waits for the GPU

    serve()                         # warm-up (cuBLAS handles, allocator)
    if a.go_signal:
        wait_go(a.name, stop)
    rng = random.Random(a.seed)
    emit("start", a.name, pid=os.getpid(), device=a.device, torch=torch.__version__,
         config={"rate": a.rate, "hidden": a.hidden, "layers": a.layers, "batch": a.batch,
                 "seconds": a.seconds, "report_ms": a.report_ms, "seed": a.seed,
                 "step_times": a.step_times})
    start = time.monotonic()
    run = Progress(a.name, a.report_ms, start, a.step_times)
    arrival = start + rng.expovariate(a.rate)
    while not stop["now"] and arrival - start < a.seconds:
        now = time.monotonic()
        if now < arrival:
            time.sleep(arrival - now)
        serve()
        done = time.monotonic()
        run.step(done, (done - arrival) * 1000)     # from arrival to reply
        arrival += rng.expovariate(a.rate)
    run.summary(time.monotonic() - start, interrupted=stop["now"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
