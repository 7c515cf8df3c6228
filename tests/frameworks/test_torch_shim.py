"""Real PyTorch under the shim (tgs-run, a controller on the simulated GPU): quotas with each
caching-allocator backend, events in both priorities, CUDA graphs under the FIT gate, the NVML
view inside the job, oversubscription, several processes and several GPUs of one job."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from ctl_process import Ctl, start_ctl
from fw_helpers import JOBS, MiB, ok, run_probe
from proc_helpers import stop, tool

pytestmark = pytest.mark.timeout(300)

QUOTA = 512 * MiB


@pytest.mark.parametrize("alloc_conf", ["", "backend:cudaMallocAsync", "expandable_segments:True"])
def test_quota_oom_and_recovery(fw_python: Path, ctl: Ctl, alloc_conf: str) -> None:
    env = dict(ctl.env, PYTORCH_CUDA_ALLOC_CONF=alloc_conf)
    r = run_probe(fw_python, "torch_probe.py", "quota", env,
                  wrap=["--name", "q", "--priority", "production", "--mem", "512MiB"])
    out = ok(r)
    assert out["total"] == QUOTA                   # mem_get_info shows the quota
    assert 0 < out["free"] <= QUOTA
    assert out["oom"] and "out of memory" in out["oom"].lower()
    # the quota holds: what was allocated fits in it, and most of it could be used
    assert QUOTA // 2 <= out["allocated_before_oom"] <= QUOTA
    assert out["recovered"]                        # empty_cache gave the memory back
    expect = "cudaMallocAsync" if "Async" in alloc_conf else "native"
    assert out["backend"] == expect


@pytest.mark.parametrize("priority", ["production", "opportunistic"])
def test_basics_and_event_timing(fw_python: Path, ctl: Ctl, priority: str) -> None:
    wrap = ["--name", f"e-{priority[:4]}", "--priority", priority, "--mem", "2GiB"]
    out = ok(run_probe(fw_python, "torch_probe.py", "basics", ctl.env, wrap=wrap))
    assert out["roundtrip"] and out["mm"] == [512, 512]
    out = ok(run_probe(fw_python, "torch_probe.py", "events", dict(ctl.env, PROBE_STEPS="80"),
                       wrap=wrap))
    assert out["elapsed_ms"] > 0


def _production_loop(py: Path, ctl: Ctl, seconds: float) -> subprocess.Popen:
    """A PyTorch training job with a host gap per step (bench/torch_train.py), as production."""
    from tgs.bench import torch_train
    return subprocess.Popen(
        [tool("tgs-run"), "--name", "prod", "--priority", "production", "--mem", "2GiB", "--",
         str(py), torch_train.__file__, "--seconds", str(seconds), "--hidden", "512",
         "--gap-ms", "4"], env=ctl.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)


def test_graph_replay_under_the_fit_gate(fw_python: Path, ctl: Ctl) -> None:
    prod = _production_loop(fw_python, ctl, 12)
    try:
        assert prod.stdout is not None
        assert '"start"' in prod.stdout.readline()     # production is running
        assert ctl.jobs()["prod"]["priority"] == "production"
        out = ok(run_probe(fw_python, "torch_probe.py", "graph",
                           dict(ctl.env, PROBE_REPLAYS="10"),
                           wrap=["--name", "g", "--priority", "opportunistic", "--mem", "2GiB"]))
        # each replay is one long launch that fits no production gap: it waits in
        # the gate, within its starvation bound, and every replay completes
        assert out["replays"] == 10
    finally:
        stop(prod)


def test_nvml_view_inside_the_job(fw_python: Path, ctl: Ctl) -> None:
    out = ok(run_probe(fw_python, "torch_probe.py", "nvml", ctl.env,
                       wrap=["--name", "n", "--priority", "production", "--mem", "512MiB"]))
    assert out["total"] == QUOTA                   # pynvml sees the job's quota as the GPU
    assert 32 * MiB <= out["used"] <= QUOTA
    assert out["mine"] in out["pids"]
    assert out["my_used"] >= 32 * MiB
    assert str(out["mine"]) in out["listing"]      # torch.cuda.list_gpu_processes()


def test_processes_of_one_job_share_its_quota(fw_python: Path, ctl: Ctl) -> None:
    out = ok(run_probe(fw_python, "torch_probe.py", "share", ctl.env,
                       wrap=["--name", "s", "--priority", "production", "--mem", "512MiB"]))
    assert out["exitcodes"] == [0, 0]
    total = sum(out["mib"])
    # together they stop at the job's quota, less each process's context and allocator slack
    assert 256 <= total <= 512


def test_job_over_two_gpus(fw_python: Path, tmp_path: Path, fw_env: dict[str, str]) -> None:
    env = dict(fw_env, TGS_SIM_DEVICES="2")
    gen = start_ctl(tmp_path, env)
    c = next(gen)
    try:
        out = ok(run_probe(fw_python, "torch_probe.py", "multigpu", c.env,
                           wrap=["--name", "m", "--priority", "production", "--device", "0,1",
                                 "--mem", "1GiB"]))
        assert out["count"] == 2 and out["exitcodes"] == [0, 0]
        assert [g[2] for g in out["per_gpu"]] == [1 << 30, 1 << 30]   # the quota per device
    finally:
        gen.close()


@pytest.mark.parametrize("flags", [["--mem-total", "3GiB"], []], ids=["mem-total", "default"])
def test_oversubscription_keeps_tensors_intact(fw_python: Path, tmp_path: Path,
                                               fw_env: dict[str, str], flags: list[str]) -> None:
    """An opportunistic job holding 1.5 GiB next to production allocating 3 GiB of a 4 GiB GPU,
    with --mem-total and with the default flags (its memory evictable by default):
    production's allocations succeed; the evicted tensors are intact after and once they are
    back."""
    gen = start_ctl(tmp_path, dict(fw_env, TGS_SIM_MEM="4GiB"))
    ctl = next(gen)
    opp = subprocess.Popen(
        [tool("tgs-run"), "--name", "o", "--priority", "opportunistic", "--mem", "4GiB",
         *flags, "--", str(fw_python), str(JOBS / "torch_probe.py"), "hold"],
        env=dict(ctl.env, PROBE_MIB="1536"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert opp.stdout is not None and opp.stdin is not None
        first = opp.stdout.readline()
        assert '"ready": true' in first, first + (opp.stderr.read() if opp.poll() else "")

        def ask(cmd: str) -> str:
            opp.stdin.write(cmd + "\n")
            opp.stdin.flush()
            return opp.stdout.readline()

        assert '"worked": true' in ask("work")     # resident on the device
        prod = run_probe(fw_python, "torch_probe.py", "quota", ctl.env,
                         wrap=["--name", "p", "--priority", "production", "--mem", "3GiB"])
        out = ok(prod)
        # The caching allocator puts two 8 MiB tensors in each 20 MiB segment, so 2300 MiB of
        # tensors need more than 2.8 GiB of device memory: more than the 2.5 GiB the GPU has
        # without evicting the opportunistic job's 1.5 GiB.  Production got its quota.
        assert out["allocated_before_oom"] >= 2300 * MiB
        assert out["total"] == 3 << 30
        assert '"intact": true' in ask("check")    # evicted, then read back: the same bytes
        time.sleep(0.5)
        assert '"worked": true' in ask("work")     # back on the device after production left
        assert '"intact": true' in ask("check")
    finally:
        stop(opp)
        gen.close()
