"""The comparison baselines as pure objects: the faithful TGS law (blocks, samples, slow start,
congestion avoidance, idle lift) and `static` with a fairly measured, refreshed peak."""

from __future__ import annotations

import random

import pytest
from tgs.controller.policy import make_policy
from tgs.controller.policy import static as S
from tgs.controller.policy import tgs_law as T
from tgs.controller.policy.base import Decision, DeviceSignals, JobSignals

DT = 0.05
PROD_TPB = 128.0         # production's threads per block
OPP_TPB = 512.0          # the opportunistic job's threads per block (not the law's fallback)
WPL = 500_000.0          # the opportunistic job's threads per kernel


def prod(work: float, nproc: int = 1, tpb: float = PROD_TPB) -> JobSignals:
    return JobSignals("p", "production", 1, 0, nproc=nproc, work_rate=work,
                      launch_rate=work / 1e6, block_rate=work / tpb if tpb else 0.0, busy=1)


def opp(work: float = 1e6, name: str = "o", throttled: float = 0.0,
        tpb: float = OPP_TPB) -> JobSignals:
    return JobSignals(name, "opportunistic", 1, 0, nproc=1, work_rate=work,
                      launch_rate=work / WPL, block_rate=work / tpb if tpb else 0.0,
                      throttled_frac=throttled)


class LawRun:
    """Drives the tgs law with production at `blocks` blocks/s (+-0.2 % noise) of `tpb`
    threads each; the opportunistic job launches OPP_TPB-thread blocks."""

    def __init__(self, sample_s: float = T.SAMPLE_S, tpb: float = PROD_TPB) -> None:
        self.pol = T.TgsLawPolicy(sample_s=sample_s)
        self.now, self.rng, self.tpb = 0.0, random.Random(3), tpb

    def run(self, seconds: float, blocks: float) -> Decision:
        d: dict[str, Decision] = {}
        for _ in range(round(seconds / DT)):
            self.now += DT
            w = blocks * self.tpb * (1 + self.rng.uniform(-0.002, 0.002))
            d = self.pol.decide(self.now, DT, {0: DeviceSignals(0, 1)},
                                [prod(w, tpb=self.tpb), opp()])
        return d["o"]

    def samples(self, n: int, blocks: float) -> Decision:
        """Runs until the law has taken n more samples, each wholly at `blocks`."""
        d = None
        for _ in range(n):
            start = self.pol.laws[0].sample_start
            d = self.run(DT, blocks)
            while self.pol.laws[0].sample_start == start:
                d = self.run(DT, blocks)
        assert d is not None
        return d

    def limit(self, d: Decision) -> float:
        """The decision's limit in (the opportunistic job's) blocks per 50 ms window."""
        assert d.rate is not None
        return (d.rate * T.LIMIT_WINDOW_S - WPL) / OPP_TPB

    @property
    def notes(self) -> dict[str, float]:
        return self.pol.notes[0]


def test_tgs_profiles_then_slow_start_in_blocks_then_backs_off() -> None:
    law = LawRun()
    d = law.run(2.0, 500_000)
    # profiling: limit 0, one kernel per 50 ms window gets through
    assert d.reason == "profile" and d.rate == pytest.approx(WPL / T.LIMIT_WINDOW_S)
    assert d.burst_s == T.LIMIT_WINDOW_S
    for _ in range(20):
        d = law.run(T.SAMPLE_S, 500_000)
        if d.reason == "law":
            break
    assert d.reason == "law" and law.limit(d) == pytest.approx(0.0)
    d = law.samples(1, 500_000)                 # the first sample after profiling: initial limit
    assert law.limit(d) == pytest.approx(T.LIMIT_INIT)
    prof = law.notes["profiled_s"]
    assert T.PROFILE_SAMPLES * T.SAMPLE_S - DT <= prof <= 12 * T.SAMPLE_S
    # steady production: slow start x1.5 + 1 per sample
    d = law.samples(3, 500_000)
    assert law.limit(d) == pytest.approx(((T.LIMIT_INIT * 1.5 + 1) * 1.5 + 1) * 1.5 + 1)
    assert law.notes["converged_s"] == -1
    before = law.limit(d)
    d = law.samples(1, 0.94 * 500_000)          # 6 % off: / 1.5, congestion avoidance
    assert law.limit(d) == pytest.approx(before / 1.5)
    assert law.notes["slow_start"] == 0 and law.notes["converged_s"] > prof
    ca = law.limit(d)
    d = law.samples(1, 500_000)                 # back within 3 %: additive increase
    assert law.limit(d) == pytest.approx(ca + max(T.RATE_MIN, 0.00025 * law.notes["max_rate"]),
                                         rel=1e-3)
    d = law.samples(1, 0.85 * 500_000)          # 15 % off: back to slow start at / 10
    assert law.limit(d) < ca / 5 and law.notes["slow_start"] == 1


