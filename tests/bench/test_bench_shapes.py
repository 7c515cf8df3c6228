"""The new scenarios, the suite's time budget, the TGS convergence and latency reports and the
LAS comparison's bookkeeping, on synthetic data (no processes)."""

from __future__ import annotations

import pytest
from tgs.bench import las_compare as LC
from tgs.bench import scenarios as SC
from tgs.bench.harness import JobRun, RunRecord
from tgs.bench.report import ScenarioResult, latency_markdown, tgs_convergence, tgs_markdown
from tgs.testbed.workload import ProgressRecord

pytestmark = pytest.mark.timeout(20)


@pytest.mark.parametrize("key", SC.KEYS)
@pytest.mark.parametrize("budget", [SC.FULL, SC.QUICK])
def test_every_scenario_builds_for_every_policy(key: str, budget: SC.Budget) -> None:
    for pol in (None, *SC.POLICIES):
        sc = SC.build(key, budget, pol)
        assert sc.key == key and sc.production and sc.opportunistic
        for j in sc.jobs:
            assert j.seconds > 0 and j.start_s >= 0
            j.spec.argv()                       # a valid command line
        # the measurement window (production's run) lies inside the opportunistic job's run
        p, o = sc.production[0], sc.opportunistic[0]
        assert o.start_s <= p.start_s and p.start_s + p.seconds <= o.start_s + o.seconds


def test_tgs_gets_time_to_converge_in_the_full_suite() -> None:
    for key in SC.KEYS:
        tgs, other = SC.build(key, SC.FULL, "tgs"), SC.build(key, SC.FULL, "adaptive")
        if key in ("S3", "S4"):                # their schedule is the experiment
            assert tgs.length_s == other.length_s
        else:
            assert tgs.production[0].seconds >= SC.FULL.tgs_prod_s


def test_shape_scenarios_use_their_shapes() -> None:
    argv = {k: " ".join(SC.build(k, SC.FULL, "adaptive").production[0].spec.argv())
            for k in ("S7", "S8", "S9", "S10")}
    assert "--sync-every 10" in argv["S7"] and "--ahead 3" in argv["S7"]
    assert "--streams 2" in argv["S8"]
    assert "--launch graph" in argv["S9"]
    assert "--kernel-mix 1" in argv["S10"]
    opp = SC.build("S11", SC.FULL, "adaptive").opportunistic[0].spec
    assert opp.kernel_us > 1000 * SC.PROD.gap_ms      # every kernel longer than the gaps
    for key, load in SC.INFERENCE_LOADS.items():
        sc = SC.build(key, SC.FULL, "adaptive")
        assert sc.latency
        spec = sc.production[0].spec
        service = SC.REQUEST_GPU_S + SC.REQUEST_OVERHEAD_S
        assert spec.poisson_rps * service == pytest.approx(load, rel=1e-3)


def test_suite_fits_its_time_budget() -> None:
    """The plan (scenario lengths + per-run overhead) keeps the full suite under 20 minutes
    with the LAS comparison and the micro-benchmarks, and --quick under 5."""
    las_full = 2 * (sum(g for _, g in LC.STREAM) + 3)
    las_quick = 2 * (sum(g for _, g in LC.STREAM) * LC.QUICK_SCALE + 3)
    assert SC.estimate_s(SC.FULL) + las_full + 30 < 20 * 60
    assert SC.estimate_s(SC.QUICK) + las_quick < 5 * 60


# ------------------------------------------------------------------ synthetic runs

def _job(name: str, role: str, rate: float, t0: float, t1: float, pid: int,
         lat: dict[str, float] | None = None) -> JobRun:
    run = JobRun(name, role, 1, 0.0, pid=pid)
    t, prog = t0, []
    while t < t1 - 1e-9:
        t += 0.05
        prog.append(ProgressRecord(t - t0, round((t - t0) * rate), 0.05, 0, rate, mono_s=t))
    run.progress = prog
    run.summary = {"it_per_s": rate, "elapsed_s": t1 - t0,
                   "lat_ms": lat or {"p50": 1.0, "p99": 2.0, "p999": 3.0}}
    return run


def _busy(frac_of_t, t0: float, t1: float) -> list[tuple[float, float]]:
    out, b, t = [(t0, 0.0)], 0.0, t0
    while t < t1 - 1e-9:
        b += frac_of_t(t) * 0.1
        t += 0.1
        out.append((t, b))
    return out


