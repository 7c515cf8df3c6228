"""tgs-workload on the simulated driver: output, timing model, every resolve and launch path."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tgs.testbed.workload import (
    WorkloadError,
    WorkloadSpec,
    run_workload,
    start_workload,
)

pytestmark = pytest.mark.timeout(60)

MiB = 1 << 20


def _run(spec: WorkloadSpec, env: dict[str, str], workload_bin: Path):
    if spec.resolve != "link":
        spec.binary = workload_bin
    return run_workload(spec, env=env, timeout=45)


def test_start_and_summary_are_well_formed(sim_env: dict[str, str], workload_bin: Path) -> None:
    res = _run(WorkloadSpec(kernels=2, kernel_us=300, gap_ms=0.5, iters=10, warmup=2,
                            name="job-a"), sim_env, workload_bin)
    st, sm = res.start, res.summary
    assert st["name"] == sm["name"] == "job-a"
    assert st["resolve"] == "proc" and st["getproc"] == "cuGetProcAddress_v2"
    assert st["device_name"] == "TGS Simulated GPU"
    assert st["config"]["kernels"] == 2 and st["config"]["launch"] == "kernel"
    # 300 us at 1 ns per thread and 256 threads per block: ceil(300000 / 256) blocks.
    assert st["geometry"]["grid"] == 1172 and st["geometry"]["block"] == 256
    assert sm["iters"] == 10 and sm["warmup_iters"] == 2
    assert sm["kernels"] == 2 * 12
    assert sm["work_units"] == 2 * 12 * 1172 * 256
    lat = res.lat_ms
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]
    assert sm["elapsed_s"] > 0 and res.it_per_s > 0
    assert sm["interrupted"] is False


def test_throughput_matches_the_model(sim_env: dict[str, str], workload_bin: Path) -> None:
    # 4 kernels x 1000 us + 2 ms gap = 6 ms per iteration -> ~166.7 it/s.
    res = _run(WorkloadSpec(kernels=4, kernel_us=1000, gap_ms=2, seconds=1.5), sim_env,
               workload_bin)
    # the model's speed; a loaded machine only slows it (the lower bound leaves room for that)
    expected = 1000.0 / 6.0
    assert 0.6 * expected <= res.it_per_s <= 1.15 * expected, res.summary
    assert 3.2 <= res.summary["busy_ms_mean"] <= 6.0, res.summary


def test_progress_lines_cover_the_run(sim_env: dict[str, str], workload_bin: Path) -> None:
    res = _run(WorkloadSpec(kernels=1, kernel_us=500, gap_ms=0.5, seconds=1.0, report_ms=200),
               sim_env, workload_bin)
    assert len(res.progress) >= 3
    iters = [p.iters for p in res.progress]
    assert iters == sorted(iters) and iters[-1] <= res.iters
    assert all(p.it_per_s > 0 and p.window_iters > 0 for p in res.progress)
    assert all(0.15 <= p.window_s <= 1.0 for p in res.progress)


@pytest.mark.parametrize(
    ("resolve", "per_thread", "cuda_version", "symbol"),
    [
        ("proc", False, None, "cuLaunchKernel"),
        ("proc", True, None, "cuLaunchKernel_ptsz"),
        ("proc", False, 13000, "cuLaunchKernel"),
        ("dlsym", False, None, "cuLaunchKernel"),
        ("dlsym", True, None, "cuLaunchKernel_ptsz"),
        ("link", False, None, "cuLaunchKernel"),
        ("link", True, None, "cuLaunchKernel_ptsz"),
    ],
)
def test_each_resolve_mode_runs(sim_env: dict[str, str], workload_bin: Path, resolve: str,
                                per_thread: bool, cuda_version: int | None, symbol: str) -> None:
    if resolve == "link" and not workload_bin.with_name("tgs-workload-linked").exists():
        pytest.fail("build/bin/tgs-workload-linked is missing: run `make`")
    res = _run(WorkloadSpec(kernels=2, kernel_us=200, gap_ms=0, iters=5, resolve=resolve,
                            per_thread=per_thread, cuda_version=cuda_version), sim_env,
               workload_bin)
    assert res.start["resolve"] == resolve
    assert res.start["config"]["per_thread"] is per_thread
    assert res.start["launch_symbol"] == symbol
    assert res.summary["kernels"] == 2 * 6


@pytest.mark.parametrize(
    ("launch", "extra"),
    [
        ("kernel", {}),
        ("ex", {}),
        ("coop", {}),
        ("graph", {}),
        ("graph", {"cuda_version": 11080}),  # cuGraphAddKernelNode (v1 params)
        ("ex", {"per_thread": True, "priority": -1}),
        ("kernel", {"stream": True}),
    ],
)
def test_each_launch_mode_takes_the_modelled_time(sim_env: dict[str, str], workload_bin: Path,
                                                  launch: str, extra: dict) -> None:
    res = _run(WorkloadSpec(kernels=3, kernel_us=1000, gap_ms=0, iters=15, launch=launch,
                            **extra), sim_env, workload_bin)
    assert res.start["config"]["launch"] == launch
    assert res.summary["kernels"] == 3 * 16
    # 3 kernels of 1 ms each per iteration; generous margins for a noisy machine.
    assert 2.4 <= res.summary["busy_ms_mean"] <= 5.0, res.summary


def test_cost_factor_scales_kernel_time(sim_env: dict[str, str], workload_bin: Path) -> None:
    base = WorkloadSpec(kernels=2, kernel_us=1000, gap_ms=0, iters=10)
    one = _run(base, sim_env, workload_bin)
    two = _run(WorkloadSpec(kernels=2, kernel_us=1000, gap_ms=0, iters=10, cost_factor=2.0),
               sim_env, workload_bin)
    ratio = two.summary["busy_ms_mean"] / one.summary["busy_ms_mean"]
    assert 1.4 <= ratio <= 3.0, (one.summary, two.summary)
    assert two.start["geometry"]["grid"] == one.start["geometry"]["grid"]
    assert two.start["geometry"]["spin_ns"] == 2 * one.start["geometry"]["spin_ns"]


def test_memory_footprint_shows_in_the_simulator(sim_env: dict[str, str],
                                                 workload_bin: Path) -> None:
    spec = WorkloadSpec(kernels=1, kernel_us=200, gap_ms=5, seconds=30, mem="256MiB",
                        alloc_chunk="64MiB", name="holder", binary=workload_bin)
    with start_workload(spec, env=sim_env) as holder:
        start = holder.wait_started(timeout=30)
        mem = start["mem"]
        assert mem["bytes"] == 256 * MiB and mem["chunks"] == 4
        assert mem["free_before"] - mem["free_after"] >= 256 * MiB
        # A second process sees the first one's footprint in cuMemGetInfo.
        probe = _run(WorkloadSpec(kernels=1, kernel_us=100, gap_ms=0, iters=1, warmup=0),
                     sim_env, workload_bin)
        assert probe.start["mem"]["total"] == mem["total"]
        assert probe.start["mem"]["free_before"] <= mem["total"] - 256 * MiB
        # SIGTERM ends the run early with a summary.
        res = holder.stop(timeout=20)
    assert res.summary["interrupted"] is True
    assert res.start["name"] == "holder"


def test_driver_errors_name_the_call(sim_env: dict[str, str], workload_bin: Path) -> None:
    env = dict(sim_env, TGS_SIM_MEM="64MiB")
    cmd = [str(workload_bin), "--iters", "1", "--mem", "1GiB", "--name", "oom"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    assert res.returncode == 1
    err = json.loads(res.stdout.strip().splitlines()[-1])
    assert err["type"] == "error" and err["name"] == "oom"
    assert err["call"] == "cuMemAlloc_v2" and err["result"] == "CUDA_ERROR_OUT_OF_MEMORY"
    assert "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY" in res.stderr


def test_missing_device_is_a_clear_error(sim_env: dict[str, str], workload_bin: Path) -> None:
    with pytest.raises(WorkloadError) as info:
        _run(WorkloadSpec(iters=1, device=7), sim_env, workload_bin)
    assert info.value.returncode == 1
    assert info.value.record is not None
    assert "device 7 does not exist" in info.value.record["error"]
    assert "device 7 does not exist" in info.value.stderr


def test_wrong_binary_for_resolve_mode(sim_env: dict[str, str], workload_bin: Path) -> None:
    res = subprocess.run([str(workload_bin), "--resolve", "link", "--iters", "1"], env=sim_env,
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 1
    assert "tgs-workload-linked" in res.stderr
