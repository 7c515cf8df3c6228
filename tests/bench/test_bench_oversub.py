"""OV1, the memory oversubscription benchmark (tgs.bench.oversub): its plan and command lines,
its metrics on synthetic series, tgs-workload's memory schedule, and one short real run on the
simulator."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from tgs.bench import oversub as OV
from tgs.bench import oversub_metrics as OM
from tgs.bench import scenarios as SC
from tgs.bench.main import cli
from tgs.bench.oversub_mem import MemUse, sim_memory
from tgs.intercept import simstate as SS

GiB = 1 << 30


# ------------------------------------------------------------------ plan and arguments

def _argv(job: SC.JobDef) -> str:
    return " ".join(job.spec.argv())


def test_plan_ramps_to_70_percent_and_fits_the_suite_budgets() -> None:
    for budget in (SC.FULL, SC.QUICK):
        p = OV.plan(budget)
        assert p.steps == 7
        assert p.free_at_s == pytest.approx(6 * p.step_s + p.hold_s)
        assert p.opp_s > p.lead_s + p.prod_s        # the opportunistic job outlives production
        assert p.after_s >= 1.5                     # room for recovery and a steady state after
        assert p.lead_s >= 2.0                      # the opportunistic job is set up by then
    assert OV.plan(SC.QUICK).opp_s < OV.plan(SC.FULL).opp_s
    # the OV scenario is planned in the suites, with its own three memory policies
    assert "OV1" in SC.ALL_KEYS and "OV1" not in SC.KEYS
    only = SC.estimate_s(SC.QUICK, ["OV1"], ["adaptive"])
    assert only == pytest.approx(OV.estimate_s(SC.QUICK, SC.RUN_OVERHEAD_S))
    assert SC.estimate_s(SC.QUICK) == pytest.approx(
        SC.estimate_s(SC.QUICK, [k for k in SC.QUICK_KEYS if k not in SC.OV_KEYS]) + only)


def test_jobs_per_memory_policy() -> None:
    p, total = OV.plan(SC.FULL), 16 * GiB
    step = total // 10 // OV.ALIGN * OV.ALIGN
    by = {pol: {j.name: j for j in OV.jobs(pol, p, total)} for pol in OV.MEM_POLICIES}
    for js in by.values():
        prod, opp = js["prod"], js["opp"]
        assert prod.production and not opp.production
        assert prod.start_s == p.lead_s and opp.start_s == 0.0
        a = _argv(prod)
        assert f"--mem {7 * step}" in a and f"--alloc-chunk {step}" in a
        assert f"--ramp-every-ms {p.step_s * 1e3!r}" in a and "--verify" in a
        assert f"--free-at-s {p.free_at_s!r}" in a
        assert f"--mem {6 * step}" in _argv(opp) and "--verify" in _argv(opp)
        assert opp.mem_quota == int(total * OV.OPP_QUOTA_FRAC) and prod.mem_quota == total
    assert "--managed" not in _argv(by["none"]["opp"]) + _argv(by["none"]["prod"])
    assert by["none"]["opp"].mem_total == 0
    assert "--managed" in _argv(by["tgs"]["opp"]) and "--prefer-device" in _argv(by["tgs"]["prod"])
    assert by["tgs"]["opp"].mem_total == 0
    assert by["ours"]["opp"].mem_total == total         # the shim makes it managed
    assert "--managed" not in _argv(by["ours"]["opp"]) + _argv(by["ours"]["prod"])
    [solo] = OV.jobs(None, p, total)
    assert solo.name == "prod" and solo.start_s == 0.0 and "--prefer-device" not in _argv(solo)
    assert all("--touch" not in _argv(j) for js in by.values() for j in js.values())
    # a real GPU: the kernels read their memory, or an evicted footprint would cost nothing
    real = OV.jobs("ours", p, total, OV.TOUCH_REAL)
    assert all(f"--touch {OV.TOUCH_REAL}" in _argv(j) for j in real)
    # the simulated GPU's bus is scaled with its size: migrations last as on 16 GiB at 25 GB/s
    env = OV.sim_env("sim")
    assert float(env["TGS_SIM_PCIE_GBPS"]) * 16 * GiB / int(env["TGS_SIM_MEM"]) == \
        pytest.approx(25.0)
    assert OV.sim_env("real") == {}


def test_cli_accepts_ov1_and_refuses_unknown_scenarios() -> None:
    res = CliRunner().invoke(cli, ["--scenario", "OV9", "--gpu", "sim"])
    assert res.exit_code == 2 and "ov1" in res.output.lower()
    assert "OV1" in CliRunner().invoke(cli, ["--help"]).output
    with pytest.raises(ValueError, match="unknown scenario"):
        OV.run("S1", SC.QUICK, "sim", Path("/nonexistent"), Path("/nonexistent"), print)


@pytest.mark.parametrize("args", [["--ramp-every-ms", "100"], ["--free-at-s", "1"],
                                  ["--managed"], ["--verify"], ["--prefer-device"],
                                  ["--touch", "64KiB"], ["--mem", "1M", "--touch", "6"],
                                  ["--mem", "1M", "--touch", "2"],
                                  ["--mem", "1M", "--touch", "4K", "--launch", "graph"],
                                  ["--mem", "1M", "--ramp-every-ms", "0"]])
def test_memory_schedule_usage_errors(workload_bin: Path, args: list[str]) -> None:
    res = subprocess.run([str(workload_bin), *args], capture_output=True, text=True, timeout=10)
    assert res.returncode == 2 and "tgs-workload:" in res.stderr


# ------------------------------------------------------------------ metrics (synthetic)

def _alloc(step: int, ok: bool, us: float, t: float, held: int = 0) -> dict[str, object]:
    return {"type": "alloc", "step": step, "ok": ok, "us": us, "mono_s": t, "held": held,
            "result": "CUDA_SUCCESS" if ok else "CUDA_ERROR_OUT_OF_MEMORY"}


def test_alloc_stats_latency_and_first_oom() -> None:
    ev = [_alloc(0, True, 20.0, 10.0), _alloc(1, True, 60_000.0, 10.5),
          _alloc(2, True, 40.0, 11.0, 2 << 20), _alloc(3, False, 5.0, 11.5, 3 << 20),
          {"type": "free", "mono_s": 12.0}]
    s = OM.alloc_stats(ev)
    assert s["steps"] == 4 and s["ok"] == 3
    assert s["lat_ms_p50"] == pytest.approx(0.04) and s["lat_ms_max"] == pytest.approx(60.0)
    assert s["oom"] == {"step": 3, "result": "CUDA_ERROR_OUT_OF_MEMORY", "held_mib": 3,
                        "t_s": pytest.approx(1.5)}
    assert OM.alloc_stats(ev[:3])["oom"] is None
    assert OM.event_time(ev, "alloc", ok_only=True, last=True) == 11.0
    assert OM.event_time(ev, "alloc", last=True) == 11.5
    assert OM.event_time(ev, "free") == 12.0 and OM.event_time(ev, "check") is None
    empty = OM.alloc_stats([])
    assert empty["steps"] == 0 and empty["lat_ms_p50"] != empty["lat_ms_p50"]   # NaN


def _cum(pieces: list[tuple[float, float, float]], dt: float = 0.025) -> list[tuple[float, float]]:
    """A cumulative iteration series: (t0, t1, rate) pieces sampled every dt."""
    out, it = [(pieces[0][0], 0.0)], 0.0
    for t0, t1, rate in pieces:
        t = t0
        while t < t1 - 1e-9:
            step = min(dt, t1 - t)
            t += step
            it += rate * step
            out.append((t, it))
    return out


def test_phase_rates_and_recovery_on_a_synthetic_run() -> None:
    # 200 it/s alone, 2 it/s while evicted (from 3 s), back to 200 it/s 0.5 s after the free
    cum = _cum([(0.0, 2.0, 200.0), (2.0, 3.0, 100.0), (3.0, 6.0, 2.0), (6.0, 6.5, 0.0),
                (6.5, 10.0, 200.0)])
    r = OM.phase_rates(cum, t_ramp=2.0, t_peak=3.0, t_free=6.0)
    assert r["before"] == pytest.approx(200.0, rel=0.01)
    assert r["during"] == pytest.approx(2.0, rel=0.05)
    assert r["after"] == pytest.approx(200.0, rel=0.01)
    rec = OM.recovery_time(cum, 6.0, 0.95 * r["before"])
    # the first 0.2 s window at >= 95 %: it ends between 0.5 + 0.19 and 0.5 + 0.2 + a sample
    assert 0.5 + 0.95 * OM.RECOVERY_WINDOW_S - 0.01 <= rec <= 0.5 + OM.RECOVERY_WINDOW_S + 0.03
    assert OM.recovery_time(cum, 6.0, 1000.0) is None          # never that fast
    assert OM.recovery_time([], 6.0, 1.0) is None
    assert OM.recovery_time(cum, None, 1.0) is None
    # no free (production OOMed before): no during/after window
    r2 = OM.phase_rates(cum, 2.0, None, None)
    assert r2["during"] != r2["during"] and r2["after"] != r2["after"]


def test_production_rates_leave_out_its_own_check_and_free() -> None:
    # 100 it/s while ramping (allocations at 1.0, 1.5, 2.0), 160 it/s at its peak, stalled in
    # its check and free (3.0-3.5)
    cum = _cum([(0.0, 2.0, 100.0), (2.0, 3.0, 160.0), (3.0, 3.5, 0.0), (3.5, 4.0, 160.0)])
    ev = [_alloc(0, True, 10.0, 1.0), _alloc(1, True, 10.0, 1.5), _alloc(2, True, 10.0, 2.0),
          {"type": "free", "begin_mono_s": 3.0, "mono_s": 3.5}]
    r = OM.prod_rates(cum, ev)
    assert r["ramp"] == pytest.approx(100.0, rel=0.01)
    assert r["peak"] == pytest.approx(160.0, rel=0.01)
    assert OM.event_time(ev, "free") == 3.5 and OM.event_time(ev, "free", begin=True) == 3.0
    # an OOM ends the ramp at the last allocation that succeeded
    r2 = OM.prod_rates(cum, [*ev[:2], _alloc(2, False, 1.0, 2.0), ev[3]])
    assert r2["ramp"] == pytest.approx(100.0, rel=0.01)
    assert r2["peak"] == pytest.approx((0.5 * 100 + 1.0 * 160) / 1.5, rel=0.01)
    nofree = OM.prod_rates(cum, ev[:3])
    assert nofree["peak"] != nofree["peak"]       # NaN: no free, no peak window


def test_memory_by_job_and_peaks() -> None:
    series = [(100.0, {11: MemUse(device=5)}),
              (100.5, {11: MemUse(device=5), 22: MemUse(resident=7, host=3)}),
              (101.0, {22: [0, 2, 8]})]
    mem = OM.memory_by_job(series, {"prod": 11, "opp": 22}, t0=100.0)
    assert mem["prod"] == [(0.0, 5, 0, 0), (0.5, 5, 0, 0), (1.0, 0, 0, 0)]
    assert mem["opp"] == [(0.0, 0, 0, 0), (0.5, 0, 7, 3), (1.0, 0, 2, 8)]
    assert OM.peak(mem["opp"]) == {"gpu": 7, "host": 8}
    assert OM.peak([]) == {"gpu": 0, "host": 0}
    assert OM.quantile([3.0, 1.0, 2.0], 0.5) == 2.0 and OM.quantile([5.0], 0.99) == 5.0


def test_sim_memory_splits_device_resident_and_host_bytes_by_process() -> None:
    """The memory sampler's reading of the simulator's state file (sim_state.h layout)."""
    buf = bytearray(SS.SimState.ctx.offset)
    procs = (SS.SimProc * SS.SIM_MAX_PROCS).from_buffer(buf, SS.SimState.proc.offset)
    procs[0].in_use, procs[0].pid = 1, 111
    procs[0].dev[0].mem_used = 700
    procs[3].in_use, procs[3].pid = 1, 333
    procs[3].dev[1].mem_used = 50                  # another device: not counted on device 0
    res = SS.SimResidency()
    for i, (proc, dev, size, resident) in enumerate([(3, 0, 100, 60), (3, 0, 40, 0),
                                                     (3, 1, 80, 80), (0, 0, 10, 10)]):
        m = res.r[i]
        m.in_use, m.proc, m.dev, m.size, m.resident = 1, proc, dev, size, resident
    res.r[4].in_use, res.r[4].proc, res.r[4].size = 0, 3, 999    # a freed slot
    res.hwm = 5
    mem = sim_memory(bytes(buf), res, 0)
    assert mem == {111: MemUse(device=700, resident=10, host=0),
                   333: MemUse(device=0, resident=60, host=80)}
    assert mem[333].on_gpu == 60 and mem[333].to_list() == [0, 60, 80]
    assert sim_memory(bytes(buf), None, 1)[333] == MemUse(device=50)


# ------------------------------------------------------------------ tgs-workload's schedule

def _lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.timeout(60)
def test_ramp_reports_each_allocation_and_the_oom_then_goes_on(
        sim_env: dict[str, str], workload_bin: Path) -> None:
    env = {**sim_env, "TGS_SIM_MEM": str(64 << 20)}
    res = subprocess.run([str(workload_bin), "--kernels", "1", "--kernel-us", "200",
                          "--gap-ms", "0", "--mem", "80MiB", "--alloc-chunk", "16MiB",
                          "--ramp-every-ms", "50", "--free-at-s", "0.5", "--verify",
                          "--seconds", "0.8"], env=env, capture_output=True, text=True,
                         timeout=50)
    assert res.returncode == 0, res.stderr
    lines = _lines(res.stdout)
    allocs = [x for x in lines if x["type"] == "alloc"]
    assert [a["ok"] for a in allocs] == [True] * 4 + [False]
    assert allocs[-1]["result"] == "CUDA_ERROR_OUT_OF_MEMORY" and allocs[-1]["held"] == 64 << 20
    assert all(b["t_s"] >= a["t_s"] + 0.045 for a, b in zip(allocs, allocs[1:]))
    kinds = [x["type"] for x in lines if x["type"] in ("check", "free", "summary")]
    assert kinds == ["check", "free", "summary"]
    check = next(x for x in lines if x["type"] == "check")
    assert check["ok"] and check["chunks"] == 4 and check["bytes"] == 64 << 20
    free = next(x for x in lines if x["type"] == "free")
    assert free["bytes"] == 64 << 20 and free["t_s"] >= 0.5
    assert check["mono_s"] >= free["begin_mono_s"] and free["mono_s"] >= check["mono_s"]


@pytest.mark.timeout(60)
def test_a_loop_behind_its_schedule_still_makes_every_step_before_the_free(
        sim_env: dict[str, str], workload_bin: Path) -> None:
    """One 150 ms iteration passes both the whole ramp (10 ms steps) and the free (at 50 ms):
    the ramp's due steps come first, so the schedule is never cut short by a slow loop."""
    res = subprocess.run([str(workload_bin), "--kernels", "1", "--kernel-us", "150000",
                          "--gap-ms", "0", "--mem", "48MiB", "--alloc-chunk", "16MiB",
                          "--ramp-every-ms", "10", "--free-at-s", "0.05", "--seconds", "0.4"],
                         env=sim_env, capture_output=True, text=True, timeout=50)
    assert res.returncode == 0, res.stderr
    lines = _lines(res.stdout)
    allocs = [x for x in lines if x["type"] == "alloc"]
    assert [a["ok"] for a in allocs] == [True] * 3
    free = next(x for x in lines if x["type"] == "free")
    assert free["chunks"] == 3 and free["bytes"] == 48 << 20
    assert free["begin_mono_s"] >= allocs[-1]["mono_s"]


