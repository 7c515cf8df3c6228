"""OV1: memory oversubscription with production priority, three ways side by side in one run
(docs/oversubscription.md, docs/benchmarks.md "Memory oversubscription").

An opportunistic job holds OPP_FRAC of the GPU's memory and runs its kernels throughout;
production starts `lead_s` later, ramps its memory to PROD_FRAC of the GPU one STEP_FRAC
allocation every `step_s` (tgs-workload --ramp-every-ms), runs kernels on it, holds it for
`hold_s`, frees it (--free-at-s, after checking its contents) and ends; the opportunistic job
runs `after_s` more, then checks its own data (--verify).  Memory policies:
  none: both jobs' memory is device memory, the opportunistic job under a hard quota: whoever
        allocates past the GPU's capacity gets CUDA_ERROR_OUT_OF_MEMORY;
  tgs:  the published TGS behaviour (as bench/oversub_sim.py modelled it): both jobs' memory is
        managed, production's advised to prefer the GPU (tgs-workload --managed,
        --prefer-device: the program does what TGS's shim would do for it);
  ours: the opportunistic job registered with --mem-total (the shim turns its allocations into
        managed memory), production's memory plain device memory.
Every run is under the controller with the default compute policy (adaptive), so only memory
differs; production's solo baseline (the same ramp alone, no controller) runs in the same
invocation.  On the simulator the GPU has SIM_MEM of memory and the bus is scaled by the same
factor (SIM_PCIE_GBPS): every migration takes as long as on a 16 GiB GPU at 25 GB/s, while the
host memory the simulator really touches stays small.  On a real GPU (`--gpu real`, not run yet)
the fractions apply to device 0's memory, each iteration also reads its memory (TOUCH_REAL), and
memory by process comes from NVML (device bytes only: where managed pages are is sim-only).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tgs.bench import oversub_metrics as OM
from tgs.bench.harness import RunRecord, run_jobs, save_run
from tgs.bench.oversub_mem import device_total
from tgs.bench.report import json_safe
from tgs.bench.scenarios import DEFAULT_POLICY, OPPORTUNISTIC, PRODUCTION, Budget, JobDef
from tgs.testbed.workload import WorkloadSpec

KEYS = ("OV1",)
TITLE = "memory oversubscription: production ramps to 70 % while an opportunistic job holds 60 %"
MEM_POLICIES = ("none", "tgs", "ours")
COMPUTE_POLICY = DEFAULT_POLICY
GiB = 1 << 30
SIM_MEM = 1 * GiB
SIM_PCIE_GBPS = 25.0 * SIM_MEM / (16 * GiB)
OPP_FRAC, PROD_FRAC, STEP_FRAC = 0.6, 0.7, 0.1
OPP_QUOTA_FRAC = 0.65        # the opportunistic job's quota (`none`, `tgs`) / resident budget
ALIGN = 2 << 20
# On a real GPU every iteration also reads one word per 64 KiB of each job's memory
# (tgs-workload --touch): the spin kernels read nothing, and an evicted footprint that is never
# read costs nothing.  The simulator charges every kernel for all its process's non-resident
# managed memory already: no --touch there.
TOUCH_REAL = "64KiB"


@dataclass(frozen=True)
class OvPlan:
    """OV1's schedule (seconds) for one budget; `scale` shrinks it for --quick."""

    scale: float = 1.0
    lead_s: float = 2.0          # the opportunistic job alone before production starts
    step_s: float = 0.5          # production's allocation interval
    hold_s: float = 3.0          # production at its peak before it frees
    tail_s: float = 0.05         # production's loop after freeing (it ends: recovery starts)
    after_s: float = 4.0         # the opportunistic job runs on after production ended

    @property
    def steps(self) -> int:
        return round(PROD_FRAC / STEP_FRAC)

    @property
    def free_at_s(self) -> float:
        """Production's free, from its loop's start: its last step, then the hold."""
        return (self.steps - 1) * self.step_s + self.hold_s

    @property
    def prod_s(self) -> float:
        return self.free_at_s + self.tail_s

    @property
    def opp_s(self) -> float:
        return self.lead_s + self.prod_s + self.after_s


def plan(budget: Budget) -> OvPlan:
    s = budget.oversub_scale
    # the opportunistic job's set-up (filling 60 % of the GPU, its first kernel bringing it to
    # the device: ~0.4 s at the scaled bus) must end well before production starts
    return OvPlan(scale=s, lead_s=2.0, step_s=0.5 * s, hold_s=3.0 * s,
                  after_s=max(1.5, 4.0 * s))


SETUP_S = 0.6     # the opportunistic job's set-up (filling its memory) delays its end


def estimate_s(budget: Budget, run_overhead_s: float) -> float:
    """OV1's expected wall time: three policy runs and production's solo baseline."""
    p = plan(budget)
    return len(MEM_POLICIES) * (p.opp_s + SETUP_S + run_overhead_s) + p.prod_s + run_overhead_s


