"""The PyTorch scenarios T1-T11: every job a real PyTorch program (bench/torch_train.py or
bench/torch_infer.py) run by the frameworks venv's interpreter (make frameworks), on the
simulator or a real GPU.  Selected by name only (tgs-bench --scenario T1 ...), never in the
default suite: each run pays PyTorch's import and warm-up (3-6 s on a 2-core machine) before
its clock starts, and a suite without the venv would skip them anyway.

Shapes (the GPU times are measured on the simulator, whose kernels take threads x 1 ns:
python -m tgs.bench.torch_calibrate, docs/benchmarks.md "PyTorch scenarios (T1-T11)"):
- T1: production = a 4-layer MLP trained with Adam, synchronizing every step (it reads the
  loss), 4 ms host gap; PROD_HIDDEN makes its GPU time ~3 ms a step.  Opportunistic = a
  saturating SGD MLP of width 4096, no gap.
- T2: T1 with production running ahead: it reads the loss every 10 steps.
- T3: T1's production next to an opportunistic job that replays one CUDA graph per step
  (forward, backward, SGD) of ~8 ms: every launch longer than production's gaps.
- T4-T6: production = an inference server (one forward per request, Poisson arrivals) at 30,
  60, 90 % of its measured capacity, next to T1's opportunistic job: request latency tails.
- T7, T8: T1 and T2 paired: the opportunistic job pauses every other second, and production's
  steps beside it and alone in the same run give its p99 ratio (bench/paired.py).
- T9, T10, T11: T4, T5, T6 paired alike: the server's requests beside the training job and
  while it pauses, in the same run.
"""

from __future__ import annotations

from tgs.bench.scenarios import (
    OPPORTUNISTIC,
    PRODUCTION,
    REPORT_MS,
    TORCH_KEYS,
    JobDef,
    Scenario,
    TorchJob,
    TorchOpt,
    torch_job,
)
from tgs.testbed.workload import WorkloadSpec

KEYS = TORCH_KEYS

# production's width: ~3 ms of GPU time per Adam step at batch 512 (simulator: 1024 -> 1.1 ms,
# 2048 -> 2.2 ms, 2560 -> 3.0 ms, 3072 -> 3.8 ms)
PROD_HIDDEN = 2560
PROD_GAP_MS = 4.0
PROD_TRAIN = torch_job("train", optim="adam", hidden=PROD_HIDDEN, gap_ms=PROD_GAP_MS)
PROD_AHEAD = torch_job("train", optim="adam", hidden=PROD_HIDDEN, gap_ms=PROD_GAP_MS,
                       sync_every=10)
OPP_TRAIN = torch_job("train", hidden=4096, gap_ms=0.0)
# one graph replay per step of ~8 ms (simulator, batch 512: width 2816 -> 8.3 ms, 3072 ->
# 9.4 ms; a captured step costs more than an eager one, 15.2 against 2.9 ms at 4096: it
# zero-fills the gradients instead of dropping them, which may not be all of it)
OPP_GRAPH = torch_job("train", graph=True, hidden=2816, batch=512, gap_ms=0.0)

# the server: a request is one forward of a batch of INFER_BATCH through a 4-layer MLP of
# INFER_HIDDEN, ~2.1 ms of GPU time on the simulator, so the GPU, not the host's Python,
# bounds it (a batch of 64 costs 0.44 ms and the server is CPU-bound); alone it serves at most
# INFER_CAPACITY_RPS (measured with a saturating arrival rate: 398-422 requests/s on a loaded
# 2-core machine; the low end, so that 90 % stays under capacity when the machine is busy)
INFER_HIDDEN, INFER_BATCH = 2048, 2048
INFER_CAPACITY_RPS = 400.0
INFERENCE_LOADS = {"T4": 0.3, "T5": 0.6, "T6": 0.9}
INFER_SEED = 7


