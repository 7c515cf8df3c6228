"""The workload shapes on the simulated driver: run-ahead, streams, graph replay, kernel mix,
Poisson inference.  Short runs; the assertions are about structure and the timing model with
wide margins (a loaded 2-core machine), never about speed."""

from __future__ import annotations

from pathlib import Path

import pytest
from tgs.testbed.workload import WorkloadSpec, run_workload

pytestmark = pytest.mark.timeout(60)


def _run(spec: WorkloadSpec, env: dict[str, str], workload_bin: Path):
    spec.binary = workload_bin
    return run_workload(spec, env=env, timeout=45)


def test_run_ahead_overlaps_host_time_with_gpu_time(sim_env: dict[str, str],
                                                    workload_bin: Path) -> None:
    """4 ms of GPU and 3 ms of host per iteration: synchronizing every iteration costs ~7 ms,
    running ahead overlaps them (~4 ms, GPU-bound)."""
    base = dict(kernels=4, kernel_us=1000, gap_ms=3, iters=60)
    sync = _run(WorkloadSpec(**base), sim_env, workload_bin)            # type: ignore[arg-type]
    ahead = _run(WorkloadSpec(**base, sync_every=10, ahead=3), sim_env,   # type: ignore[arg-type]
                 workload_bin)
    assert ahead.start["config"]["sync_every"] == 10 and ahead.start["config"]["ahead"] == 3
    assert ahead.iters == sync.iters == 60
    assert ahead.summary["kernels"] == sync.summary["kernels"] == 4 * 61
    # one latency sample per sync group: its time per iteration
    assert ahead.lat_ms["p50"] < 0.8 * sync.lat_ms["p50"]
    assert ahead.it_per_s > 1.2 * sync.it_per_s


def test_several_streams_and_graph_replay_do_the_same_work(sim_env: dict[str, str],
                                                           workload_bin: Path) -> None:
    base = dict(kernels=4, kernel_us=500, gap_ms=1, iters=20)
    plain = _run(WorkloadSpec(**base), sim_env, workload_bin)            # type: ignore[arg-type]
    multi = _run(WorkloadSpec(**base, streams=3), sim_env, workload_bin)  # type: ignore[arg-type]
    graph = _run(WorkloadSpec(**base, launch="graph", stream=True), sim_env,  # type: ignore[arg-type]
                 workload_bin)
    assert multi.start["config"]["streams"] == 3
    assert graph.start["launch_symbol"] in ("cuGraphLaunch", "cuGraphLaunch_ptsz")
    for r in (multi, graph):
        assert r.summary["work_units"] == plain.summary["work_units"]
        assert r.lat_ms["p50"] == pytest.approx(plain.lat_ms["p50"], rel=0.5)


def test_kernel_mix_follows_the_documented_distribution(sim_env: dict[str, str],
                                                        workload_bin: Path) -> None:
    spec = WorkloadSpec(kernels=40, kernel_mix=2, gap_ms=0, iters=3, seed=5)
    res = _run(spec, sim_env, workload_bin)
    geo = res.start["geometry"]
    assert 5000 <= geo["longest_kernel_us"] <= 20000
    # 38 short kernels of 10-100 us and 2 long ones of 5-20 ms
    assert 10000 + 38 * 10 <= geo["iteration_gpu_us"] <= 40000 + 38 * 100
    # the sequence is fixed by the seed (replayed every iteration, same across runs)
    again = _run(WorkloadSpec(kernels=40, kernel_mix=2, gap_ms=0, iters=2, seed=5), sim_env,
                 workload_bin)
    assert again.start["geometry"]["iteration_gpu_us"] == geo["iteration_gpu_us"]
    other = _run(WorkloadSpec(kernels=40, kernel_mix=2, gap_ms=0, iters=2, seed=6), sim_env,
                 workload_bin)
    assert other.start["geometry"]["iteration_gpu_us"] != geo["iteration_gpu_us"]
    # the iteration takes about its GPU time
    assert res.lat_ms["p50"] == pytest.approx(geo["iteration_gpu_us"] / 1e3, rel=0.5)


def test_poisson_inference_reports_request_latency(sim_env: dict[str, str],
                                                   workload_bin: Path) -> None:
    """2 ms requests at 100/s (20 % load): ~100 requests in 1 s, latency from arrival (>= the
    request's GPU time), p50 <= p99 <= p99.9."""
    res = _run(WorkloadSpec(kernels=2, kernel_us=1000, poisson_rps=100, seconds=1.0, seed=3),
               sim_env, workload_bin)
    sm = res.summary
    assert sm["offered_rps"] == 100 and sm["request_gpu_ms"] == pytest.approx(2.0)
    assert 50 <= res.iters <= 160
    lat = res.lat_ms
    assert 1.8 <= lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    # open loop: the same arrivals (seed) at 80 % load queue behind each other: the tail
    # grows by more than the longer service time alone
    slow = _run(WorkloadSpec(kernels=2, kernel_us=4000, poisson_rps=100, seconds=1.0, seed=3),
                sim_env, workload_bin)
    assert slow.iters >= 50
    assert slow.lat_ms["p99"] > lat["p99"] + 6.0