@pytest.mark.timeout(60)
def test_managed_footprint_is_checked_at_the_end(sim_env: dict[str, str],
                                                 workload_bin: Path) -> None:
    res = subprocess.run([str(workload_bin), "--kernels", "1", "--kernel-us", "200",
                          "--gap-ms", "0", "--mem", "40MiB", "--alloc-chunk", "16MiB",
                          "--prefer-device", "--verify", "--seconds", "0.3"], env=sim_env,
                         capture_output=True, text=True, timeout=50)
    assert res.returncode == 0, res.stderr
    lines = _lines(res.stdout)
    assert lines[0]["config"]["managed"] and lines[0]["config"]["prefer_device"]
    assert [x["type"] for x in lines][-2:] == ["summary", "check"]
    assert lines[-1]["ok"] and lines[-1]["chunks"] == 3 and lines[-1]["bytes"] == 40 << 20


@pytest.mark.timeout(60)
def test_touch_kernels_read_the_footprint_and_leave_it_intact(sim_env: dict[str, str],
                                                               workload_bin: Path) -> None:
    res = subprocess.run([str(workload_bin), "--kernels", "2", "--kernel-us", "200",
                          "--gap-ms", "0", "--mem", "40MiB", "--alloc-chunk", "16MiB",
                          "--managed", "--verify", "--touch", "64KiB", "--iters", "20"],
                         env=sim_env, capture_output=True, text=True, timeout=50)
    assert res.returncode == 0, res.stderr
    lines = _lines(res.stdout)
    assert lines[0]["config"]["touch_stride"] == 64 << 10
    summary = next(x for x in lines if x["type"] == "summary")
    # one touch kernel per chunk (3) per iteration, warm-up included; the spin kernels apart
    assert summary["touch_kernels"] == 3 * (20 + summary["warmup_iters"])
    assert summary["kernels"] == 2 * (20 + summary["warmup_iters"])
    assert lines[-1]["type"] == "check" and lines[-1]["ok"]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="no CUDA toolkit ptxas")
