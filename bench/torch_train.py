"""A small PyTorch training loop on synthetic data, reporting like tgs-workload.

    python -m tgs.bench.torch_train [--seconds 10] [--hidden 1024] [--gap-ms 2] [--report-ms 50]
                                    [--sync-every N] [--optim sgd|adam] [--graph]
                                    [--duty ON_S:OFF_S] [--step-times] [--go-signal]

A few-layer MLP trained on one fixed random batch (no data loading: a host gap of --gap-ms
after each step stands in for it; --phases G:S,... cycles gaps like the workload's).  With
--sync-every 1 (the default) each step ends by reading the loss, which synchronizes; with N > 1
the loop runs ahead and reads the loss every N steps, as real training loops that log every N
steps do.  --graph captures one whole step (forward, backward, optimizer) as a CUDA graph and
replays it: one long launch per step.  Prints JSON lines: start, progress (every --report-ms),
summary (it_per_s, lat_ms p50/p99), or error with exit 1; exit 2 on bad arguments.  With
--go-signal the run starts on SIGUSR1 after a `ready` line (tgs-bench's harness).  Needs
PyTorch with a CUDA device: a real GPU, or the simulated driver (build/sim on LD_LIBRARY_PATH).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from typing import Any

if __package__:
    from .job_report import Progress, arm_go, emit, wait_go
    from .torch_setup import mlp, open_device
else:   # run as a script by a framework's own interpreter: bench/ is on sys.path
    from job_report import Progress, arm_go, emit, wait_go  # type: ignore[no-redef]
    from torch_setup import mlp, open_device  # type: ignore[no-redef]


def _phases(text: str | None) -> list[tuple[float, float]]:
    if not text:
        return []
    out = []
    for part in text.split(","):
        gap, _, sec = part.partition(":")
        g, s = float(gap), float(sec)
        if not (math.isfinite(g) and math.isfinite(s)) or g < 0 or s <= 0:
            raise ValueError(part)
        out.append((g, s))
    return out


def _gap_at(phases: list[tuple[float, float]], gap_ms: float, t: float) -> float:
    if not phases:
        return gap_ms
    t %= sum(s for _, s in phases)
    for g, s in phases:
        if t < s:
            return g
        t -= s
    return phases[-1][0]


def _duty(text: str | None) -> tuple[float, float]:
    if text is None:
        return math.inf, 0.0
    on, sep, off = text.partition(":")
    a, b = float(on), float(off) if sep else math.nan
    if not (math.isfinite(a) and math.isfinite(b)) or a <= 0 or b <= 0:
        raise ValueError(text)
    return a, b


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="PyTorch MLP training loop on synthetic data")
    ap.add_argument("--name", default="torch")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--gap-ms", type=float, default=2.0)
    ap.add_argument("--phases", default=None, help="GAP_MS:SECONDS[,...], cycled")
    ap.add_argument("--report-ms", type=float, default=0.0)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--go-signal", action="store_true",
                    help="after the warm-up print `ready` and wait for SIGUSR1 to start")
    ap.add_argument("--sync-every", type=int, default=1, help="read the loss every N steps")
    ap.add_argument("--optim", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--graph", action="store_true", help="replay the step as a CUDA graph")
    ap.add_argument("--duty", default=None, metavar="ON_S:OFF_S",
                    help="run ON_S, then synchronize and pause OFF_S (a `pause` line each), "
                         "cycled: the paired scenarios' opportunistic job")
    ap.add_argument("--step-times", action="store_true",
                    help="each step's end time and length in the summary (`steps`)")
    a = ap.parse_args(argv)
    try:
        a.duty_on, a.duty_off = _duty(a.duty)
    except ValueError:
        ap.error(f"--duty: expected ON_S:OFF_S, two positive seconds, got {a.duty!r}")
    try:
        a.phase_list = _phases(a.phases)
    except ValueError as exc:
        ap.error(f"--phases: bad phase {exc}")
    if a.seconds <= 0 or a.batch < 1 or a.hidden < 1 or a.layers < 1 or a.gap_ms < 0 or \
            a.sync_every < 1:
        ap.error("--seconds, --batch, --hidden, --layers, --sync-every must be positive, "
                 "--gap-ms >= 0")
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
    model = mlp(torch, a.hidden, a.layers, dev)
    width = a.hidden
    opt = (torch.optim.Adam(model.parameters(), lr=1e-3, capturable=a.graph)
           if a.optim == "adam" else torch.optim.SGD(model.parameters(), lr=1e-3))
    x = torch.randn(a.batch, width, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()

    def eager() -> Any:
        opt.zero_grad(set_to_none=not a.graph)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    run = eager
    if a.graph:     # warm up on a side stream, then capture one whole step
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(3):
                eager()
        torch.cuda.current_stream(dev).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = eager()

        def run() -> Any:
            graph.replay()
            return static_loss

    n_steps = 0

    def step() -> float:
        nonlocal n_steps
        loss = run()
        n_steps += 1
        if n_steps % a.sync_every:
            return math.nan
        return float(loss)      # reads the loss: waits for the GPU

    for _ in range(2):
        step()  # warm-up (cuBLAS handles, allocator)
    torch.cuda.synchronize(dev)
    if a.go_signal:
        wait_go(a.name, stop)
    emit("start", a.name, pid=os.getpid(), device=a.device,
         device_name=torch.cuda.get_device_name(dev), torch=torch.__version__,
         config={"batch": a.batch, "hidden": a.hidden, "layers": a.layers,
                 "gap_ms": a.gap_ms, "seconds": a.seconds, "report_ms": a.report_ms,
                 "sync_every": a.sync_every, "optim": a.optim, "graph": a.graph,
                 "duty": a.duty, "step_times": a.step_times})
    start = time.monotonic()
    run_lat = Progress(a.name, a.report_ms, start, a.step_times)
    loss = math.nan
    on_since = start
    while not stop["now"] and time.monotonic() - start < a.seconds:
        t0 = time.monotonic()
        if t0 - on_since >= a.duty_on:          # --duty: idle, its queue drained
            torch.cuda.synchronize(dev)
            paused = time.monotonic()
            time.sleep(max(0.0, min(a.duty_off, start + a.seconds - paused)))
            on_since = time.monotonic()
            emit("pause", a.name, from_s=paused, to_s=on_since)
            continue
        v = step()
        loss = v if not math.isnan(v) else loss
        gap = _gap_at(a.phase_list, a.gap_ms, t0 - start)
        if gap > 0:
            time.sleep(gap / 1000)
        now = time.monotonic()
        run_lat.step(now, (now - t0) * 1000)
    torch.cuda.synchronize(dev)
    run_lat.summary(time.monotonic() - start, loss=loss, interrupted=stop["now"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