def test_tgs_convergence_reports_the_steady_part_separately() -> None:
    """Production at solo speed all along; the opportunistic job gets nothing for the law's
    first 10 s, then 30 % of the GPU: whole-window harvest 0.375, steady 0.75."""
    prod = _job("prod", "production", 100.0, 100.0, 120.0, 1)
    opp = _job("opp", "opportunistic", 10.0, 99.0, 121.0, 2)
    rec = RunRecord("S1", "tgs", "tgs", 22.0, 99.0, {"prod": prod, "opp": opp},
                    _busy(lambda t: 0.6, 99, 121),
                    {2: _busy(lambda t: 0.3 if t >= 110 else 0.0, 99.0, 121.0)},
                    {"0": {"started": 100.0, "profiled_s": 6.0, "converged_s": 10.0}})
    solo = RunRecord("S1", "solo:prod", None, 10, 0.0, {"prod": _job("prod", "production",
                                                                      100.0, 0.0, 10.0, 3)},
                     _busy(lambda t: 0.6, 0.0, 10.0), {})
    osolo = RunRecord("S1", "solo:opp", None, 10, 0.0, {"opp": _job("opp", "opportunistic",
                                                                     40.0, 0.0, 10.0, 4)},
                      [], {})
    res = ScenarioResult("S1", "t", {"tgs": SC.build("S1", SC.FULL, "tgs")},
                         {"prod": solo, "opp": osolo}, None, {"tgs": rec})
    t = tgs_convergence(res, rec, ["prod"], ["opp"], (100.05, 120.0), 0.6)
    assert t["profiled_s"] == 6.0 and t["converged_s"] == 10.0
    assert t["steady_s"] == pytest.approx(10.0, abs=0.1)
    assert t["prod_vs_solo"] == pytest.approx(1.0, abs=0.02)
    assert t["harvest"] == pytest.approx(0.75, abs=0.03)
    assert t["opp_vs_solo"] == pytest.approx(0.25, abs=0.02)
    # never converged: no steady figures
    rec.policy_state = {"0": {"started": 100.0, "profiled_s": 6.0, "converged_s": -1}}
    t = tgs_convergence(res, rec, ["prod"], ["opp"], (100.05, 120.0), 0.6)
    assert t["converged_s"] is None and "harvest" not in t
    md = tgs_markdown({"S1": {"policies": {"tgs": {"ran_s": 22.0, "tgs": {
        "profiled_s": 6.0, "converged_s": 10.0, "steady_s": 10.0, "prod_vs_solo": 1.0,
        "harvest": 0.75, "opp_vs_solo": 0.25}}}}})
    assert "| S1 | 22 | 6.0 | 10.0 | 10.0 | 1.00 | 0.75 | 0.25 |" in md


def test_latency_table_shows_percentiles_against_solo() -> None:
    summary = {"S12": {"latency": True, "baseline": {"prod_lat_ms": {"prod": {
        "p50": 1.0, "p99": 2.0, "p999": 4.0}}}, "policies": {"adaptive": {
            "prod_lat_ms": {"prod": {"p50": 1.1, "p99": 2.4, "p999": 6.0}},
            "p50_vs_solo": 1.1, "p99_vs_solo": 1.2, "p999_vs_solo": 1.5,
            "prod_vs_solo": 1.0, "harvest": 0.5, "opp_vs_solo": 0.3}}},
        "S1": {"latency": False, "baseline": {}, "policies": {}}}
    md = latency_markdown(summary)
    assert "| S12 | solo | 1.00 | 2.00 | 4.00 | 1.00 | - | - |" in md
    assert "| S12 | adaptive | 1.10 (x1.10) | 2.40 (x1.20) | 6.00 (x1.50) | 1.00 | 0.50 | 0.30 |" \
        in md
    assert "S1 " not in md


def test_las_stream_and_completion_times() -> None:
    jobs = LC.stream_jobs()
    assert [j.start_s for j in jobs] == [a for a, _ in LC.STREAM]
    assert [j.iters for j in jobs] == [round(g / LC.ITER_GPU_S) for _, g in LC.STREAM]
    quick = LC.stream_jobs(LC.QUICK_SCALE)
    assert quick[-1].start_s == pytest.approx(LC.STREAM[-1][0] * LC.QUICK_SCALE)
    # two jobs: arrive at 0 and 1 (t0 = 50), end at 54 and 52.5
    a = _job("j0", "opportunistic", 200.0, 50.0, 54.0, 1)
    b = _job("j1", "opportunistic", 200.0, 51.5, 52.5, 2)
    defs = [LC.JobDef("j0", "opportunistic", SC.OPP, 0.0, 30.0, iters=800),
            LC.JobDef("j1", "opportunistic", SC.OPP, 1.0, 30.0, iters=200)]
    rec = RunRecord("LAS", "las", "las", 5.0, 50.0, {"j0": a, "j1": b}, [], {})
    s = LC.summarise(rec, defs)
    assert s["jct_s"]["j0"] == pytest.approx(4.0, abs=0.06)
    assert s["jct_s"]["j1"] == pytest.approx(1.5, abs=0.06)
    assert s["mean_jct_s"] == pytest.approx(2.75, abs=0.06)
    assert s["p95_jct_s"] == pytest.approx(4.0, abs=0.06)
    assert s["finished"] == 2
    b.summary = None                                  # unfinished: not counted
    assert LC.summarise(rec, defs)["finished"] == 1
    assert LC.quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
