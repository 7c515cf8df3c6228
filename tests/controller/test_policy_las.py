"""`las` (discretised 2D-LAS among opportunistic jobs) as a pure object on a fake clock."""

from __future__ import annotations

import pytest
from tgs.controller.policy import las as L
from tgs.controller.policy import make_policy
from tgs.controller.policy.base import GATE_FIT, GATE_PUBLISH, Decision, DeviceSignals, JobSignals

DT = 0.05


def opp(name: str, work: float = 1e6, nproc: int = 1) -> JobSignals:
    return JobSignals(name, "opportunistic", 1, 0, nproc=nproc, work_rate=work,
                      launch_rate=work / 5e5)


def prod(work: float = 2e6) -> JobSignals:
    return JobSignals("p", "production", 1, 0, nproc=1, work_rate=work, launch_rate=work / 1e6,
                      busy=1)


class Clock:
    """Jobs that run at full speed when allowed and do nothing when paused."""

    def __init__(self, pol: L.LasPolicy) -> None:
        self.pol, self.now = pol, 0.0
        self.last: dict[str, Decision] = {}

    def step(self, names: list[str], extra: list[JobSignals] | None = None,
             sig: DeviceSignals | None = None) -> dict[str, Decision]:
        self.now += DT
        jobs = [opp(n, 0.0 if self.last.get(n, Decision()).reason == "las-wait" else 1e6)
                for n in names] + (extra or [])
        self.last = self.pol.decide(self.now, DT, {0: sig or DeviceSignals(0)}, jobs)
        return self.last

    def run(self, seconds: float, names: list[str], **kw: object) -> dict[str, Decision]:
        d: dict[str, Decision] = {}
        for _ in range(round(seconds / DT)):
            d = self.step(names, **kw)      # type: ignore[arg-type]
        return d

    def running(self) -> set[str]:
        return {n for n, d in self.last.items() if d.reason != "las-wait"}


def test_a_new_job_preempts_one_with_more_service_and_demotes_by_threshold() -> None:
    pol = L.LasPolicy(thresholds=(1.0, 3.0), starve_k=100, starve_min_s=100)
    c = Clock(pol)
    c.run(5.0, ["a"])                                # a alone: 5 GPU-s, bottom queue
    assert pol.jobs["a"].queue == 2
    c.run(0.5, ["a", "b"])                           # b arrives: top queue, runs alone
    assert c.running() == {"b"}
    assert c.last["a"].rate == L.PAUSE_RATE and c.last["a"].reason == "las-wait"
    c.run(1.0, ["a", "b"])                           # b crosses 1 GPU-s: queue 1, still above a
    assert pol.jobs["b"].queue == 1 and c.running() == {"b"}
    c.run(2.0, ["a", "b"])                           # b crosses 3 GPU-s: same queue as a
    assert pol.jobs["b"].queue == 2
    assert c.running() == {"a"}                      # FIFO within a queue: a arrived first
    assert pol.jobs["b"].attained == pytest.approx(3.0, abs=0.11)


def test_fifo_within_the_top_queue_and_short_jobs_finish_first() -> None:
    """Two jobs of 0.5 and 4 GPU-s: under LAS the short one ends at ~0.5 s after it arrives
    (it does not share the GPU with the long one), so mean completion beats sharing."""
    pol = L.LasPolicy(thresholds=(1.0, 3.0), starve_k=100, starve_min_s=100)
    c = Clock(pol)
    c.run(1.5, ["long"])                             # long: 1.5 GPU-s, queue 1
    done_short = None
    for i in range(40):
        c.step(["long", "short"])
        if pol.jobs["short"].attained >= 0.5:
            done_short = (i + 1) * DT
            break
    assert done_short is not None and done_short <= 0.55 + DT
    assert pol.jobs["long"].attained == pytest.approx(1.5, abs=0.06)


def test_starvation_bound_promotes_a_waiting_job() -> None:
    pol = L.LasPolicy(thresholds=(1.0,), starve_k=2.0, starve_min_s=1.0)
    c = Clock(pol)
    c.run(1.5, ["a"])                                # a: 1.5 GPU-s, queue 1
    assert pol.jobs["a"].queue == 1
    pol_exec = pol.jobs["a"].executed
    # a stream of fresh jobs would keep a waiting forever without the bound
    waited = 0.0
    names = ["a", "n0"]
    for k in range(1, 100):
        c.step(names)
        if "a" in c.running():
            break
        waited += DT
        if k % 10 == 0:                              # a new short job every 0.5 s
            names = ["a", f"n{k}"]
    assert "a" in c.running()
    # promoted after max(starve_min_s, starve_k x executed) = 3 s of waiting
    assert waited == pytest.approx(2.0 * pol_exec, abs=4 * DT)   # within a few periods
    assert pol.jobs["a"].queue == 0


def test_an_idle_head_does_not_hold_the_gpu() -> None:
    pol = L.LasPolicy()
    c = Clock(pol)
    c.step(["a", "b"])
    for _ in range(L.IDLE_PERIODS + 2):              # a (first in order) launches nothing
        c.now += DT
        c.last = pol.decide(c.now, DT, {0: DeviceSignals(0)}, [opp("a", 0.0), opp("b", 1e6)])
    assert c.running() == {"a", "b"}


def test_production_is_protected_as_by_the_default_policy() -> None:
    pol = make_policy("las")
    c = Clock(pol)                                   # type: ignore[arg-type]
    sig = DeviceSignals(0, 1, busy_seq=10, gap_pred_ns=1_500_000)
    d = c.run(1.0, ["a", "b"], extra=[prod()], sig=sig)
    assert d["p"].gate == GATE_PUBLISH and d["p"].rate is None
    run = [n for n in ("a", "b") if d[n].reason != "las-wait"]
    assert run == ["a"]
    assert d["a"].gate & GATE_FIT                    # the allowed job is gated by FIT as usual
    assert d["b"].rate == L.PAUSE_RATE


def test_ended_jobs_are_dropped_and_thresholds_checked() -> None:
    pol = L.LasPolicy()
    c = Clock(pol)
    c.run(0.5, ["a", "b"])
    c.now += DT
    pol.decide(c.now, DT, {0: DeviceSignals(0)}, [opp("a", 0.0, nproc=0), opp("b")])
    assert "a" not in pol.jobs
    with pytest.raises(ValueError):
        L.LasPolicy(thresholds=(3.0, 1.0))


def test_thresholds_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from tgs.controller.policy import las_thresholds
    monkeypatch.delenv("TGS_LAS_THRESHOLDS", raising=False)
    assert las_thresholds() == L.THRESHOLDS
    monkeypatch.setenv("TGS_LAS_THRESHOLDS", "0.3, 0.9")
    assert las_thresholds() == (0.3, 0.9)
    assert make_policy("las").thresholds == (0.3, 0.9)        # type: ignore[attr-defined]
    monkeypatch.setenv("TGS_LAS_THRESHOLDS", "x")
    with pytest.raises(ValueError):
        las_thresholds()
