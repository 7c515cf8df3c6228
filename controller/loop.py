"""The control period: read counters, reclaim the dead, run the policy, write controls.

One `step()` per period (server.Server calls it).  Everything a step writes is
idempotent and derived from the segments plus the policy's memory, so a
restarted controller resumes control at its first step.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from tgs.intercept import segment as iseg
from tgs.intercept.device import DeviceSegment

from .policy.base import PRODUCTION, Decision, DeviceSignals, JobSignals, Policy
from .registry import Job, Registry
from .segments import JobSeg, SlotSample

log = logging.getLogger(__name__)
U64 = (1 << 64) - 1


@dataclass
class _Track:
    """What the loop remembers about one job between periods."""

    prev: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)  # slot -> gen, ...
    gate: tuple[int, int] | None = None
    defaults: tuple[int, int, int] | None = None
    seen_live: bool = False
    masks: dict[int, tuple[int, int]] = field(default_factory=dict)  # slot -> (gen, gap mask)
    # exact job totals (segment.h: retired + live lanes), monotonic
    work_total: int = 0
    launches_total: int = 0
    throttled_ns_total: int = 0


def deal_bits(mask: int, n: int) -> list[int]:
    """Deal the set bits of `mask` out among n processes in turn (disjoint masks)."""
    if n <= 0:
        return []
    if not mask:
        return [0] * n
    return list(_deal_bits(mask, n))


@functools.lru_cache(maxsize=1024)
def _deal_bits(mask: int, n: int) -> tuple[int, ...]:
    out = [0] * n
    k = 0
    for b in range(64):
        if mask >> b & 1:
            out[k % n] |= 1 << b
            k += 1
    return tuple(out)


def _moved(old: int, new: int) -> bool:
    """Rewrite a control only when it moved by more than 2 % (or to/from unlimited)."""
    if old == new:
        return False
    if iseg.RATE_UNLIMITED in (old, new):
        return True
    return abs(new - old) > 0.02 * max(old, new)


class ControlLoop:
    def __init__(self, registry: Registry, policy: Policy, dev_segs: dict[int, DeviceSegment],
                 period: float) -> None:
        self.registry = registry
        self.policy = policy
        self.dev_segs = dev_segs
        self.period = period
        self.tracks: dict[str, _Track] = {}
        self.last: float | None = None
        self.steps = 0
        self.overruns = 0
        self.busy_s = 0.0                  # wall time spent inside step()
        self.cpu_s = 0.0                   # CPU time spent inside step()
        self.reclaimed = 0
        self.repairs = 0
        self._mismatch: dict[int, int] = {}

    # ------------------------------------------------------------ server hooks
    def on_change(self) -> None:
        """A job was added/changed/removed: rewrite every control next step."""
        for name in list(self.tracks):
            if name not in self.registry.jobs:
                del self.tracks[name]
                self.policy.forget(name)
        for t in self.tracks.values():
            t.gate = t.defaults = None

    def status(self) -> dict[str, Any]:
        return {"policy": self.policy.name, "period_ms": round(self.period * 1000, 3),
                "steps": self.steps, "overruns": self.overruns, "reclaimed": self.reclaimed,
                "prod_active_repairs": self.repairs,
                "loop_ms_avg": round(1000 * self.busy_s / self.steps, 3) if self.steps else 0.0,
                "loop_cpu_s": round(self.cpu_s, 3),
                "policy_state": {str(k): v for k, v in self.policy.notes.items()}}

    # ------------------------------------------------------------ the period
    def step(self, now: float) -> list[dict[str, Any]]:
        t0, c0 = time.perf_counter(), time.process_time()
        dt = self.period if self.last is None else max(1e-3, now - self.last)
        self.last = now
        jobs = [j for j in self.registry.jobs.values() if isinstance(j.seg, JobSeg)]
        samples: dict[str, list[SlotSample]] = {}
        signals: list[JobSignals] = []
        for job in jobs:
            s = self._read(job)
            samples[job.rec.name] = s
            signals.append(self._signals(job, s, dt))
        devices = self._devices(signals)
        try:
            decisions = self.policy.decide(now, dt, devices, signals)
        except Exception:                    # a policy bug must not stop enforcement
            log.exception("policy %s failed: keeping the last controls", self.policy.name)
            decisions = {}
        metrics = []
        for job, sig in zip(jobs, signals):
            dec = decisions.get(job.rec.name)
            if dec is not None:
                self._apply(job, samples[job.rec.name], sig, dec)
            job.seg.seg.heartbeat()
            metrics.append(self._stats(job, sig, samples[job.rec.name], dec))
        self._lifecycle(jobs, signals)
        self.steps += 1
        spent = time.perf_counter() - t0
        self.busy_s += spent
        self.cpu_s += time.process_time() - c0
        if spent > self.period:
            self.overruns += 1
        return metrics

    def _read(self, job: Job) -> list[SlotSample]:
        seg = job.seg
        assert isinstance(seg, JobSeg)
        retired = seg.retired()              # before the slots: see segment.h
        live, dead = seg.scan(self.steps)
        self._totals(job, retired, live)
        if dead:
            dev = self.dev_segs.get(job.rec.device_index)
            for r in seg.seg.reclaim_dead(dev if job.rec.priority == PRODUCTION else None):
                self.reclaimed += 1
                log.info("job %s: process %d died (slot %d): %d bytes reclaimed",
                         job.rec.name, r.pid, r.slot, r.mem_used)
        return live

    def _totals(self, job: Job, retired: tuple[int, int, int], live: list[SlotSample]) -> None:
        """Exact job totals: reclaimed slots' counters plus the live lanes.  A slot reclaimed
        between the two reads makes the sum look briefly low: keep the high-water mark."""
        tr = self.tracks.setdefault(job.rec.name, _Track())
        tr.launches_total = max(tr.launches_total, retired[0] + sum(s.launches for s in live))
        tr.work_total = max(tr.work_total, retired[1] + sum(s.work for s in live))
        tr.throttled_ns_total = max(tr.throttled_ns_total,
                                    retired[2] + sum(s.throttled_ns for s in live))

    def _signals(self, job: Job, live: list[SlotSample], dt: float) -> JobSignals:
        tr = self.tracks.setdefault(job.rec.name, _Track())
        work = launches = thr = 0
        prev, nxt = tr.prev, {}
        for s in live:
            p = prev.get(s.slot)
            if p is None or p[0] != s.generation:
                p = (s.generation, 0, 0, 0)
            launches += max(0, s.launches - p[1])
            work += max(0, s.work - p[2])
            thr += max(0, s.throttled_ns - p[3])
            nxt[s.slot] = (s.generation, s.launches, s.work, s.throttled_ns)
        tr.prev = nxt
        n = len(live)
        return JobSignals(
            name=job.rec.name, priority=job.rec.priority, weight=job.rec.weight,
            device=job.rec.device_index, nproc=n, work_rate=work / dt,
            launch_rate=launches / dt,
            throttled_frac=min(1.0, thr / (dt * 1e9 * n)) if n else 0.0,
            inflight=sum(s.inflight for s in live),
            busy=sum(1 for s in live if s.dev_active) if job.rec.priority == PRODUCTION else 0)

    def _devices(self, signals: list[JobSignals]) -> dict[int, DeviceSignals]:
        """prod_active from live production slots; repair the device segment if it drifted."""
        out: dict[int, DeviceSignals] = {}
        for idx, dseg in self.dev_segs.items():
            live = sum(s.busy for s in signals if s.device == idx)
            out[idx] = DeviceSignals(idx, live, busy_seq=dseg.busy_seq,
                                     gap_pred_ns=dseg.gap_pred_ns)
            seen = dseg.prod_active
            # a shim may be mid-transition: repair only a mismatch seen twice in a row
            if seen != live and self._mismatch.get(idx) == seen:
                dseg.set_prod_active(live)
                self.repairs += 1
                log.debug("device %d: prod_active %d -> %d", idx, seen, live)
                self._mismatch.pop(idx, None)
            elif seen != live:
                self._mismatch[idx] = seen
            else:
                self._mismatch.pop(idx, None)
        return out

    def _apply(self, job: Job, live: list[SlotSample], sig: JobSignals, dec: Decision) -> None:
        seg = job.seg
        assert isinstance(seg, JobSeg)
        tr = self.tracks[job.rec.name]
        gate = (dec.gate, max(0, min(dec.gate_max_wait_us, 0xFFFFFFFF)))
        if tr.gate != gate:
            seg.seg.set_gate(*gate)
            tr.gate = gate
        n = max(1, sig.nproc)
        if dec.rate is None:
            rate, burst = iseg.RATE_UNLIMITED, 0
        else:
            rate = max(1, min(U64 - 1, int(dec.rate / n)))
            # the bucket always holds at least two of the job's kernels
            burst = max(1, int(rate * dec.burst_s), int(2 * sig.work_per_launch))
        cap = max(0, min(U64, int(dec.inflight_cap)))
        d = tr.defaults
        if d is None or d[2] != cap or _moved(d[0], rate) or _moved(d[1], burst):
            seg.seg.set_defaults(iseg.SlotDefaults(rate, burst, cap))
            tr.defaults = (rate, burst, cap)
        for s in live:
            if s.cap != cap or _moved(s.rate, rate) or _moved(s.burst, burst):
                seg.seg.set_rate(s.slot, rate, burst, cap)
        if dec.gap_mask or tr.masks:
            for s, mask in zip(live, deal_bits(dec.gap_mask, len(live))):
                if tr.masks.get(s.slot, (s.generation, 0)) != (s.generation, mask):
                    seg.seg.set_gap_mask(s.slot, mask)
                if mask:
                    tr.masks[s.slot] = (s.generation, mask)
                else:
                    tr.masks.pop(s.slot, None)

    def _stats(self, job: Job, sig: JobSignals, live: list[SlotSample],
               dec: Decision | None) -> dict[str, Any]:
        st = {
            "processes": sig.nproc, "mem_used": sum(s.mem_used for s in live),
            "work_rate": round(sig.work_rate, 1), "launch_rate": round(sig.launch_rate, 1),
            "throttled_frac": round(sig.throttled_frac, 4), "inflight": sig.inflight,
            "rate": None if dec is None or dec.rate is None else round(dec.rate, 1),
            "inflight_cap": dec.inflight_cap if dec else None,
            "gate": dec.gate if dec else None,
            "gate_max_wait_us": dec.gate_max_wait_us if dec else None,
            "control": dec.reason if dec else None,
        }
        tr = self.tracks.get(job.rec.name)
        if tr is not None:
            st["work_total"] = tr.work_total
            st["launches_total"] = tr.launches_total
            st["throttled_s_total"] = tr.throttled_ns_total / 1e9
        job.stats = st
        return {"name": job.rec.name, "priority": job.rec.priority,
                "device": job.rec.device_index, "state": job.rec.state, **st}

    def _lifecycle(self, jobs: list[Job], signals: list[JobSignals]) -> None:
        """running while a process lives; done when the last one left (ephemeral: removed)."""
        changed = False
        for job, sig in zip(jobs, signals):
            if job.lease is not None:            # tgs-run's job: its process tree (lease.py)
                if not job.lease.expired(sig.nproc > 0):
                    if job.lease.used:
                        changed |= self.registry.set_state(job, "running", save=False)
                    continue
                log.info("job %s: lease released, no live process: removing it", job.rec.name)
                self.registry.remove_done(job)
                self.tracks.pop(job.rec.name, None)
                self.policy.forget(job.rec.name)
            elif sig.nproc > 0:
                changed |= self.registry.set_state(job, "running", save=False)
            elif job.rec.state == "running":
                if job.rec.ephemeral:
                    log.info("ephemeral job %s finished: removing it", job.rec.name)
                    self.registry.remove_done(job)
                    self.tracks.pop(job.rec.name, None)
                    self.policy.forget(job.rec.name)
                else:
                    changed |= self.registry.set_state(job, "done", save=False)
        if changed:
            self.registry.save_quietly()

    def idle(self, name: str) -> bool:
        """No lease holder and no live process (a fresh read): unregister when_idle."""
        job = self.registry.jobs.get(name)
        if job is None:
            return True
        if job.lease is not None and job.lease.held():
            return False
        if not isinstance(job.seg, JobSeg):
            return True
        try:
            live, _ = job.seg.scan(self.steps)
        except Exception as exc:            # unknown: keep the job (the loop decides later)
            log.error("job %s: cannot read its segment: %s", job.rec.name, exc)
            return False
        return not live