def test_tgs_counts_blocks_not_threads() -> None:
    """The law reads the shims' block counts: TGS's thresholds (idle under 1000 blocks per
    5 s) apply to blocks, whatever the threads per block."""
    # 150 blocks/s = 750 per 5 s: idle for TGS; as threads it would be 192000/s
    law = LawRun()
    law.run(10.0, 100_000)                      # profile on a busy production
    # production (nearly) stops: the window forgets the busy samples, TGS re-profiles, then
    # lifts the limit once IDLE_AFTER samples have passed with >= 3 idle ones in the window
    d = law.run(2 * T.IDLE_AFTER * T.SAMPLE_S, 150)
    assert d.rate is None and d.reason == "law-idle"
    assert law.notes["limit"] == -1
    # samples are in blocks per 5 s whatever the sample length and the block size
    for tpb in (32.0, 1024.0):
        law2 = LawRun(tpb=tpb)
        law2.run(12.0, 100_000)
        assert law2.notes["max_rate"] == pytest.approx(100_000 * T.TGS_SAMPLE_S, rel=0.01)


def test_tgs_production_threads_without_blocks_count_as_idle() -> None:
    """Only blocks count: a production job whose lanes show threads and no blocks is idle for
    the law (it profiles a zero maximum), where a thread-based law would see it busy."""
    pol = T.TgsLawPolicy()
    now = 0.0
    for _ in range(round(8 * T.SAMPLE_S / DT)):
        now += DT
        pol.decide(now, DT, {0: DeviceSignals(0, 1)}, [prod(5e8, tpb=0.0), opp()])
    assert pol.notes[0]["max_rate"] == 0.0
    law = LawRun()
    law.run(8 * T.SAMPLE_S, 5e8 / PROD_TPB)
    assert law.notes["max_rate"] == pytest.approx(5e8 / PROD_TPB * T.TGS_SAMPLE_S, rel=0.01)


def test_tgs_limit_is_in_the_opportunistic_jobs_own_blocks() -> None:
    """The limit (blocks per 50 ms) becomes a work-unit rate with the opportunistic job's
    measured block size, kept while it launches nothing; the fallback before any is seen."""
    law = LawRun()
    d = law.run(40 * T.SAMPLE_S, 50_000)
    assert d.reason == "law" and d.rate is not None
    lim = law.notes["limit"]
    assert lim > T.LIMIT_INIT
    assert d.rate == pytest.approx((lim * OPP_TPB + WPL) / T.LIMIT_WINDOW_S)
    # a period without launches keeps the block size measured before
    quiet = JobSignals("o", "opportunistic", 1, 0, nproc=1)
    d2 = law.pol.decide(law.now + DT, DT, {0: DeviceSignals(0, 1)},
                        [prod(50_000 * PROD_TPB), quiet])["o"]
    lim2 = law.notes["limit"]
    assert d2.rate == pytest.approx((lim2 * OPP_TPB + OPP_TPB) / T.LIMIT_WINDOW_S)
    # a job never seen launching: the fallback block size
    law.pol.forget("o")
    d3 = law.pol.decide(law.now + 2 * DT, DT, {0: DeviceSignals(0, 1)},
                        [prod(50_000 * PROD_TPB), quiet])["o"]
    tpb = T.THREADS_PER_BLOCK
    assert d3.rate == pytest.approx((law.notes["limit"] * tpb + tpb) / T.LIMIT_WINDOW_S)


def test_tgs_original_sample_length_profiles_for_25_s() -> None:
    law = LawRun(sample_s=T.TGS_SAMPLE_S)
    d = law.run(24.0, 500_000)
    assert d.reason == "profile"
    d = law.run(40.0, 500_000)
    assert d.reason == "law" and law.notes["profiled_s"] >= 25 - DT


def test_tgs_off_without_production() -> None:
    pol = T.TgsLawPolicy()
    for i in range(10):
        d = pol.decide(i * DT, DT, {0: DeviceSignals(0, 0)}, [prod(0.0, nproc=0), opp()])
        assert d["o"].rate is None and d["o"].reason == "tgs-off"


# ------------------------------------------------------------------ static

class StaticRun:
    """A job that can do `cap` units/s unlimited; a rate limit below that binds."""

    def __init__(self, share: float = 0.3) -> None:
        self.pol = make_policy("static", static_share=share)
        self.now = 0.0
        self.last: Decision | None = None

    def run(self, seconds: float, cap: float) -> Decision:
        for _ in range(round(seconds / DT)):
            self.now += DT
            r = None if self.last is None else self.last.rate
            work = cap if r is None else min(cap, r)
            thr = 0.5 if r is not None and r < cap else 0.0
            self.last = self.pol.decide(self.now, DT, {}, [prod(1e6), opp(work, throttled=thr)])[
                "o"]
        assert self.last is not None
        return self.last


