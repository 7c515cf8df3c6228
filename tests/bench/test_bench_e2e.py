"""tgs-bench end to end on a tiny scenario on the simulated GPU, and its failure paths."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from tgs.bench.scenarios import Budget
from tgs.bench.suite import SuiteConfig, run_suite
from tgs.testbed.gpu import real_gpu_problem
from tgs.testbed.workload import WorkloadSpec, run_workload

TINY = Budget(prod_s=1.5, tgs_prod_s=1.5, phase_s=1.0, cycles=1, s4=(0.5, 1.5, 1.0), solo_s=1.5)


@pytest.mark.timeout(90)
def test_tiny_suite_report_structure_and_sane_numbers(
        tmp_path: Path, shim_lib: Path, sim_lib: Path, workload_bin: Path) -> None:
    out = tmp_path / "res"
    doc = run_suite(SuiteConfig(keys=["S1"], policies=["adaptive"], budget=TINY, gpu="sim",
                                out=out, log=lambda s: None))
    assert (out / "results.json").exists() and (out / "results.md").exists()
    assert json.loads((out / "results.json").read_text())["scenarios"].keys() == {"S1"}
    for png in ("headline.png", "S1.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == ["S1-adaptive.json", "S1-solo-opp.json", "S1-solo-prod.json"]
    assert doc["machine"]["nproc"] >= 1 and doc["gpu"] == "sim"

    s1 = doc["scenarios"]["S1"]
    base, m = s1["baseline"], s1["policies"]["adaptive"]
    assert "errors" not in m, m
    assert 0.3 < base["gpu_util"] < 1.0          # production alone leaves the GPU partly idle
    assert base["prod_it_per_s"]["prod"] > 0 and base["opp_solo_it_per_s"]["opp"] > 0
    for key in ("prod_vs_solo", "p99_vs_solo", "opp_vs_solo"):
        assert 0.0 < m[key] < 1.2 or key == "p99_vs_solo", (key, m[key])
    assert 0.0 < m["p99_vs_solo"] < 5.0
    assert 0.0 <= m["gpu_util"] <= 1.0 and m["gpu_util"] >= base["gpu_util"] - 0.1
    assert 0.0 < m["harvest"] < 2.0
    assert 0.0 <= m["prod_busy_frac"] <= 1.0 and 0.0 < m["opp_busy_frac"] <= 1.0
    assert m["window_s"] == pytest.approx(1.5, abs=0.3)
    assert "| S1 | adaptive |" in (out / "results.md").read_text()
    # every process is gone: none of the run's pids is alive
    rec = json.loads((out / "runs" / "S1-adaptive.json").read_text())
    assert all(not psutil.pid_exists(j["pid"]) or psutil.Process(j["pid"]).status() == "zombie"
               for j in rec["jobs"].values())


@pytest.mark.timeout(90)
def test_tgs_shim_lib_reaches_every_job_for_a_side_by_side_run(
        tmp_path: Path, shim_lib: Path, sim_lib: Path, workload_bin: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`TGS_SHIM_LIB=<another build> tgs-bench ...` runs that build: the controller the bench
    starts names it in its replies, and each job's record says what it preloaded."""
    other = tmp_path / "other" / "libtgs.so"
    other.parent.mkdir()
    shutil.copy(shim_lib, other)
    monkeypatch.setenv("TGS_SHIM_LIB", str(other))
    out = tmp_path / "res"
    run_suite(SuiteConfig(keys=["S1"], policies=["adaptive"], budget=TINY, gpu="sim", out=out,
                          log=lambda s: None, plots=False))
    rec = json.loads((out / "runs" / "S1-adaptive.json").read_text())
    assert {j["preload"] for j in rec["jobs"].values()} == {str(other)}, rec["jobs"]


@pytest.mark.timeout(30)
def test_workload_phases_change_the_host_gap(sim_env: dict[str, str],
                                             workload_bin: Path) -> None:
    spec = WorkloadSpec(kernels=2, kernel_us=500, phases=[(4.0, 0.6), (0.5, 0.6)],
                        seconds=1.2, report_ms=100, name="ph")
    res = run_workload(spec, env=sim_env, timeout=20)
    assert res.start["config"]["phases"] == 2
    by_phase: dict[int, list[float]] = {}
    for p in res.progress:
        assert p.mono_s is not None and p.phase in (0, 1)
        by_phase.setdefault(p.phase, []).append(p.it_per_s)
    light, heavy = max(by_phase[0]), max(by_phase[1])
    # 1 ms busy + 4 ms gap vs 1 ms + 0.5 ms: the heavy phase runs ~3x the iterations
    assert heavy > 2.0 * light


@pytest.mark.timeout(20)
@pytest.mark.parametrize("bad", ["1:0", "x:1", "1:2,", "1:1,2:1,3:1,4:1,5:1,6:1,7:1,8:1,9:1"])
def test_workload_phases_usage_errors(workload_bin: Path, bad: str) -> None:
    res = subprocess.run([str(workload_bin), "--phases", bad], capture_output=True, text=True,
                         timeout=10)
    assert res.returncode == 2 and "--phases wants" in res.stderr


@pytest.mark.timeout(60)
def test_gpu_real_without_a_gpu_fails_clearly(tmp_path: Path) -> None:
    if real_gpu_problem() is None:
        pytest.skip("a real GPU is present")
    res = subprocess.run([sys.executable, "-m", "tgs.bench.main", "--gpu", "real", "--quick",
                          "--out", str(tmp_path / "r")], capture_output=True, text=True,
                         timeout=50)
    assert res.returncode == 1
    assert "--gpu real:" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.timeout(60)
def test_torch_loop_fails_clearly_without_pytorch_or_cuda() -> None:
    res = subprocess.run([sys.executable, "-m", "tgs.bench.torch_train", "--seconds", "0.1"],
                         capture_output=True, text=True, timeout=50)
    if res.returncode == 0:
        pytest.skip("PyTorch with CUDA is installed")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    err = json.loads(res.stdout.strip().splitlines()[-1])
    assert err["type"] == "error" and ("PyTorch" in err["error"])
    bad = subprocess.run([sys.executable, "-m", "tgs.bench.torch_train", "--phases", "1:0"],
                         capture_output=True, text=True, timeout=50)
    assert bad.returncode == 2 and "--phases" in bad.stderr


def _cmdline(p: psutil.Process) -> str:
    """A child's command line, or "" if it exited (or is a zombie) meanwhile."""
    try:
        return " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):   # ZombieProcess is a NoSuchProcess
        return ""


@pytest.mark.timeout(90)
def test_sigterm_stops_every_process_it_started(tmp_path: Path, shim_lib: Path, sim_lib: Path,
                                                workload_bin: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    proc = subprocess.Popen([sys.executable, "-m", "tgs.bench.main", "--gpu", "sim", "--quick",
                             "--scenario", "S1", "--policy", "adaptive", "--no-plots",
                             "--out", str(tmp_path / "r")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        children: list[psutil.Process] = []
        deadline = time.monotonic() + 40
        # wait until the policy run is on: a controller and two jobs alive
        while time.monotonic() < deadline and proc.poll() is None:
            children = psutil.Process(proc.pid).children(recursive=True)
            if any("tgs.controller" in _cmdline(c) for c in children) and len(children) >= 3:
                break
            time.sleep(0.1)
        assert proc.poll() is None and len(children) >= 3, "the policy run never started"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert b"interrupted" in err
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, alive
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
