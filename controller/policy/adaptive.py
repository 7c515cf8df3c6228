"""The default policy, `adaptive`: gap-fit gate + in-flight cap + weighted time shares.

Per device, every period (docs/policy.md has the reasoning and the figures):

1. Production jobs are never throttled: rate unlimited, gate PUBLISH (their
   shims count themselves in their job's publish page while they have GPU
   work queued; prod_active = the live production processes doing so).
2. Opportunistic jobs always get gate WAIT: their launches wait while a
   production job is busy, at most `gate_max_wait_us` (the starvation bound), so
   their work lands in production's idle gaps.
3. Mode.  GUARD while production is live and was busy within the last
   IDLE_PERIODS periods: the gate adds FIT (a launch goes only if it and the
   process's queued work end before production's predicted return; the shims
   keep the gap history in their publish pages).  Once the shims publish a gap
   prediction, FIT bounds the spill-over and the in-flight cap is the loose
   FIT_KERNELS; before that (plain WAIT) each process may have at most one
   kernel in flight (GUARD_KERNELS).  OPEN once production has been idle
   IDLE_PERIODS periods in a row (or has no live process): WAIT only, cap
   OPEN_KERNELS, which costs a lone job nothing but still bounds the queue
   production meets when it comes back.
4. Safety net: `level` in [LEVEL_MIN, 1] adapts by AIMD from production's
   work rate while opportunistic work ran against its rate in a short probe
   with opportunistic work paused.  A drop beyond INTERFERENCE (3 %)
   tightens (level x DECREASE: rate limits, longer max wait) and probes again
   after PROBE_EVERY; otherwise level creeps back (+INCREASE) and the probe
   interval doubles up to PROBE_EVERY_MAX, so a FIT gate that works costs
   opportunistic jobs ~1.5 % instead of 11 %.  A drop only counts when it
   exceeds the noise as well (NOISE_Z standard errors of the two means, from
   the per-period rates): a production job whose work comes with its demand
   (a server's Poisson arrivals: 12-15 % in a probe at 240-360 requests/s)
   would otherwise tighten at random, a random walk of `level` that starves
   the opportunistic job.  A drop within the noise changes nothing and the
   next probe comes after PROBE_EVERY.
   gate_max_wait_us is at least WAIT_CYCLES production cycles (busy phase +
   gap, from the production pubs' busy_seq), so FIT waits out a busy phase.
5. Opportunistic jobs share, by weight, the GPU time production leaves
   (avail = 1 - duty in GUARD, 1 in OPEN).  Time is measured per job through
   its own solo work rate estimate (`solo`: work units per GPU-second), never
   by comparing work units across jobs: rate_i = share_i * solo_i.  A lone
   opportunistic job is not rate limited at all (gate and cap suffice).
   Shares not used by demand-limited jobs go to the others (work conserving).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from .base import (
    GATE_FIT,
    GATE_WAIT,
    OPPORTUNISTIC,
    PRODUCTION,
    PRODUCTION_DECISION,
    Decision,
    DeviceSignals,
    GatePolicy,
    JobSignals,
    Policy,
    by_device,
)

DUTY_ALPHA = 0.3          # EMA weight of one prod_active sample (time constant ~3 periods)
PROBE_EVERY = 2.0         # s of shared running before a probe after a bad judgement
PROBE_FIRST = 4.0         # ... before the first one on a device
PROBE_EVERY_MAX = 16.0    # ... doubling after each good judgement up to this
PROBE_LEN = 0.25          # s a probe pauses opportunistic work on the device
PROBE_DRAIN = 0.06        # s at the start of a probe not counted (queued work drains)
LEVEL_START = 1.0         # FIT protects from the start; the probes are the safety net
PEAK_DECAY = 0.999        # per period, for an opportunistic job's unlimited work rate
IDLE_PERIODS = 4          # idle periods before OPEN (200 ms at 50 ms)
GUARD_KERNELS = 1         # in-flight kernels per opportunistic process in GUARD without gap history
FIT_KERNELS = 16          # ... in GUARD once FIT has a prediction (FIT bounds the queue itself)
OPEN_KERNELS = 16         # ... in OPEN
LEVEL_MIN = 0.05
DECREASE = 0.7
INCREASE = 0.1
GATE_POLICY = GatePolicy() # the .ctl's policy values: the contract's (segment.h) ...
INTERFERENCE = GATE_POLICY.interference   # ... production may lose at most 3 % (the shims'
                                          # overrun budget obeys the same target)
NOISE_Z = 2.0             # a drop counts beyond this many standard errors (one-sided ~2 %)
WAIT_MIN_US = 20_000      # gate max wait at level 1
WAIT_MAX_US = 200_000     # ... at LEVEL_MIN: the starvation bound is never longer
WAIT_CYCLES = 4           # max wait covers this many production cycles (busy + gap)
CYCLE_ALPHA = 0.3         # EMA weight of one period's mean production cycle
THROTTLED = 0.05          # throttled_frac above which a job's rate limit binds
BOOST_GROWTH = 1.1        # boost growth per period for a rate-bound job while time is spare
UNBOOST = 0.8             # boost decay per period for a GPU-bound job while time is short
BOOST_MAX = 100.0
SPARE = 0.9               # the GPU has spare time when jobs use less than this of `avail`
CALIBRATE_S = 2.0         # one unlimited period this often re-measures solo rates
MIN_SHARE = 0.02          # no opportunistic job gets less than this time share (no starvation)


def gap_masks(weights: dict[str, int]) -> dict[str, int]:
    """Disjoint 64-bit gap masks in proportion to the weights, interleaved (smooth weighted
    round robin), so each job owns its share of production's gaps (bit = busy_seq % 64)."""
    if len(weights) < 2:
        return {}
    return dict(_gap_masks(tuple(sorted(weights.items()))))


