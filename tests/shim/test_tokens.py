"""Compute tokens (rate in work units/s, one unit = one GPU thread launched) and gating."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
from shim_helpers import Job, finish, run_probe
from tgs.intercept import device, segment
from tgs.intercept.segment import SlotDefaults

pytestmark = pytest.mark.timeout(60)
KERNEL = ("100", "100")  # grid x block = 10000 work units, 10 us on the simulator


def _rate(line: str) -> float:
    _, work, ns, rc = line.split()
    assert rc == "0"
    return int(work) / (int(ns) / 1e9)


def test_rate_is_enforced(probe_bin: Path, job: Job) -> None:
    rate = 2_000_000
    free = _rate(run_probe(probe_bin, job.env, "init", f"launchfor:1:{KERNEL[0]}:{KERNEL[1]}")[1])
    job.seg.set_defaults(SlotDefaults(rate=rate, burst=20000))
    got = _rate(run_probe(probe_bin, job.env, "init", f"launchfor:2:{KERNEL[0]}:{KERNEL[1]}")[1])
    assert free > 3 * rate  # the limit, not the simulator, is what binds
    assert 0.75 * rate <= got <= 1.25 * rate, got


def test_rate_change_takes_effect_while_running(probe_bin: Path, job: Job) -> None:
    slow, fast = 200_000, 4_000_000
    job.seg.set_defaults(SlotDefaults(rate=slow, burst=10000))
    p = subprocess.Popen([str(probe_bin), "init", f"launchfor:3:{KERNEL[0]}:{KERNEL[1]}",
                          "ready"], env=job.env, text=True, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "init 0"
        time.sleep(1.0)
        (slot,) = job.seg.live_slots()
        job.seg.set_rate(slot, fast, 10000)
        line = p.stdout.readline().strip()
        assert p.stdout.readline().strip() == "ready"
        c = job.seg.counters(slot)
    finally:
        finish(p)
    work = int(line.split()[1])
    assert work > 5 * slow * 3  # far beyond what the old rate allows in 3 s
    assert c.work == work and c.launches == work // 10000
    assert c.throttled > 0 and c.throttled_ns > 0


def test_gate_waits_for_production(probe_bin: Path, tmp_path: Path,
                                  shim_env: dict[str, str]) -> None:
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT, gate_max_wait_us=250_000)
    dev = device.create_device(tmp_path, 0)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path))
    try:
        t_idle = int(run_probe(probe_bin, env, "init", "launch:4:1:32")[1].split()[3])
        dev.set_prod_active(1)
        t_busy = int(run_probe(probe_bin, env, "init", "launch:4:1:32")[1].split()[3])
        assert t_idle < 0.1e9
        assert 4 * 0.25e9 * 0.9 <= t_busy < 4 * 0.25e9 + 2e9  # waited, then went anyway
        # production going idle releases the waiting launch early
        seg.set_gate(segment.GATE_WAIT, 10_000_000)
        timer = threading.Timer(0.3, dev.set_prod_active, args=(0,))
        timer.start()
        try:
            t_rel = int(run_probe(probe_bin, env, "init", "launch:1:1:32")[1].split()[3])
        finally:
            timer.cancel()
        assert 0.2e9 < t_rel < 5e9
    finally:
        seg.close()
        dev.close()


def test_gate_publish(probe_bin: Path, tmp_path: Path, shim_env: dict[str, str]) -> None:
    seg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    dev = device.create_device(tmp_path, 0)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path))
    p = subprocess.Popen([str(probe_bin), "init", "kick:3:1000:1000", "ready", "sync", "ready"],
                         env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdin is not None
        assert [p.stdout.readline().strip() for _ in range(3)] == ["init 0", "kick 0", "ready"]
        assert dev.prod_active == 1
        (slot,) = seg.live_slots()
        assert seg.slot(slot).dev_active == 1
        assert dev.recompute([seg]) == 1
        p.stdin.write("go\n")
        p.stdin.flush()
        assert [p.stdout.readline().strip() for _ in range(2)] == ["sync 0", "ready"]
        assert dev.prod_active == 0 and seg.slot(slot).dev_active == 0
    finally:
        finish(p)
        seg.close()
        dev.close()


def test_publish_fast_path_keeps_production_busy(probe_bin: Path, tmp_path: Path,
                                                  shim_env: dict[str, str]) -> None:
    """Busy production launches take the fast path, yet an event recorded before the latest
    launches does not mark the process idle: only one that covers them does."""
    seg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    dev = device.create_device(tmp_path, 0)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path))
    cmds = ["init", "kick:1:1000:1000", "record", "kick:3:1000:1000", "evsync", "ready",
            "record", "evsync", "ready"]
    p = subprocess.Popen([str(probe_bin), *cmds], env=env, text=True, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdin is not None
        got = [p.stdout.readline().strip() for _ in range(6)]
        assert got == ["init 0", "kick 0", "record 0", "kick 0", "evsync 0", "ready"]
        assert dev.prod_active == 1, "an event recorded before the last launches ended busy"
        (slot,) = seg.live_slots()
        assert seg.counters(slot).launches == 4
        p.stdin.write("go\n")
        p.stdin.flush()
        assert [p.stdout.readline().strip() for _ in range(3)] == ["record 0", "evsync 0",
                                                                   "ready"]
        assert dev.prod_active == 0 and seg.slot(slot).dev_active == 0
    finally:
        finish(p)
        seg.close()
        dev.close()


def test_inflight_cap_paces_launches_by_completion(probe_bin: Path, job: Job) -> None:
    """With a cap of one kernel's work, each launch waits for the previous kernel to finish;
    without a cap the launches are asynchronous. Kernels: 2000 x 1000 threads = 2 ms each."""
    kern = ("2000", "1000")
    free = run_probe(probe_bin, job.env, "init", f"timed:5:{kern[0]}:{kern[1]}", "sync")
    _, n, free_ns, rc = free[1].split()
    assert rc == "0" and n == "5"
    job.seg.set_defaults(SlotDefaults(inflight_cap=2000 * 1000))
    capped = run_probe(probe_bin, job.env, "init", f"timed:5:{kern[0]}:{kern[1]}", "sync")
    _, _, capped_ns, rc = capped[1].split()
    assert rc == "0"
    # uncapped: five asynchronous launches take far less than one kernel (2 ms);
    # capped: launches 2..5 each wait for the previous kernel: about 4 x 2 ms
    assert int(free_ns) < 2_000_000, free_ns
    assert int(capped_ns) > 5_000_000, capped_ns


def test_waiting_opportunistic_launch_sleeps_on_the_futex(probe_bin: Path, tmp_path: Path,
                                                         shim_env: dict[str, str]) -> None:
    """A launch held by the gate waits on the device segment's futex word (counted in
    `waiters`), and a real production shim going idle bumps the word and releases it."""
    oseg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                          gate_flags=segment.GATE_WAIT, gate_max_wait_us=20_000_000)
    pseg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    dev = device.create_device(tmp_path, 0)
    prod = subprocess.Popen([str(probe_bin), "init", "kick:1:1000:1000", "ready", "sync"],
                            env=dict(shim_env, TGS_SEGMENT=str(pseg.path)), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    opp = None
    try:
        assert prod.stdout is not None and prod.stdin is not None
        assert [prod.stdout.readline().strip() for _ in range(3)] == ["init 0", "kick 0", "ready"]
        assert dev.prod_active == 1
        seq0 = int(dev.view.idle_futex)
        opp = subprocess.Popen([str(probe_bin), "init", "launch:1:1:32"],
                               env=dict(shim_env, TGS_SEGMENT=str(oseg.path)), text=True,
                               stdout=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while int(dev.view.waiters) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert int(dev.view.waiters) == 1, "the held launch is not waiting on the futex"
        t0 = time.monotonic()
        prod.stdin.write("go\n")
        prod.stdin.flush()
        out, _ = opp.communicate(timeout=10)
        assert time.monotonic() - t0 < 5            # released by production, not the 20 s bound
        assert out.splitlines()[1].split()[-1] == "0"
        assert int(dev.view.idle_futex) == seq0 + 1 and int(dev.view.waiters) == 0
    finally:
        for p in (prod, opp):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        oseg.close()
        pseg.close()
        dev.close()
