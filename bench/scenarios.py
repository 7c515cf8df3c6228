"""The evaluation scenarios (S1-S16; T1-T11 with PyTorch jobs: tgs.bench.torch_scenarios):
which jobs, when they start, how long they run.

A scenario is data: jobs with a role (production or opportunistic), a weight, a workload
(tgs-workload options, or a PyTorch program with its options: TorchJob) and a schedule
(start offset and duration in seconds from the run's start).  `build()` scales the schedule
(--quick) and gives the `tgs` policy a longer run where the budget allows (its law profiles
for 25 s first).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Union

from tgs.testbed.workload import WorkloadSpec

PRODUCTION = "production"
OPPORTUNISTIC = "opportunistic"
POLICIES = ("none", "static", "tgs", "adaptive")
DEFAULT_POLICY = "adaptive"
REPORT_MS = 50.0

# Production: 4 x 1 ms kernels, synchronize, 1.7 ms host gap: ~70 % GPU duty cycle.
PROD = WorkloadSpec(kernels=4, kernel_us=1000, gap_ms=1.7)
# Opportunistic: back-to-back 0.5 ms kernels, never leaves the GPU idle.
OPP = WorkloadSpec(kernels=10, kernel_us=500, gap_ms=0)
# S3: 4 x 0.5 ms kernels; light = 4 ms gap (~33 % duty), heavy = 0.85 ms gap (~70 %).
PHASED = WorkloadSpec(kernels=4, kernel_us=500, gap_ms=4)
LIGHT_GAP_MS, HEAVY_GAP_MS, PHASE_S = 4.0, 0.85, 5.0
# S5: two production jobs of ~35 % duty each.
PROD_HALF = WorkloadSpec(kernels=2, kernel_us=1000, gap_ms=3.7)
# S6: opportunistic kernels cost 4x more time per thread (same 0.5 ms per kernel).
OPP_COSTLY = WorkloadSpec(kernels=10, kernel_us=125, gap_ms=0, cost_factor=4)
# S7: run-ahead training: 4 x 1 ms kernels per iteration, 6 ms of host work per iteration
# (data loading, Python), synchronizing every 10 iterations (.item() / logging), at most 3
# iterations queued: the GPU idles ~2 ms of every 6 (~67 % duty) between synchronizes.
RUN_AHEAD = WorkloadSpec(kernels=4, kernel_us=1000, gap_ms=6, sync_every=10, ahead=3)
# S8: S1's production with its kernels dealt over 2 streams, each synchronized in turn.
MULTI_STREAM = WorkloadSpec(kernels=4, kernel_us=1000, gap_ms=1.7, streams=2)
# S9: CUDA graph replay: S1's production and the opportunistic job, each iteration one graph.
PROD_GRAPH = WorkloadSpec(kernels=4, kernel_us=1000, gap_ms=1.7, launch="graph", stream=True)
OPP_GRAPH = WorkloadSpec(kernels=10, kernel_us=500, gap_ms=0, launch="graph", stream=True)
# S10: kernel-duration mix (tgs-workload --kernel-mix: short kernels log-uniform 10-100 us, long
# ones uniform 5-20 ms, one sequence per seed): production 48 short + 1 long, 8 ms host gap;
# opportunistic 38 short + 2 long, no gap.
PROD_MIX = WorkloadSpec(kernels=49, kernel_mix=1, gap_ms=8, seed=1)
OPP_MIX = WorkloadSpec(kernels=40, kernel_mix=2, gap_ms=0, seed=2)
# S11: opportunistic kernels (5 ms) all longer than production's gaps (1.7 ms).
OPP_LONG = WorkloadSpec(kernels=4, kernel_us=5000, gap_ms=0)
# S12-S14: inference: requests of 3 x 0.4 ms kernels arriving as a Poisson process at 30, 60,
# 90 % of the server's capacity, next to the saturating training job.  A request costs its GPU
# time plus REQUEST_OVERHEAD_S of launches and synchronize (measured on the simulator: alone, a
# server of these requests saturates at ~706 requests/s, i.e. 1.42 ms each), so 90 % of the
# GPU's *time* would be over capacity; the load is of the server: 90 % = 634 requests/s
# (76 % of the GPU's time busy with its kernels).
REQUEST = WorkloadSpec(kernels=3, kernel_us=400, gap_ms=0, seed=11)
REQUEST_GPU_S = 3 * 400e-6
REQUEST_OVERHEAD_S = 0.22e-3
INFERENCE_LOADS = {"S12": 0.3, "S13": 0.6, "S14": 0.9}


TorchOpt = Union[bool, int, float, str]
TORCH_PROGRAMS = {"train": "torch_train.py", "infer": "torch_infer.py"}    # in bench/


@dataclass(frozen=True)
class TorchJob:
    """A PyTorch job program and its options, as data: ("gap_ms", 4.0) is `--gap-ms 4.0`,
    ("graph", True) the bare flag `--graph`.  The harness adds --name, --seconds and
    --report-ms (the job's own) and runs it with the frameworks venv's interpreter."""

    program: str = "train"                          # a key of TORCH_PROGRAMS
    options: tuple[tuple[str, TorchOpt], ...] = ()

    def __post_init__(self) -> None:
        if self.program not in TORCH_PROGRAMS:
            raise ValueError(f"unknown PyTorch program {self.program!r}")

    def get(self, name: str, default: TorchOpt | None = None) -> TorchOpt | None:
        return dict(self.options).get(name, default)

    def argv(self) -> list[str]:
        out: list[str] = []
        for name, value in self.options:
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                out += [flag] if value else []
            else:
                out += [flag, repr(value) if isinstance(value, float) else str(value)]
        return out


def torch_job(program: str = "train", **options: TorchOpt) -> TorchJob:
    return TorchJob(program, tuple(options.items()))


@dataclass
class JobDef:
    """One job of a scenario; start_s and seconds are offsets from the run's start."""

    name: str
    role: str
    spec: WorkloadSpec          # a PyTorch job uses only its name and report_ms
    start_s: float
    seconds: float
    weight: int = 1
    torch: TorchJob | None = None   # run this PyTorch program instead (real GPU or simulator)
    numba: bool = False         # run bench/numba_job.py (a numba-cuda program) instead
    iters: int | None = None    # a fixed amount of work (seconds is then its deadline)
    mem_quota: int | None = None    # registered quota (None: the harness's default)
    mem_total: int = 0              # oversubscription (docs/oversubscription.md); 0 = off
    mem_fixed: bool = False         # opportunistic memory in device memory (not evictable)

    @property
    def production(self) -> bool:
        return self.role == PRODUCTION


@dataclass
class Scenario:
    key: str
    title: str
    jobs: list[JobDef]
    reaction: str | None = None     # "phases" (S3) or "arrival" (S4): reaction time is measured
    phase_s: float = 0.0
    fairness: bool = False          # S2: weighted fairness among opportunistic jobs
    latency: bool = False           # S12-S14: production is a server: request latency tails
    notes: list[str] = field(default_factory=list)

    @property
    def production(self) -> list[JobDef]:
        return [j for j in self.jobs if j.production]

    @property
    def opportunistic(self) -> list[JobDef]:
        return [j for j in self.jobs if not j.production]

    @property
    def length_s(self) -> float:
        return max(j.start_s + j.seconds for j in self.jobs)


def _spec(base: WorkloadSpec, name: str, **over: object) -> WorkloadSpec:
    return dataclasses.replace(base, name=name, report_ms=REPORT_MS, **over)  # type: ignore


def _pair(key: str, title: str, prod: WorkloadSpec, opp: WorkloadSpec, prod_s: float,
          lead_s: float = 1.0, tail_s: float = 1.0) -> Scenario:
    """Opportunistic first, production joins lead_s later for prod_s, opportunistic ends tail_s
    after it (the measurement window is production's run)."""
    return Scenario(key, title, [
        JobDef("prod", PRODUCTION, _spec(prod, "prod"), lead_s, prod_s),
        JobDef("opp", OPPORTUNISTIC, _spec(opp, "opp"), 0.0, lead_s + prod_s + tail_s),
    ])


def s1(prod_s: float, lead: float = 1.0) -> Scenario:
    return _pair("S1", "production ~70 % duty + one saturating opportunistic job",
                 PROD, OPP, prod_s, lead, lead)


def s2(prod_s: float, lead: float = 1.0) -> Scenario:
    tail = lead
    jobs = [JobDef("prod", PRODUCTION, _spec(PROD, "prod"), lead, prod_s)]
    for name, w in (("opp-a", 1), ("opp-b", 1), ("opp-c", 2)):
        jobs.append(JobDef(name, OPPORTUNISTIC, _spec(OPP, name), 0.0, lead + prod_s + tail, w))
    return Scenario("S2", "production + three opportunistic jobs, weights 1, 1, 2", jobs,
                    fairness=True)


def s3(phase_s: float, cycles: int, lead: float = 1.0) -> Scenario:
    phases = [(LIGHT_GAP_MS, phase_s), (HEAVY_GAP_MS, phase_s)]
    prod_s = 2 * cycles * phase_s
    return Scenario("S3", f"production alternating light/heavy every {phase_s:g} s", [
        JobDef("prod", PRODUCTION, _spec(PHASED, "prod", phases=phases), lead, prod_s),
        JobDef("opp", OPPORTUNISTIC, _spec(OPP, "opp"), 0.0, lead + prod_s + lead),
    ], reaction="phases", phase_s=phase_s)


def s4(before_s: float, prod_s: float, after_s: float) -> Scenario:
    return Scenario("S4", "production arrives while opportunistic runs, then leaves", [
        JobDef("prod", PRODUCTION, _spec(PROD, "prod"), before_s, prod_s),
        JobDef("opp", OPPORTUNISTIC, _spec(OPP, "opp"), 0.0, before_s + prod_s + after_s),
    ], reaction="arrival")


def s5(prod_s: float, lead: float = 1.0) -> Scenario:
    return Scenario("S5", "two production jobs (~35 % duty each) + one opportunistic job", [
        JobDef("prod-a", PRODUCTION, _spec(PROD_HALF, "prod-a"), lead, prod_s),
        JobDef("prod-b", PRODUCTION, _spec(PROD_HALF, "prod-b"), lead, prod_s),
        JobDef("opp", OPPORTUNISTIC, _spec(OPP, "opp"), 0.0, lead + prod_s + lead),
    ], notes=["production is compared with both production jobs running together without "
              "the opportunistic job (the controller does not arbitrate between them)"])


def s6(prod_s: float, lead: float = 1.0) -> Scenario:
    return _pair("S6", "heterogeneous kernels: opportunistic 4x cost per thread",
                 PROD, OPP_COSTLY, prod_s, lead, lead)


def inference(key: str, prod_s: float, lead: float = 1.0) -> Scenario:
    load = INFERENCE_LOADS[key]
    rps = round(load / (REQUEST_GPU_S + REQUEST_OVERHEAD_S), 1)
    spec = dataclasses.replace(REQUEST, poisson_rps=rps)
    sc = _pair(key, f"inference at {load:.0%} of capacity ({rps:g} requests/s of 3 x 0.4 ms) "
               "+ saturating training", spec, OPP, prod_s, lead, lead)
    sc.latency = True
    return sc


SHAPES = {
    "S7": ("run-ahead training (sync every 10, 3 queued, ~67 % duty) + saturating", RUN_AHEAD,
           OPP),
    "S8": ("production on 2 streams (S1's shape) + saturating", MULTI_STREAM, OPP),
    "S9": ("CUDA graph replay, production and opportunistic (S1's shapes)", PROD_GRAPH,
           OPP_GRAPH),
    "S10": ("kernel-duration mix: 10-100 us kernels and a few of 5-20 ms, both jobs",
            PROD_MIX, OPP_MIX),
    "S11": ("opportunistic kernels (5 ms) longer than production's gaps (1.7 ms)", PROD,
            OPP_LONG),
}


# S15: a real third-party client as the opportunistic job: a numba-cuda program (@cuda.jit
# kernels launched from Python, bench/numba_job.py) with S1's opportunistic shape (10 x 0.5 ms
# kernels, no gap), next to S1's production.  It starts NUMBA_START_S before the usual lead:
# importing numba and JIT-compiling its kernel take ~1.5 s, done before its run starts.
NUMBA_OPP = WorkloadSpec(kernels=10, kernel_us=500, gap_ms=0)
NUMBA_PROD = WorkloadSpec(kernels=4, kernel_us=1000, gap_ms=1.7)      # S16: S1's production
NUMBA_START_S = 2.0


def s15(prod_s: float, lead: float = 1.0) -> Scenario:
    sc = _pair("S15", "a numba-cuda program as the saturating opportunistic job, S1's production",
               PROD, NUMBA_OPP, prod_s, lead + NUMBA_START_S, lead)
    sc.jobs = [dataclasses.replace(j, numba=True) if not j.production else j for j in sc.jobs]
    sc.notes.append("the opportunistic job is bench/numba_job.py under the shim; skipped when "
                    "numba-cuda is not installed")
    return sc


def s16(prod_s: float, lead: float = 1.0) -> Scenario:
    """S15 the other way round: S1's production shape as a numba-cuda program (4 x 1 ms
    kernels, synchronize, 1.7 ms gap) next to S1's saturating tgs-workload job; the
    opportunistic job outlasts production's numba start-up."""
    sc = _pair("S16", "a numba-cuda program as production (S1's shape) + saturating",
               NUMBA_PROD, OPP, prod_s, lead, lead + NUMBA_START_S)
    sc.jobs = [dataclasses.replace(j, numba=True) if j.production else j for j in sc.jobs]
    sc.notes.append("production is bench/numba_job.py under the shim; skipped when numba-cuda "
                    "is not installed")
    return sc


def needs_numba(sc: Scenario) -> bool:
    return any(j.numba for j in sc.jobs)


@dataclass(frozen=True)
class Budget:
    """Durations (s) of one suite: --quick shrinks them."""

    prod_s: float = 10.0
    tgs_prod_s: float = 20.0     # `tgs` (not S3/S4): profiling + slow start take ~12-15 s
    shape_s: float = 8.0         # S7-S14
    phase_s: float = PHASE_S
    cycles: int = 2
    s4: tuple[float, float, float] = (3.0, 8.0, 4.0)
    solo_s: float = 6.0
    lead_s: float = 1.0          # opportunistic alone before production joins, and after
    oversub_scale: float = 1.0   # OV1's schedule (tgs.bench.oversub.plan)


QUICK = Budget(prod_s=1.5, tgs_prod_s=1.5, shape_s=1.5, phase_s=1.0, cycles=1,
               s4=(1.0, 2.0, 1.5), solo_s=1.5, lead_s=0.5, oversub_scale=0.25)
FULL = Budget()
KEYS = ("S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "S10", "S11", "S12", "S13",
        "S14", "S15")
OV_KEYS = ("OV1",)           # memory oversubscription: tgs.bench.oversub runs them
ALL_KEYS = KEYS + OV_KEYS    # the default (full) suite
# --quick runs these (S15 left out: its numba start-up would push --quick past 5 minutes; run it
# alone with --scenario S15 --quick)
QUICK_KEYS = tuple(k for k in ALL_KEYS if k != "S15")
# selectable with --scenario, not in the default suite (its 20 minutes are spent): S16, and
# the PyTorch scenarios (tgs.bench.torch_scenarios: each run pays PyTorch's start-up)
TORCH_KEYS = ("T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9", "T10", "T11")
EXTRA_KEYS = ("S16",) + TORCH_KEYS


def build(key: str, budget: Budget, policy: str | None) -> Scenario:
    """Scenario `key` for one policy (None: the solo baselines)."""
    long_tgs = policy == "tgs" and key not in ("S3", "S4")
    prod_s = budget.tgs_prod_s if long_tgs else budget.prod_s
    shape_s = max(budget.shape_s, prod_s) if long_tgs else budget.shape_s
    if key in TORCH_KEYS:
        from tgs.bench import torch_scenarios  # it imports this module
        return torch_scenarios.build(key, shape_s, budget.lead_s)
    if key in SHAPES:
        title, prod, opp = SHAPES[key]
        return _pair(key, title, prod, opp, shape_s, budget.lead_s, budget.lead_s)
    if key in INFERENCE_LOADS:
        return inference(key, shape_s, budget.lead_s)
    if key == "S15":
        return s15(prod_s, budget.lead_s)
    if key == "S16":
        return s16(prod_s, budget.lead_s)
    if key == "S1":
        return s1(prod_s, budget.lead_s)
    if key == "S2":
        return s2(prod_s, budget.lead_s)
    if key == "S3":
        return s3(budget.phase_s, budget.cycles, budget.lead_s)
    if key == "S4":
        return s4(*budget.s4)
    if key == "S5":
        return s5(prod_s, budget.lead_s)
    if key == "S6":
        return s6(prod_s, budget.lead_s)
    raise ValueError(f"unknown scenario {key!r} (known: {', '.join(ALL_KEYS + EXTRA_KEYS)})")


def torch_like(job: JobDef) -> TorchJob:
    """--torch: the training loop with the job's host gap (and phases); an opportunistic job a
    heavier, saturating MLP."""
    spec = job.spec
    opts: dict[str, TorchOpt] = {"gap_ms": float(spec.gap_ms)}
    if spec.phases:
        opts["phases"] = ",".join(f"{g!r}:{s!r}" for g, s in spec.phases)
    if not job.production:
        opts["hidden"] = 4096
    return torch_job("train", **opts)


def use_torch(sc: Scenario) -> Scenario:
    """The same schedule with the PyTorch training loop as every job (PyTorch jobs as they
    are)."""
    return dataclasses.replace(sc, jobs=[
        j if j.torch else dataclasses.replace(j, torch=torch_like(j), numba=False)
        for j in sc.jobs])


def needs_torch(sc: Scenario) -> bool:
    return any(j.torch for j in sc.jobs)


# per run: controller and job start-up, margins (measured ~1.2 s; the quick suite's measured
# wall time, docs/benchmarks.md, puts it nearer 0.7 s)
RUN_OVERHEAD_S = 1.2
# per group of PyTorch jobs with one start time: importing torch and warming up, before the
# run's clock starts (the harness warms the groups up one after the other; ~5 s on 2 cores)
TORCH_START_S = 5.0


def torch_start_s(jobs: list[JobDef]) -> float:
    return TORCH_START_S * len({j.start_s for j in jobs if j.torch})


def estimate_s(budget: Budget, keys: list[str] | tuple[str, ...] | None = None,
               policies: list[str] | tuple[str, ...] = POLICIES) -> float:
    """The suite's expected wall time: every scenario run plus its solo baselines (identical
    jobs share one), each with RUN_OVERHEAD_S (and a numba job's start-up); the plan, not a
    measurement.  keys: None = what the suite runs for this budget (QUICK_KEYS for QUICK)."""
    if keys is None:
        keys = QUICK_KEYS if budget == QUICK else ALL_KEYS
    total, solos = 0.0, set()
    for key in keys:
        if key in OV_KEYS:          # its own memory policies, whatever `policies` says
            from tgs.bench import oversub
            total += oversub.estimate_s(budget, RUN_OVERHEAD_S)
            continue
        base = build(key, budget, None)
        for pol in policies:
            sc = build(key, budget, pol)
            total += sc.length_s + RUN_OVERHEAD_S + torch_start_s(sc.jobs)
        for j in base.jobs:
            seconds = j.seconds if j.spec.phases else min(j.seconds, budget.solo_s)
            solo = (tuple(dataclasses.replace(j.spec, name="solo").argv()), seconds, j.numba,
                    j.torch)
            if solo not in solos:
                solos.add(solo)
                total += seconds + RUN_OVERHEAD_S + (NUMBA_START_S if j.numba else 0.0) \
                    + (TORCH_START_S if j.torch else 0.0)
        if len(base.production) > 1:
            total += max(j.seconds for j in base.production) + RUN_OVERHEAD_S
    return total
