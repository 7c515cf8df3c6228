"""The control period: read counters, run the policy, write controls.

One `step()` per period (server.Server calls it).  Everything a step writes is
idempotent and derived from the segments plus the policy's memory, so a
restarted controller resumes control at its first step.

Tenant files (.seg, .pub) are only pread (segments.JobSeg): the loop never
writes them, never reclaims a dead process's slot (the job's next process does,
at attach) and treats what it reads as untrusted: counters that go backwards
give 0, deltas are clamped to plausible maxima, a damaged segment flags the job.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field

from tgs.intercept import segment as iseg
from tgs.intercept.devseg import DeviceSegment, DevJob

from .disk import DiskGuard
from .parts import Part, sum_stats
from .placement import PlacementTracker
from .policy.base import PRODUCTION, Decision, DeviceSignals, GatePolicy, JobSignals, Policy
from .registry import Job, Registry
from .replies import JobStats, LoopStatus, MetricsEntry
from .segments import LOCK_EVERY, JobSeg, SlotSample

log = logging.getLogger(__name__)
U64 = (1 << 64) - 1
MAX_WORK_RATE = float(1 << 50)     # work units/s per process: more is a lie, clamped
MAX_LAUNCH_RATE = float(1 << 24)   # launches/s per process


@dataclass
class _Track:
    """What the loop remembers about one job between periods."""

    # slot -> (generation, launches, work, throttled ns, blocks) last period
    prev: dict[int, tuple[int, int, int, int, int]] = field(default_factory=dict)
    gate: tuple[int, int] | None = None
    gate_policy: GatePolicy | None = None   # the policy values its .ctl holds (written by us)
    defaults: tuple[int, int, int] | None = None
    seen_live: bool = False
    masks: dict[int, tuple[int, int]] = field(default_factory=dict)  # slot -> (gen, gap mask)
    # exact job totals (segment.h: retired + live lanes), monotonic
    work_total: int = 0
    launches_total: int = 0
    throttled_ns_total: int = 0
    blocks_total: int = 0
    gap_mask: int = 0              # union of the masks dealt to its processes (device table)
    busy_excess: int = -1          # production: pub.busy - live busy slots, last period
    busy_bias: int = 0             # published in the device table


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
        self.periods_missed = 0            # periods that had no step (a late step skips them)
        self._long = False                 # the last step itself took over a period
        self.busy_s = 0.0                  # wall time spent inside step()
        self.cpu_s = 0.0                   # CPU time spent inside step()
        self.dead_seen = 0
        self.bias_changes = 0
        self.placement = PlacementTracker()
        self.disk: DiskGuard | None = None      # main.py: reserves replenished from here

    def cut_back_grown(self) -> int:
        """Every job's grown files cut back now (disk.DiskGuard, on a full disk)."""
        return sum(u.seg.cut_back_grown() for u in self.registry.units()
                   if isinstance(u.seg, JobSeg))

    # ------------------------------------------------------------ server hooks
    def on_change(self) -> None:
        """A job was added/changed/removed: rewrite every control next step."""
        names = {u.rec.name for u in self.registry.units()}
        for name in list(self.tracks):
            if name not in names:
                del self.tracks[name]
                self.policy.forget(name)
        for t in self.tracks.values():
            t.gate = t.defaults = t.gate_policy = None
        self._publish_devices()

    def status(self) -> LoopStatus:
        return LoopStatus(
            policy=self.policy.name, period_ms=round(self.period * 1000, 3), steps=self.steps,
            overruns=self.overruns, periods_missed=self.periods_missed, dead_seen=self.dead_seen,
            busy_bias_changes=self.bias_changes,
            loop_ms_avg=round(1000 * self.busy_s / self.steps, 3) if self.steps else 0.0,
            loop_cpu_s=round(self.cpu_s, 3),
            policy_state={str(k): v for k, v in self.policy.notes.items()},
            placement=self.placement.info({d.index: d.uuid for d in self.registry.devices})
            if self.steps else None,
            tampered_jobs=sum(1 for u in self.registry.units() if isinstance(u.seg, JobSeg)
                              and (u.seg.tampered or u.seg.grown)),
            disk_full_writes=self.disk.full_writes if self.disk else None,
            disk_reserve_held=all(r.held for r in self.disk.reserves) if self.disk else None)

    # ------------------------------------------------------------ the period
    def step(self, now: float) -> list[MetricsEntry]:
        t0, c0 = time.perf_counter(), time.process_time()
        dt = self.period if self.last is None else max(1e-3, now - self.last)
        # honest figures whatever held the step back (requests, a stall): steps plus
        # periods_missed follow the clock, and a late step is an overrun
        missed = max(0, round(dt / self.period) - 1) if self.last is not None else 0
        self.last = now
        # a multi-device job is controlled per part (registry.Part: a job of its own per device)
        jobs = [j for j in self.registry.units() if isinstance(j.seg, JobSeg)]
        samples: dict[str, list[SlotSample]] = {}
        signals: list[JobSignals] = []
        for job in jobs:
            s = self._read(job, dt)
            samples[job.rec.name] = s
            signals.append(self._signals(job, s, dt))
        devices = self._devices(signals)
        self.placement.update(dt, devices)
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
            job.seg.ctl.heartbeat()
            metrics.append(self._stats(job, sig, samples[job.rec.name], dec))
        for whole in self.registry.jobs.values():
            if whole.parts:
                whole.stats = sum_stats([p.stats for p in whole.parts])
        self._publish_devices()
        self._lifecycle(jobs, signals)
        if self.disk is not None:
            self.disk.replenish()
        self.steps += 1
        spent = time.perf_counter() - t0
        self.busy_s += spent
        self.cpu_s += time.process_time() - c0
        # a long step makes the next one late: that is one overrun, not two
        if spent > self.period or (missed and not self._long):
            self.overruns += 1
        self._long = spent > self.period
        self.periods_missed += missed
        return metrics

    def _read(self, job: Job | Part, dt: float) -> list[SlotSample]:
        seg = job.seg
        assert isinstance(seg, JobSeg)
        try:
            if self.steps % LOCK_EVERY == 0:
                seg.cut_back_grown()        # disk.py: a tenant filling the disk
            live, dead = seg.scan(self.steps)
        except Exception as exc:            # a tenant's file must never stop the loop
            log.error("job %s: cannot read its segment: %s", job.rec.name, exc)
            seg.damaged, live, dead = str(exc), [], False
        if not seg.damaged:
            self._totals(job, seg.retired(), live, dt)
        if dead:
            self.dead_seen += 1
            log.info("job %s: a process died; its slot goes back to the job when the job's "
                     "next process attaches", job.rec.name)
        return live

    def _totals(self, job: Job | Part, retired: tuple[int, int, int, int], live: list[SlotSample],
                dt: float) -> None:
        """Job totals: reclaimed slots' counters plus the live lanes.  A slot reclaimed between
        the two reads makes the sum look briefly low: keep the high-water mark.  The tenant
        writes these counters: a total grows at most at a plausible rate per period."""
        tr = self.tracks.setdefault(job.rec.name, _Track())
        n = max(1, len(live))

        def grow(old: int, cand: int, rate: float) -> int:
            return max(old, min(cand, old + int(rate * dt * n)))

        tr.launches_total = grow(tr.launches_total, retired[0] + sum(s.launches for s in live),
                                 MAX_LAUNCH_RATE)
        tr.work_total = grow(tr.work_total, retired[1] + sum(s.work for s in live),
                             MAX_WORK_RATE)
        tr.throttled_ns_total = grow(tr.throttled_ns_total,
                                     retired[2] + sum(s.throttled_ns for s in live), 1e9)
        tr.blocks_total = grow(tr.blocks_total, retired[3] + sum(s.blocks for s in live),
                               MAX_WORK_RATE)

    def _signals(self, job: Job | Part, live: list[SlotSample], dt: float) -> JobSignals:
        tr = self.tracks.setdefault(job.rec.name, _Track())
        work = launches = thr = blocks = 0
        prev, nxt = tr.prev, {}
        max_work, max_launch, max_thr = MAX_WORK_RATE * dt, MAX_LAUNCH_RATE * dt, dt * 1e9
        for s in live:
            p = prev.get(s.slot)
            if p is None or p[0] != s.generation:
                p = (s.generation, 0, 0, 0, 0)
            # a counter that went backwards gives 0; a jump is clamped: a lie is limited
            d = s.launches - p[1]
            launches += (d if d < max_launch else max_launch) if d > 0 else 0
            d = s.work - p[2]
            work += (d if d < max_work else max_work) if d > 0 else 0
            d = s.throttled_ns - p[3]
            thr += (d if d < max_thr else max_thr) if d > 0 else 0
            d = s.blocks - p[4]
            blocks += (d if d < max_work else max_work) if d > 0 else 0
            nxt[s.slot] = (s.generation, s.launches, s.work, s.throttled_ns, s.blocks)
        tr.prev = nxt
        n = len(live)
        return JobSignals(
            name=job.rec.name, priority=job.rec.priority, weight=job.rec.weight,
            device=job.rec.device_index, nproc=n, work_rate=work / dt,
            launch_rate=launches / dt, block_rate=blocks / dt,
            throttled_frac=min(1.0, thr / (dt * 1e9 * n)) if n else 0.0,
            inflight=sum(s.inflight for s in live),
            busy=sum(1 for s in live if s.dev_active) if job.rec.priority == PRODUCTION else 0)

    def _devices(self, signals: list[JobSignals]) -> dict[int, DeviceSignals]:
        """Production's activity per device: live busy slots, and from the production pubs
        (pread, untrusted) the gap sequence (sum of busy_seq) and the smallest gap prediction.
        A pub whose busy count stays above its live busy slots (a process that died busy) gets
        that excess as its busy_bias in the device table, so it cannot hold others off."""
        out = {idx: DeviceSignals(idx) for idx in self.dev_segs}
        by_name = {s.name: s for s in signals}
        for job in self.registry.units():
            d = out.get(job.rec.device_index)
            if d is None or job.rec.priority != PRODUCTION or not isinstance(job.seg, JobSeg):
                continue
            sig = by_name.get(job.rec.name)
            live = sig.busy if sig is not None else 0
            d.prod_active += live
            pub = job.seg.read_pub() if not job.seg.damaged else None
            if pub is None:
                continue
            d.busy_seq += pub.busy_seq % (1 << 48)
            if pub.gap_pred_ns and (not d.gap_pred_ns or pub.gap_pred_ns < d.gap_pred_ns):
                d.gap_pred_ns = pub.gap_pred_ns
            tr = self.tracks.setdefault(job.rec.name, _Track())
            excess = max(0, pub.busy - live)
            # a shim may be mid-transition: only an excess seen twice in a row counts
            bias = min(excess, tr.busy_excess) if tr.busy_excess >= 0 else 0
            tr.busy_excess = excess
            if bias != tr.busy_bias:
                log.info("job %s: busy count %d, live busy processes %d: bias %d", job.rec.name,
                         pub.busy, live, bias)
                tr.busy_bias = bias
                self.bias_changes += 1
        return out

    def _publish_devices(self) -> None:
        """The device tables (controller-owned, read-only for tenants): the jobs on each device,
        with their gap masks and busy biases; rewritten only when something changed."""
        tables: dict[int, list[DevJob]] = {idx: [] for idx in self.dev_segs}
        for job in self.registry.units():
            seg = job.seg
            if not isinstance(seg, JobSeg) or job.rec.device_index not in tables:
                continue
            tr = self.tracks.get(job.rec.name) or _Track()
            tables[job.rec.device_index].append(DevJob(
                job.rec.name, iseg.PRIORITY_PRODUCTION if job.rec.priority == PRODUCTION
                else iseg.PRIORITY_OPPORTUNISTIC, seg.generation, tr.gap_mask, tr.busy_bias))
        for idx, dseg in self.dev_segs.items():
            try:
                dseg.set_jobs(tables[idx])
            except Exception:
                log.exception("device %d: cannot write its device segment", idx)

    def _apply(self, job: Job | Part, live: list[SlotSample], sig: JobSignals,
               dec: Decision) -> None:
        seg = job.seg
        assert isinstance(seg, JobSeg)
        tr = self.tracks[job.rec.name]
        gate = (dec.gate, max(0, min(dec.gate_max_wait_us, 0xFFFFFFFF)))
        if tr.gate != gate:
            seg.ctl.set_gate(*gate)
            tr.gate = gate
        if tr.gate_policy != self.policy.gate_policy:    # the policy's, at its first period
            seg.ctl.set_gate_policy(self.policy.gate_policy)
            tr.gate_policy = self.policy.gate_policy
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
            seg.ctl.set_defaults(iseg.SlotDefaults(rate, burst, cap))   # and every slot's line
            tr.defaults = (rate, burst, cap)
        for s in live:
            if s.cap != cap or _moved(s.rate, rate) or _moved(s.burst, burst):
                seg.ctl.set_rate(s.slot, rate, burst, cap)
        tr.gap_mask = dec.gap_mask if live else 0
        if dec.gap_mask or tr.masks:
            for s, mask in zip(live, deal_bits(dec.gap_mask, len(live))):
                if tr.masks.get(s.slot, (s.generation, 0)) != (s.generation, mask):
                    seg.ctl.set_gap_mask(s.slot, mask)
                if mask:
                    tr.masks[s.slot] = (s.generation, mask)
                else:
                    tr.masks.pop(s.slot, None)

    def _stats(self, job: Job | Part, sig: JobSignals, live: list[SlotSample],
               dec: Decision | None) -> MetricsEntry:
        seg = job.seg
        tr = self.tracks.get(job.rec.name)
        st = JobStats(
            processes=sig.nproc,
            mem_used=min(iseg.QUOTA_UNLIMITED, sum(s.mem_used for s in live)),
            segment_damaged=seg.damaged if isinstance(seg, JobSeg) else None,
            segment_tampered=(seg.tampered or seg.grown) if isinstance(seg, JobSeg) else None,
            segment_lies=seg.lies_seen if isinstance(seg, JobSeg) else None,
            work_rate=round(sig.work_rate, 1), launch_rate=round(sig.launch_rate, 1),
            block_rate=round(sig.block_rate, 1),
            throttled_frac=round(sig.throttled_frac, 4), inflight=sig.inflight,
            rate=None if dec is None or dec.rate is None else round(dec.rate, 1),
            inflight_cap=dec.inflight_cap if dec else None,
            gate=dec.gate if dec else None,
            gate_max_wait_us=dec.gate_max_wait_us if dec else None,
            control=dec.reason if dec else None,
            work_total=tr.work_total if tr else None,
            launches_total=tr.launches_total if tr else None,
            throttled_s_total=tr.throttled_ns_total / 1e9 if tr else None,
            blocks_total=tr.blocks_total if tr else None,
        )
        job.stats = st
        return MetricsEntry(job.rec.name, job.rec.priority, job.rec.device_index,
                            job.rec.state, st)

    def _lifecycle(self, units: list[Job | Part], signals: list[JobSignals]) -> None:
        """running while a process lives; done when the last one left (ephemeral: removed).
        A multi-device job lives while any of its parts has a live process."""
        changed = False
        nproc: dict[str, int] = {}
        for unit, sig in zip(units, signals):
            owner = unit.owner if isinstance(unit, Part) else unit.rec.name
            nproc[owner] = nproc.get(owner, 0) + sig.nproc
        for name, n in nproc.items():
            job = self.registry.jobs.get(name)
            if job is None:
                continue
            if job.lease is not None:            # tgs-run's job: its process tree (lease.py)
                if not job.lease.expired(n > 0):
                    if job.lease.used:
                        changed |= self.registry.set_state(job, "running", save=False)
                    continue
                log.info("job %s: lease released, no live process: removing it", job.rec.name)
                self._forget(job)
            elif n > 0:
                changed |= self.registry.set_state(job, "running", save=False)
            elif job.rec.state == "running":
                if job.rec.ephemeral:
                    log.info("ephemeral job %s finished: removing it", job.rec.name)
                    self._forget(job)
                else:
                    changed |= self.registry.set_state(job, "done", save=False)
        if changed:
            self.registry.save_quietly()

    def _forget(self, job: Job) -> None:
        units = job.units()
        self.registry.remove_done(job)
        for unit in units:
            self.tracks.pop(unit.rec.name, None)
            self.policy.forget(unit.rec.name)

    def idle(self, name: str) -> bool:
        """No lease holder and no live process (a fresh read): unregister when_idle."""
        job = self.registry.jobs.get(name)
        if job is None:
            return True
        if job.lease is not None and job.lease.held():
            return False
        for unit in job.units():
            if not isinstance(unit.seg, JobSeg):
                continue
            try:
                live, _ = unit.seg.scan(self.steps)
            except Exception as exc:        # unknown: keep the job (the loop decides later)
                log.error("job %s: cannot read its segment: %s", unit.rec.name, exc)
                return False
            if live:
                return False
        return True