def infer_job(load: float) -> TorchJob:
    return torch_job("infer", hidden=INFER_HIDDEN, batch=INFER_BATCH,
                     rate=round(load * INFER_CAPACITY_RPS, 1), seed=INFER_SEED)


TRAINING = {
    "T1": ("PyTorch: Adam MLP syncing every step (~3 ms GPU, 4 ms gap) + saturating training",
           PROD_TRAIN, OPP_TRAIN),
    "T2": ("PyTorch: T1's production running ahead (loss read every 10 steps) + saturating",
           PROD_AHEAD, OPP_TRAIN),
    "T3": ("PyTorch: T1's production + a job replaying one ~8 ms CUDA graph per step",
           PROD_TRAIN, OPP_GRAPH),
}


# T7-T11: T1, T2 and T4-T6 paired: the opportunistic job alternates 1 s of work with 1 s of
# pause and production records every step (the server: every request), so its steps beside
# the opportunistic job and alone come from the same run (bench/paired.py); twice the
# unpaired length, for as many steps in each half
DUTY = "1:1"
PAIRED = {
    "T7": ("PyTorch: T1 paired (opportunistic 1 s on, 1 s paused): production's p99 on/off",
           "T1"),
    "T8": ("PyTorch: T2 paired (opportunistic 1 s on, 1 s paused): production's p99 on/off",
           "T2"),
    "T9": ("PyTorch: T4 paired (training 1 s on, 1 s paused): the server's p99 on/off at 30 %",
           "T4"),
    "T10": ("PyTorch: T5 paired (training 1 s on, 1 s paused): the server's p99 on/off at 60 %",
            "T5"),
    "T11": ("PyTorch: T6 paired (training 1 s on, 1 s paused): the server's p99 on/off at 90 %",
            "T6"),
}


def _with(job: TorchJob, **options: TorchOpt) -> TorchJob:
    return TorchJob(job.program, job.options + tuple(options.items()))


def _job(name: str, role: str, torch: TorchJob, start_s: float, seconds: float) -> JobDef:
    spec = WorkloadSpec(name=name, report_ms=REPORT_MS)     # only its reporting counts
    return JobDef(name, role, spec, start_s, seconds, torch=torch)


def pair(key: str, title: str, prod: TorchJob, opp: TorchJob, prod_s: float,
         lead_s: float) -> Scenario:
    """As the S pairs: opportunistic first, production lead_s later for prod_s, opportunistic
    until lead_s after it (the measurement window is production's run)."""
    return Scenario(key, title, [_job("prod", PRODUCTION, prod, lead_s, prod_s),
                                 _job("opp", OPPORTUNISTIC, opp, 0.0, 2 * lead_s + prod_s)],
                    notes=["every job is a PyTorch program (the frameworks venv's "
                           "interpreter); skipped when PyTorch is not installed there"])


def build(key: str, prod_s: float, lead_s: float) -> Scenario:
    if key in TRAINING:
        title, prod, opp = TRAINING[key]
        return pair(key, title, prod, opp, prod_s, lead_s)
    if key in PAIRED:
        title, like = PAIRED[key]
        base = build(like, prod_s, lead_s)
        (prod,), (opp,) = base.production, base.opportunistic
        assert prod.torch is not None and opp.torch is not None
        sc = pair(key, title, _with(prod.torch, step_times=True), _with(opp.torch, duty=DUTY),
                  2 * prod_s, lead_s)
        sc.latency = base.latency
        return sc
    if key in INFERENCE_LOADS:
        load = INFERENCE_LOADS[key]
        job = infer_job(load)
        sc = pair(key, f"PyTorch: inference server at {load:.0%} of capacity "
                  f"({job.get('rate')} requests/s) + saturating training", job, OPP_TRAIN,
                  prod_s, lead_s)
        sc.latency = True
        return sc
    raise ValueError(f"unknown PyTorch scenario {key!r} (known: {', '.join(KEYS)})")