def test_static_ignores_start_up_and_follows_the_peak() -> None:
    st = StaticRun()
    d = st.run(S.WARMUP_S - DT, 1e4)            # framework start-up: slow, not measured
    assert d.rate is None and d.reason == "static-warmup"
    d = st.run(2.0, 2e5)                         # then its real speed
    assert d.rate == pytest.approx(0.3 * 2e5, rel=0.01)
    # held at its share for long past the horizon: the refresh keeps the peak
    rates = []
    for _ in range(round(3 * S.HORIZON_S / DT)):
        d = st.run(DT, 2e5)
        if d.reason == "static":
            rates.append(d.rate)
    assert min(rates) == pytest.approx(0.3 * 2e5, rel=0.01)
    assert max(rates) == pytest.approx(0.3 * 2e5, rel=0.01)
    # unlimited measurement costs about MEASURE_PERIODS periods per REFRESH_S
    measure = sum(1 for _ in range(round(S.REFRESH_S * 4 / DT))
                  if st.run(DT, 2e5).reason == "static-measure")
    assert measure == pytest.approx(4 * S.MEASURE_PERIODS, abs=S.MEASURE_PERIODS)
    # it gets faster (e.g. its neighbour left): the limit follows within one refresh
    d = st.run(S.REFRESH_S + 0.5, 4e5)
    assert d.rate == pytest.approx(0.3 * 4e5, rel=0.01)
    # slower again: the old peak expires after the horizon
    d = st.run(S.HORIZON_S + S.REFRESH_S + 0.5, 1e5)
    assert d.rate == pytest.approx(0.3 * 1e5, rel=0.01)


class DutyJob:
    """torch_train --duty 1:1 under the policy: steps of STEP work units at `cap` units/s
    (after a slow start-up), working 1 s (the step under way finishes) then pausing 1 s."""
    STEP = 4e3

    def __init__(self) -> None:
        self.pol = make_policy("static", static_share=0.3)
        self.now, self.rate, self.steps = 0.0, None, 0
        self.done, self.on_since, self.paused_until = 0.0, 0.0, -1.0

    def period(self) -> Decision:
        self.now += DT
        cap = 1e3 if self.now < 1.5 else 2e5          # PyTorch's first steps are slow
        limit = cap if self.rate is None else min(cap, self.rate)
        work, left = 0.0, DT
        while left > 1e-9 and self.now - DT + (DT - left) >= self.paused_until:
            t = min(left, (self.STEP - self.done) / limit)
            self.done += limit * t
            work += limit * t
            left -= t
            if self.done >= self.STEP - 1e-6:
                self.done, self.steps = 0.0, self.steps + 1
                at = self.now - left
                if at - self.on_since >= 1.0:          # the on-phase is over: pause 1 s
                    self.paused_until, self.on_since = at + 1.0, at + 1.0
        d = self.pol.decide(self.now, DT, {}, [prod(1e6), opp(
            work / DT, throttled=0.5 if self.rate is not None and self.rate < cap else 0.0)])[
            "o"]
        self.rate = d.rate
        return d


def test_static_measures_a_job_that_pauses_while_it_works() -> None:
    """A measurement burst that meets a pause (or a held step's last sliver) measures
    nothing: retried, not believed, so the job gets its share of what it does when working."""
    job = DutyJob()
    for _ in range(round(12 / DT)):
        job.period()
    before, rates = job.steps, []
    for _ in range(round(10 / DT)):
        if (d := job.period()).reason == "static":
            rates.append(d.rate)
    assert min(rates) == pytest.approx(0.3 * 2e5, rel=0.05)
    assert max(rates) == pytest.approx(0.3 * 2e5, rel=0.05)
    # 30 % of 2e5 units/s half the time: 7.5 steps/s (one held to the start-up's peak: 0.1)
    assert job.steps - before >= 0.7 * 10 * 0.5 * 0.3 * 2e5 / DutyJob.STEP


def test_static_no_gate_no_cap_and_forgets() -> None:
    st = StaticRun(0.5)
    d = st.run(3.0, 2e5)
    assert d.gate == 0 and d.inflight_cap == 0 and d.rate == pytest.approx(1e5, rel=0.01)
    st.pol.forget("o")
    d = st.pol.decide(st.now + DT, DT, {}, [prod(1e6), opp(2e5)])["o"]
    assert d.reason == "static-warmup"