@functools.lru_cache(maxsize=256)
def _gap_masks(items: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """gap_masks for one set of (job, weight): computed once, every period reuses it."""
    weights = dict(items)
    total = sum(weights.values())
    cur = dict.fromkeys(weights, 0)
    out = dict.fromkeys(weights, 0)
    for b in range(64):
        for n, w in weights.items():
            cur[n] += w
        pick = max(sorted(cur), key=lambda n: cur[n])
        cur[pick] -= total
        out[pick] |= 1 << b
    return tuple(out.items())


def _ema(old: float, sample: float, alpha: float) -> float:
    return sample if old == 0 else old + alpha * (sample - old)


@dataclass
class _Moments:
    """Count, mean and variance of per-period samples (Welford)."""
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self.m2 += d * (x - self.mean)

    def var_of_mean(self) -> float:
        return self.m2 / (self.n - 1) / self.n if self.n > 1 else 0.0


@dataclass
class _Dev:
    duty: float = 0.0
    idle_periods: int = 0
    level: float = LEVEL_START
    prod_rate_shared: float = 0.0    # production work rate, opportunistic work present
    prod_rate_solo: float = 0.0      # ... opportunistic work paused (last probe)
    acc_work: float = 0.0            # production work in the current comparison window
    acc_t: float = 0.0
    opp_ran: bool = False
    next_probe: float = 0.0
    probe_start: float = 0.0
    probe_until: float = 0.0         # > 0 while probing
    probe_work: float = 0.0
    probe_t: float = 0.0
    acc_rates: _Moments = field(default_factory=_Moments)     # per-period rates
    probe_rates: _Moments = field(default_factory=_Moments)
    mode: str = "open"
    jobset: frozenset = frozenset()  # live opportunistic jobs at the last calibration
    calibrated: float = -1e9         # when the last calibration period started
    calibrating: bool = False
    probe_every: float = PROBE_FIRST
    busy_seq: int = -1               # the production pubs' busy_seq (sum) last period
    seq_t: float = 0.0               # when it last changed
    cycle: float = 0.0               # EMA of production's cycle (s), 0 = none seen
    fit: bool = False                # the shims publish a gap prediction


@dataclass
class _Opp:
    solo: float = 0.0                # work units per GPU-second (0: unknown yet)
    wpl: float = 0.0                 # EMA of work per launch
    rate: float | None = None        # the rate it was given last period
    boost: float = 1.0               # > 1 while it uses time others leave unused
    peak: float = 0.0                # its work rate per GPU-second when it ran unlimited alone
    given: float | None = None       # the rate decided last period (None = unlimited)


def _new_window(dev: _Dev) -> None:
    """A new comparison window: production's work with opportunistic work present."""
    dev.acc_work = dev.acc_t = 0.0
    dev.acc_rates = _Moments()
    dev.opp_ran = False


class AdaptivePolicy(Policy):
    name = "adaptive"
    gate_policy = GATE_POLICY

    def __init__(self) -> None:
        super().__init__()
        self.devs: dict[int, _Dev] = {}
        self.opps: dict[str, _Opp] = {}

    def forget(self, name: str) -> None:
        self.opps.pop(name, None)

    def decide(self, now: float, dt: float, devices: dict[int, DeviceSignals],
               jobs: list[JobSignals]) -> dict[str, Decision]:
        out: dict[str, Decision] = {}
        for index, djobs in by_device(jobs).items():
            prod = [j for j in djobs if j.priority == PRODUCTION]
            opp = [j for j in djobs if j.priority == OPPORTUNISTIC]
            for j in prod:
                out[j.name] = PRODUCTION_DECISION
            dev = self.devs.setdefault(index, _Dev())
            sig = devices.get(index) or DeviceSignals(index)
            self._update_device(dev, sig, prod, opp, now, dt)
            out.update(self._share(dev, now, opp))
            self.notes[index] = {"duty": round(dev.duty, 3), "level": round(dev.level, 3),
                                 "open": float(dev.mode == "open"),
                                 "cycle_ms": round(dev.cycle * 1e3, 3),
                                 "probe_every": dev.probe_every,
                                 "prod_rate_solo": dev.prod_rate_solo,
                                 "prod_rate_shared": dev.prod_rate_shared}
        return out

    # ------------------------------------------------------------ device state
    def _update_device(self, dev: _Dev, sig: DeviceSignals, prod: list[JobSignals],
                       opp: list[JobSignals], now: float, dt: float) -> None:
        busy = sig.prod_active > 0 or any(j.busy for j in prod)
        dev.duty += DUTY_ALPHA * ((1.0 if busy else 0.0) - dev.duty)
        dev.fit = sig.gap_pred_ns > 0
        if 0 <= dev.busy_seq < sig.busy_seq and now > dev.seq_t:
            dev.cycle = _ema(dev.cycle, (now - dev.seq_t) / (sig.busy_seq - dev.busy_seq),
                             CYCLE_ALPHA)
        if sig.busy_seq != dev.busy_seq:
            dev.busy_seq, dev.seq_t = sig.busy_seq, now
        live = any(j.nproc > 0 for j in prod)
        working = any(j.work_rate > 0 for j in prod)
        dev.idle_periods = 0 if (busy or working) else dev.idle_periods + 1
        dev.mode = "guard" if live and dev.idle_periods < IDLE_PERIODS else "open"
        if dev.mode == "open":
            dev.probe_until = 0.0
            _new_window(dev)
            dev.next_probe = now + dev.probe_every
            return
        pwork = sum(j.work_rate for j in prod) * dt
        if dev.probe_until > 0:                 # opportunistic work is paused: measure solo
            if now - dev.probe_start > PROBE_DRAIN:
                dev.probe_work += pwork
                dev.probe_t += dt
                dev.probe_rates.add(pwork / dt if dt > 0 else 0.0)
            if now >= dev.probe_until:
                self._judge(dev)
                dev.probe_until = 0.0
                _new_window(dev)
                dev.next_probe = now + dev.probe_every
            return
        dev.acc_work += pwork
        dev.acc_t += dt
        dev.acc_rates.add(pwork / dt if dt > 0 else 0.0)
        dev.opp_ran = dev.opp_ran or any(j.work_rate > 0 for j in opp)
        if now >= dev.next_probe:
            if dev.opp_ran and dev.acc_work > 0:
                dev.probe_start, dev.probe_until = now, now + PROBE_LEN
                dev.probe_work = dev.probe_t = 0.0
                dev.probe_rates = _Moments()
            else:                               # nothing to compare: start a new window
                _new_window(dev)
                dev.next_probe = now + dev.probe_every

    @staticmethod
    def _judge(dev: _Dev) -> None:
        """AIMD on `level` from production's rate with vs without opportunistic work."""
        if dev.probe_t <= 0 or dev.acc_t <= 0 or dev.probe_work <= 0:
            return
        solo = dev.probe_work / dev.probe_t
        shared = dev.acc_work / dev.acc_t
        dev.prod_rate_solo, dev.prod_rate_shared = solo, shared
        noise = NOISE_Z * math.sqrt(dev.probe_rates.var_of_mean() + dev.acc_rates.var_of_mean())
        if shared < solo * (1 - INTERFERENCE) - noise:
            dev.level = max(LEVEL_MIN, dev.level * DECREASE)
            dev.probe_every = PROBE_EVERY
        elif shared < solo * (1 - INTERFERENCE):    # within the noise: look again soon
            dev.probe_every = PROBE_EVERY
        else:
            dev.level = min(1.0, dev.level + INCREASE)
            if dev.level >= 1.0:
                dev.probe_every = min(PROBE_EVERY_MAX, dev.probe_every * 2)

    # ------------------------------------------------------------ opportunistic shares
    def _share(self, dev: _Dev, now: float, opp: list[JobSignals]) -> dict[str, Decision]:
        out: dict[str, Decision] = {}
        if not opp:
            return out
        open_ = dev.mode == "open"
        if open_:
            kernels, gate = OPEN_KERNELS, GATE_WAIT
        elif dev.fit:
            kernels, gate = FIT_KERNELS, GATE_WAIT | GATE_FIT
        else:
            kernels, gate = max(1, math.ceil(dev.level * GUARD_KERNELS)), GATE_WAIT | GATE_FIT
        frac = (dev.level - LEVEL_MIN) / (1 - LEVEL_MIN)
        wait_us = int(WAIT_MAX_US - frac * (WAIT_MAX_US - WAIT_MIN_US))
        # a cycle running longer than usual (no new busy phase) counts as long as it lasts
        cycle = max(dev.cycle, now - dev.seq_t) if dev.cycle > 0 else 0.0
        wait_us = min(WAIT_MAX_US, max(wait_us, int(WAIT_CYCLES * cycle * 1e6)))
        avail = 1.0 if open_ else max(0.1, 1.0 - dev.duty)
        live = [j for j in opp if j.nproc > 0]
        # FIT: each job owns gaps in proportion to its weight (the gap, not the token rate,
        # is what binds under FIT; an owner's unused gap is open to the others), so the
        # weighted token rates are not needed on top: an owner fills its whole gap
        masks = gap_masks({j.name: j.weight for j in live}) if gate & GATE_FIT else {}
        rates = {} if masks else self._rates(dev, now, avail, live)
        probing = dev.probe_until > 0
        for j in opp:
            st = self.opps.setdefault(j.name, _Opp())
            if j.launch_rate > 0:
                wpl = j.work_per_launch
                st.wpl = wpl if st.wpl == 0 else 0.8 * st.wpl + 0.2 * wpl
            if st.given is None and j.work_rate > 0 and len(live) == 1:
                st.peak = max(st.peak * PEAK_DECAY, j.work_rate / avail)
            else:
                st.peak *= PEAK_DECAY
            cap = max(1, int(kernels * st.wpl)) if st.wpl > 0 else 0
            rate = rates.get(j.name)
            reason = dev.mode
            if probing:
                rate, reason = 1.0, "probe"     # paused while production is measured alone
            elif not open_ and dev.level < 1.0:
                if rate is not None:
                    rate = max(1.0, rate * dev.level)
                elif st.peak > 0:
                    rate = max(1.0, dev.level * avail * st.peak)
            st.given = rate
            mask = masks.get(j.name, 0)
            wait_j = wait_us
            if mask:   # FIT's patient first half must outlast the gaps owned by others
                own = bin(mask).count("1") / 64
                wait_j = min(WAIT_MAX_US, max(wait_us, int(2 * (1 / own + 1) * cycle * 1e6)))
            out[j.name] = Decision(rate=rate, inflight_cap=cap, gate=gate,
                                   gate_max_wait_us=wait_j, gap_mask=mask, reason=reason)
        return out

    def _rates(self, dev: _Dev, now: float, avail: float,
               live: list[JobSignals]) -> dict[str, float | None]:
        """Weighted GPU-time shares turned into each job's own work rate.

        solo_i (work units per GPU-second) is calibrated in one unlimited period every
        CALIBRATE_S (and whenever the set of jobs changes): all jobs then round-robin,
        so a saturating job had avail/n of the GPU and solo_i = rate_i * n / avail.
        In between, rate_i = weighted share * solo_i * boost_i: a rate-bound job's boost
        grows (BOOST_GROWTH) while the jobs together use less than SPARE of the available time
        (work conserving: others leave their share unused), and shrinks back (UNBOOST)
        once it is GPU-bound while the GPU is full.
        """
        for j in live:
            self.opps.setdefault(j.name, _Opp())
        if len(live) < 2:
            dev.jobset = frozenset(j.name for j in live)
            return {}
        st = {j.name: self.opps[j.name] for j in live}
        jobset = frozenset(st)
        if dev.calibrating:                  # last period ran unlimited: read the samples
            dev.calibrating = False
            each = avail / len(live)
            for j in live:
                if j.work_rate > 0:
                    st[j.name].solo = j.work_rate / each
                st[j.name].boost = 1.0
        elif jobset != dev.jobset or now - dev.calibrated >= CALIBRATE_S \
                or all(s.solo == 0 for s in st.values()):
            dev.jobset, dev.calibrated, dev.calibrating = jobset, now, True
            for s in st.values():
                s.rate = None
            return {}
        used = sum(min(1.0, j.work_rate / st[j.name].solo) for j in live if st[j.name].solo > 0)
        spare = used < SPARE * avail
        for j in live:
            s = st[j.name]
            if j.throttled_frac > THROTTLED:
                if spare:                    # it wants more and the GPU has time left
                    s.boost = min(BOOST_MAX, s.boost * BOOST_GROWTH)
            elif not spare:                  # GPU-bound, not rate-bound: hand back the boost
                s.boost = max(1.0, s.boost * UNBOOST)
        wsum = sum(j.weight for j in live)
        shares = {j.name: max(MIN_SHARE, avail * j.weight / wsum) for j in live}
        out: dict[str, float | None] = {}
        for j in live:
            s = st[j.name]
            s.rate = out[j.name] = None if s.solo == 0 else \
                max(1.0, shares[j.name] * s.solo * s.boost)
        return out
