"""S15: a numba-cuda program as a scenario's opportunistic job.  Its schedule, command line,
solo baseline and skip (no processes), and the numba job itself on the simulator under the
shim (needs numba-cuda: skipped without it)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from tgs.bench import numba_job as NJ
from tgs.bench import scenarios as SC
from tgs.bench import suite as SU
from tgs.bench.harness import job_argv
from tgs.intercept import segment
from tgs.testbed.workload import parse_output

pytestmark = pytest.mark.timeout(120)


def test_s15_runs_a_numba_opportunistic_job_next_to_s1s_production() -> None:
    for budget in (SC.FULL, SC.QUICK):
        sc = SC.build("S15", budget, "adaptive")
        (prod,), (opp,) = sc.production, sc.opportunistic
        assert opp.numba and not prod.numba and SC.needs_numba(sc)
        assert prod.spec.argv()[1:] == SC.build("S1", budget, "adaptive").production[0] \
            .spec.argv()[1:]
        # the numba job gets its start-up before production joins
        assert prod.start_s - opp.start_s == pytest.approx(budget.lead_s + SC.NUMBA_START_S)
        argv = job_argv(opp)
        assert argv[:3] == [sys.executable, "-m", "tgs.bench.numba_job"]
        assert argv[argv.index("--kernels") + 1] == "10"
        assert float(argv[argv.index("--kernel-us") + 1]) == 500.0
        assert float(argv[argv.index("--seconds") + 1]) == opp.seconds
    assert "S15" in SC.KEYS and "S15" not in SC.QUICK_KEYS
    # the full-suite plan counts it; the quick plan leaves it out
    assert SC.estimate_s(SC.FULL) == pytest.approx(
        SC.estimate_s(SC.FULL, [k for k in SC.ALL_KEYS if k != "S15"])
        + SC.estimate_s(SC.FULL, ["S15"]) - _shared_solo(SC.FULL))
    assert SC.estimate_s(SC.QUICK) == SC.estimate_s(SC.QUICK, SC.QUICK_KEYS)


def test_s16_runs_numba_as_production_only_when_named() -> None:
    for budget in (SC.FULL, SC.QUICK):
        for pol in (None, *SC.POLICIES):
            sc = SC.build("S16", budget, pol)
            (prod,), (opp,) = sc.production, sc.opportunistic
            assert prod.numba and not opp.numba
            assert job_argv(prod)[:3] == [sys.executable, "-m", "tgs.bench.numba_job"]
            assert float(job_argv(prod)[job_argv(prod).index("--gap-ms") + 1]) == 1.7
            # the opportunistic job outlasts production's run by its numba start-up and more
            assert (opp.start_s + opp.seconds) - (prod.start_s + prod.seconds) \
                >= SC.NUMBA_START_S + budget.lead_s
    assert "S16" in SC.EXTRA_KEYS and "S16" not in SC.KEYS


def _shared_solo(budget: SC.Budget) -> float:
    """S15's production solo is S1's: counted once in the whole plan."""
    return min(budget.prod_s, budget.solo_s) + SC.RUN_OVERHEAD_S


def test_numba_solo_baseline_is_not_the_workloads() -> None:
    """Same shape as S1's opportunistic job, but another program: its own solo run."""
    s1 = SC.build("S1", SC.FULL, None).opportunistic[0]
    s15 = SC.build("S15", SC.FULL, None).opportunistic[0]
    assert s1.spec.argv()[1:] == s15.spec.argv()[1:]
    assert SU._solo_key(s1, 6.0) != SU._solo_key(s15, 6.0)


def test_suite_skips_s15_with_a_line_without_numba(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SU, "numba_available", lambda: False)
    lines: list[str] = []
    suite = SU.Suite(SU.SuiteConfig(keys=["S15"], budget=SC.QUICK, out=tmp_path,
                                    log=lines.append))
    try:
        assert suite.scenario("S15") is None
    finally:
        suite.close()
    assert lines == ["S15: skipped: numba-cuda is not installed (pip install -e '.[test]' "
                     "installs it)"]


def test_grid_follows_the_simulators_time_model() -> None:
    assert NJ.grid_for(500) * NJ.BLOCK == pytest.approx(500_000, rel=0.001)
    assert NJ.grid_for(0.001) == 1


@pytest.mark.slow
def test_numba_job_reports_like_the_workload_under_the_shim(tmp_path: Path,
                                                            sim_env: dict[str, str],
                                                            shim_lib: Path) -> None:
    if importlib.util.find_spec("numba_cuda") is None:
        pytest.skip("numba-cuda is not installed (pip install -e '.[test]' installs it)")
    seg = segment.create(tmp_path / "nb.seg", "numba-job", nslots=4)
    try:
        env = dict(sim_env, LD_PRELOAD=str(shim_lib), TGS_SEGMENT=str(seg.path))
        p = subprocess.run([sys.executable, "-m", "tgs.bench.numba_job", "--iters", "20",
                            "--kernels", "3", "--kernel-us", "200", "--gap-ms", "1",
                            "--report-ms", "5"], env=env, capture_output=True, text=True,
                           timeout=100)
        assert p.returncode == 0, p.stderr[-2000:]
        start, summary, progress, error = parse_output(p.stdout)
        assert error is None and start is not None and summary is not None
        assert start["device_name"] == "TGS Simulated GPU"
        assert summary["iters"] == 20 and summary["kernels"] == 60
        assert summary["it_per_s"] > 0 and summary["lat_ms"]["p99"] >= summary["lat_ms"]["p50"]
        assert progress and progress[-1].iters <= 20
        # its launches went through the shim: the job's counters hold them, blocks included
        # (the warm-up launch too), in the retired totals once the process exited
        h = seg.seg_header
        grid = start["geometry"]["grid"]
        assert int(h.retired_launches) == 61
        assert int(h.retired_blocks) == 61 * grid
        assert int(h.retired_work) == 61 * grid * NJ.BLOCK
    finally:
        seg.close()