def _step_bytes(total: int) -> int:
    return max(ALIGN, int(total * STEP_FRAC) // ALIGN * ALIGN)


def jobs(policy: str | None, p: OvPlan, total: int, touch: str | None = None
         ) -> list[JobDef]:
    """The two jobs under a memory policy (None: production's solo baseline); `touch`: their
    kernels read their memory every that many bytes (real GPUs: TOUCH_REAL)."""
    step = _step_bytes(total)
    prod = WorkloadSpec(kernels=4, kernel_us=1000, gap_ms=1.7, name="prod", report_ms=50,
                        mem=p.steps * step, alloc_chunk=step, ramp_every_ms=p.step_s * 1e3,
                        free_at_s=p.free_at_s, verify=True, prefer_device=policy == "tgs",
                        touch=touch)
    prod_job = JobDef("prod", PRODUCTION, prod, p.lead_s, p.prod_s, mem_quota=total)
    if policy is None:
        return [replace(prod_job, start_s=0.0)]
    opp = WorkloadSpec(kernels=2, kernel_us=2000, gap_ms=0, name="opp", report_ms=25,
                       mem=round(OPP_FRAC / STEP_FRAC) * step, alloc_chunk=step, verify=True,
                       managed=policy == "tgs", touch=touch)
    opp_job = JobDef("opp", OPPORTUNISTIC, opp, 0.0, p.opp_s,
                     mem_quota=int(total * OPP_QUOTA_FRAC),
                     mem_total=total if policy == "ours" else 0,
                     mem_fixed=policy != "ours")    # the baselines: memory as it was
    return [prod_job, opp_job]


def sim_env(gpu: str) -> dict[str, str]:
    return {"TGS_SIM_MEM": str(SIM_MEM), "TGS_SIM_PCIE_GBPS": repr(SIM_PCIE_GBPS)} \
        if gpu == "sim" else {}


@dataclass
class OvResult:
    key: str
    plan: OvPlan
    total: int
    solo: RunRecord | None
    runs: dict[str, RunRecord]
    failed: dict[str, str] = field(default_factory=dict)


def run(key: str, budget: Budget, gpu: str, out: Path, work: Path,
        log: Callable[[str], None], policies: tuple[str, ...] = MEM_POLICIES) -> OvResult:
    """Production's solo baseline, then one run per memory policy; records under out/runs."""
    if key not in KEYS:
        raise ValueError(f"unknown scenario {key!r} (known: {', '.join(KEYS)})")
    p = plan(budget)
    total = device_total(gpu, SIM_MEM)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    log(f"{key}: {TITLE}")
    res = OvResult(key, p, total, None, {})
    touch = TOUCH_REAL if gpu == "real" else None

    def one(label: str, policy: str | None, js: list[JobDef]) -> RunRecord:
        t = time.monotonic()
        rec = run_jobs(key, label, policy, js, gpu, out / "logs" / f"{key}-{label}", work,
                       extra_env=sim_env(gpu), memory=True)
        save_run(rec, out / "runs" / f"{key}-{label}.json")
        bad = {n: j.error for n, j in rec.jobs.items() if j.error}
        log(f"  {key} {label:<14} {time.monotonic() - t:5.1f} s"
            + (f"  errors: {bad}" if bad else ""))
        return rec

    try:
        res.solo = one("solo-prod", None, jobs(None, p, total, touch))
    except Exception as exc:
        res.failed["solo"] = f"{exc.__class__.__name__}: {exc}"
        log(f"  {key} solo-prod      FAILED: {res.failed['solo']}")
    for pol in policies:
        try:
            res.runs[pol] = one(pol, COMPUTE_POLICY, jobs(pol, p, total, touch))
        except Exception as exc:      # one broken run must not lose the others
            res.failed[pol] = f"{exc.__class__.__name__}: {exc}"
            log(f"  {key} {pol:<14} FAILED: {res.failed[pol]}")
    return res


def _oom_who(rec: RunRecord, allocs: dict[str, Any]) -> list[str]:
    who = []
    if allocs["oom"] is not None:
        o = allocs["oom"]
        who.append(f"production at step {o['step'] + 1} ({o['held_mib']} MiB held, "
                   f"{o['t_s']:.2f} s into its ramp)")
    for name, j in rec.jobs.items():
        if j.error and "OUT_OF_MEMORY" in j.error:
            who.append(f"{name}: {j.error}")
    return who


def policy_metrics(res: OvResult, policy: str) -> dict[str, Any]:
    rec = res.runs[policy]
    prod, opp = rec.jobs["prod"], rec.jobs["opp"]
    allocs = OM.alloc_stats(prod.events)
    t_ramp = OM.event_time(prod.events, "alloc")
    t_peak = OM.event_time(prod.events, "alloc", ok_only=True, last=True)
    t_free = OM.event_time(prod.events, "free", begin=True)    # it starts freeing
    t_freed = OM.event_time(prod.events, "free")                # its memory is free
    cum = opp.cumulative()
    rates = OM.phase_rates(cum, t_ramp, t_peak, t_free)
    solo = res.solo.jobs["prod"].it_per_s if res.solo is not None else math.nan
    base = OM.prod_rates(res.solo.jobs["prod"].cumulative(), res.solo.jobs["prod"].events) \
        if res.solo is not None else {"ramp": math.nan, "peak": math.nan}
    own = OM.prod_rates(prod.cumulative(), prod.events)
    before = rates["before"]
    recovery = OM.recovery_time(cum, t_freed, OM.RECOVERY_TARGET * before) \
        if before == before else None
    mem = OM.memory_by_job(rec.memory, {n: j.pid for n, j in rec.jobs.items()}, rec.t0)
    checks = {n: [e.get("ok") for e in j.events if e.get("type") == "check"]
              for n, j in rec.jobs.items()}
    return json_safe({
        "allocs": allocs, "planned_steps": res.plan.steps, "oom": _oom_who(rec, allocs),
        "prod_it_per_s": prod.it_per_s, "prod_vs_solo": prod.it_per_s / solo if solo else None,
        "prod_phase_it_per_s": own, "solo_phase_it_per_s": base,
        "prod_ramp_vs_solo": own["ramp"] / base["ramp"] if base["ramp"] else None,
        "prod_peak_vs_solo": own["peak"] / base["peak"] if base["peak"] else None,
        "opp_it_per_s": rates, "opp_during_vs_before": rates["during"] / before
        if before else None,
        "recovery_s": recovery, "recovery_window_s": OM.RECOVERY_WINDOW_S,
        "after_s": cum[-1][0] - t_freed if cum and t_freed is not None else None,
        "opp_alive": opp.summary is not None and opp.returncode == 0 and not opp.error,
        "data_ok": {n: bool(c) and all(c) for n, c in checks.items()},
        "errors": {n: j.error for n, j in rec.jobs.items() if j.error},
        "peak_mib": {n: {k: v >> 20 for k, v in OM.peak(m).items()} for n, m in mem.items()},
    })


def summarise(res: OvResult) -> dict[str, Any]:
    base = res.solo.jobs["prod"] if res.solo is not None else None
    return {"title": TITLE, "plan": {**asdict(res.plan), "steps": res.plan.steps,
                                     "free_at_s": res.plan.free_at_s},
            "device_mib": res.total >> 20, "compute_policy": COMPUTE_POLICY,
            "sim": {"mem_mib": SIM_MEM >> 20, "pcie_gbps": SIM_PCIE_GBPS},
            "solo_prod_it_per_s": base.it_per_s if base else None,
            "solo_allocs": OM.alloc_stats(base.events) if base else None,
            "policies": {p: policy_metrics(res, p) for p in res.runs},
            "failed": res.failed}


COLUMNS = ("policy", "prod allocs ok", "alloc p50 / max (ms)", "OOM", "prod/solo ramp; peak",
           "opp it/s before / during / after", "recovery (s)", "opp alive, data",
           "peak opp GPU / host (MiB)")


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def markdown(summary: dict[str, Any]) -> str:
    """One table per OV scenario: a row per memory policy."""
    out = []
    for key, s in summary.items():
        p = s["plan"]
        out += [f"**{key}** ({s['title']}): device {s['device_mib']} MiB, production "
                f"{p['steps']} steps every {p['step_s']:g} s, holds {p['hold_s']:g} s; compute "
                f"policy {s['compute_policy']}; production solo "
                f"{_f(s['solo_prod_it_per_s'], '{:.1f}')} it/s.", "",
                "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        for pol, m in s["policies"].items():
            a, r = m["allocs"], m["opp_it_per_s"]
            rec = "-" if m["after_s"] is None or r["before"] is None else (
                f"{m['recovery_s']:.2f}" if m["recovery_s"] is not None
                else f"> {m['after_s']:.1f}")
            data = ", ".join(f"{n} {'ok' if ok else 'NOT checked'}"
                             for n, ok in m["data_ok"].items())
            pk = m["peak_mib"].get("opp", {})
            out.append(
                f"| {pol} | {a['ok']}/{m['planned_steps']} | {_f(a['lat_ms_p50'])} / "
                f"{_f(a['lat_ms_max'])} | {'; '.join(m['oom']) or 'none'} | "
                f"{_f(m['prod_ramp_vs_solo'])}; {_f(m['prod_peak_vs_solo'])} | "
                f"{_f(r['before'], '{:.0f}')} / "
                f"{_f(r['during'], '{:.1f}')} / {_f(r['after'], '{:.0f}')} | {rec} | "
                f"{'yes' if m['opp_alive'] else 'NO'}; {data} | "
                f"{pk.get('gpu', 0)} / {pk.get('host', 0)} |")
        for pol, why in s.get("failed", {}).items():
            out.append(f"| {pol} (failed: {why}) |" + " - |" * (len(COLUMNS) - 1))
        out.append("")
    return "\n".join(out)