def test_touch_kernel_assembles_with_ptxas(workload_bin: Path, tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    out = subprocess.run([str(workload_bin), "--print-ptx"], capture_output=True, text=True,
                         timeout=10).stdout
    assert ".entry tgs_touch(" in out and "ld.volatile.global.u32" in out
    ptx.write_text(out)
    for arch in ("sm_75", "sm_90"):
        res = subprocess.run(["ptxas", f"-arch={arch}", str(ptx), "-o",
                              str(tmp_path / f"{arch}.cubin")],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr


# ------------------------------------------------------------------ one short real run

@pytest.mark.timeout(150)
def test_short_ov1_run_on_the_simulator(tmp_path: Path, shim_lib: Path, sim_lib: Path,
                                        workload_bin: Path) -> None:
    """Under `none` production OOMs; under `ours` all its allocations succeed, and the
    opportunistic job lives to the end with its data intact."""
    budget = dataclasses.replace(SC.QUICK, oversub_scale=0.2)
    out, work = tmp_path / "out", tmp_path / "work"
    work.mkdir()
    res = OV.run("OV1", budget, "sim", out, work, lambda s: None, policies=("none", "ours"))
    assert not res.failed, res.failed
    s = OV.summarise(res)
    none, ours = s["policies"]["none"], s["policies"]["ours"]
    assert none["allocs"]["ok"] < none["planned_steps"] and none["oom"]
    assert none["oom"][0].startswith("production")
    assert ours["allocs"]["ok"] == ours["planned_steps"] == 7 and not ours["oom"]
    assert ours["opp_alive"] and ours["data_ok"] == {"prod": True, "opp": True}
    assert not ours["errors"]
    # the opportunistic job was really pushed to the host while production held its peak
    assert ours["peak_mib"]["opp"]["host"] > 0
    assert none["peak_mib"]["opp"]["host"] == 0
    assert s["solo_prod_it_per_s"] and ours["prod_vs_solo"] is not None
    # the ramp window (first to last allocation) always has a length; the peak window (last
    # allocation to the free) may have none where a loaded machine's loop fell behind its
    # schedule and made its last steps at the free
    assert ours["prod_ramp_vs_solo"] is not None
    # the opportunistic job ran on after production (its "before" needs its set-up to end
    # within production's 2 s lead: not asserted, a loaded machine may take longer)
    assert ours["opp_it_per_s"]["after"] > 0
    assert (out / "runs" / "OV1-ours.json").exists()
    md = OV.markdown({"OV1": s})
    assert "| none |" in md and "| ours | 7/7 |" in md
