"""Compute tokens (rate in work units/s, one unit = one GPU thread launched) and gating."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from shim_helpers import Job, finish, list_jobs, own_pub, play_production, run_probe
from tgs.intercept import devseg, segment
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
    prod = play_production(tmp_path, seg)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path))
    try:
        t_idle = int(run_probe(probe_bin, env, "init", "launch:4:1:32")[1].split()[3])
        prod.set_busy(1)
        t_busy = int(run_probe(probe_bin, env, "init", "launch:4:1:32")[1].split()[3])
        assert t_idle < 0.1e9
        assert 4 * 0.25e9 * 0.9 <= t_busy < 4 * 0.25e9 + 2e9  # waited, then went anyway
        # production going idle releases the waiting launch early
        seg.set_gate(segment.GATE_WAIT, 10_000_000)
        timer = threading.Timer(0.3, prod.set_busy, args=(0,))
        timer.start()
        try:
            t_rel = int(run_probe(probe_bin, env, "init", "launch:1:1:32")[1].split()[3])
        finally:
            timer.cancel()
        assert 0.2e9 < t_rel < 5e9
    finally:
        seg.close()
        prod.close()


def test_busy_bias_discounts_dead_busy_counts(probe_bin: Path, tmp_path: Path,
                                              shim_env: dict[str, str]) -> None:
    """The controller's busy_bias (counts left by production processes that died busy) is
    discounted: a pub whose busy count does not exceed it is idle."""
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT, gate_max_wait_us=250_000)
    prod = play_production(tmp_path, seg)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path))
    try:
        prod.set_busy(2)
        prod.dev.set_jobs([devseg.DevJob("prod", 0, 1, 0, busy_bias=2),
                           devseg.DevJob("opp", 1, 1)])
        assert int(run_probe(probe_bin, env, "init", "launch:4:1:32")[1].split()[3]) < 0.2e9
        prod.set_busy(3)                                  # one live busy process: wait
        assert int(run_probe(probe_bin, env, "init", "launch:2:1:32")[1].split()[3]) > 0.4e9
    finally:
        seg.close()
        prod.close()


def test_gate_publish(probe_bin: Path, tmp_path: Path, shim_env: dict[str, str]) -> None:
    seg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    pub = own_pub(seg)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path))
    p = subprocess.Popen([str(probe_bin), "init", "kick:3:1000:1000", "ready", "sync", "ready"],
                         env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdin is not None
        assert [p.stdout.readline().strip() for _ in range(3)] == ["init 0", "kick 0", "ready"]
        assert pub.busy == 1
        (slot,) = seg.live_slots()
        assert seg.slot(slot).dev_active == 1
        p.stdin.write("go\n")
        p.stdin.flush()
        assert [p.stdout.readline().strip() for _ in range(2)] == ["sync 0", "ready"]
        assert pub.busy == 0 and seg.slot(slot).dev_active == 0
        assert int(pub.view.idle_futex) == 1               # the 1 -> 0 change bumped the word
    finally:
        finish(p)
        pub.close()
        seg.close()


def test_process_that_died_busy_gives_its_count_back(probe_bin: Path, tmp_path: Path,
                                                      shim_env: dict[str, str]) -> None:
    """A production process SIGKILLed while busy leaves pub.busy at 1; the next process of the
    job reclaims its slot at attach and gives the count back (the gap starts then)."""
    seg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    pub = own_pub(seg)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path))
    p = subprocess.Popen([str(probe_bin), "init", "kick:3:1000:1000", "ready"], env=env,
                         text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None
        assert [p.stdout.readline().strip() for _ in range(3)] == ["init 0", "kick 0", "ready"]
        p.kill()
        p.wait(10)
        assert pub.busy == 1
        run_probe(probe_bin, env, "init", "meminfo")
        assert pub.busy == 0 and pub.idle_since_ns > 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        pub.close()
        seg.close()


def test_publish_fast_path_keeps_production_busy(probe_bin: Path, tmp_path: Path,
                                                  shim_env: dict[str, str]) -> None:
    """Busy production launches take the fast path, yet an event recorded before the latest
    launches does not mark the process idle: only one that covers them does."""
    seg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    pub = own_pub(seg)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path))
    cmds = ["init", "kick:1:1000:1000", "record", "kick:3:1000:1000", "evsync", "ready",
            "record", "evsync", "ready"]
    p = subprocess.Popen([str(probe_bin), *cmds], env=env, text=True, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdin is not None
        got = [p.stdout.readline().strip() for _ in range(6)]
        assert got == ["init 0", "kick 0", "record 0", "kick 0", "evsync 0", "ready"]
        assert pub.busy == 1, "an event recorded before the last launches ended busy"
        (slot,) = seg.live_slots()
        assert seg.counters(slot).launches == 4
        p.stdin.write("go\n")
        p.stdin.flush()
        assert [p.stdout.readline().strip() for _ in range(3)] == ["record 0", "evsync 0",
                                                                   "ready"]
        assert pub.busy == 0 and seg.slot(slot).dev_active == 0
    finally:
        finish(p)
        pub.close()
        seg.close()


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
    # uncapped: five asynchronous launches wait for no kernel; capped: launches 2..5 each wait
    # for the previous kernel, about 4 x 2 ms of modelled time (a loaded machine only adds to
    # both, so the difference, not the uncapped time, is asserted)
    assert int(capped_ns) > 5_000_000, capped_ns
    assert int(free_ns) < int(capped_ns) - 3_000_000, (free_ns, capped_ns)


def test_waiting_opportunistic_launch_sleeps_on_the_futex(probe_bin: Path, tmp_path: Path,
                                                         shim_env: dict[str, str]) -> None:
    """A launch held by the gate waits on the production pub's futex word (mapped read-only),
    and a real production shim going idle bumps the word and releases it at once."""
    oseg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                          gate_flags=segment.GATE_WAIT, gate_max_wait_us=20_000_000)
    pseg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    dev = devseg.create_device(tmp_path, 0)
    list_jobs(dev, pseg, oseg)
    pub = own_pub(pseg)
    # TGS_DRAIN=0: production stays busy until its synchronize (the path under test), not
    # only until its 1 ms kernel drains
    prod = subprocess.Popen([str(probe_bin), "init", "kick:1:1000:1000", "ready", "sync"],
                            env=dict(shim_env, TGS_SEGMENT=str(pseg.path), TGS_DRAIN="0"),
                            text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    opp = None
    try:
        assert prod.stdout is not None and prod.stdin is not None
        assert [prod.stdout.readline().strip() for _ in range(3)] == ["init 0", "kick 0", "ready"]
        assert pub.busy == 1
        seq0 = int(pub.view.idle_futex)
        opp = subprocess.Popen([str(probe_bin), "init", "launch:1:1:32"],
                               env=dict(shim_env, TGS_SEGMENT=str(oseg.path)), text=True,
                               stdout=subprocess.PIPE)
        assert opp.stdout is not None
        assert opp.stdout.readline().strip() == "init 0"
        time.sleep(0.3)
        assert opp.poll() is None, "the launch did not wait for production"
        t0 = time.monotonic()
        prod.stdin.write("go\n")
        prod.stdin.flush()
        out, _ = opp.communicate(timeout=10)
        assert time.monotonic() - t0 < 5            # released by production, not the 20 s bound
        assert out.splitlines()[0].split()[-1] == "0"
        assert int(pub.view.idle_futex) == seq0 + 1
    finally:
        for p in (prod, opp):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        pub.close()
        oseg.close()
        pseg.close()
        dev.close()


def test_truncated_production_pub_cannot_kill_an_opportunistic_job(
        probe_bin: Path, tmp_path: Path, shim_env: dict[str, str]) -> None:
    """The production tenant truncates its own pub (which other tenants map read-only) over and
    over while an opportunistic job polls it: the SIGBUS guard swaps a zero page in, the
    opportunistic job keeps working and exits 0; only the truncating tenant loses (it looks
    idle)."""
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT, gate_max_wait_us=2000)
    prod = play_production(tmp_path, seg)
    prod.set_busy(1)                                 # the opportunistic launches poll the pub
    good = prod.pub.path.read_bytes()
    stop = threading.Event()

    def vandal() -> None:
        while not stop.is_set():
            os.truncate(prod.pub.path, 0)
            time.sleep(0.01)
            prod.pub.path.write_bytes(good)          # valid (and busy) again, same inode
            time.sleep(0.01)

    env = dict(shim_env, TGS_SEGMENT=str(seg.path), TGS_LOG_LEVEL="info")
    t = threading.Thread(target=vandal)
    p = subprocess.Popen([str(probe_bin), "init", "launch:1:1:32", "ready", "launchfor:2:10:32"],
                         env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdin is not None
        assert [p.stdout.readline().strip().split()[0] for _ in range(3)] == [
            "init", "launch", "ready"]                # the pub is mapped now
        t.start()
        p.stdin.write("go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=60)
    finally:
        stop.set()
        if t.is_alive():
            t.join()
        if p.poll() is None:
            p.kill()
            p.wait()
        seg.close()
        prod.close()
    assert p.returncode == 0, err
    work = int(out.splitlines()[0].split()[1])
    assert work > 0
    assert "was truncated under us" in err           # the guard did catch SIGBUS


def test_real_sigbus_still_kills(probe_bin: Path, tmp_path: Path,
                                 shim_env: dict[str, str]) -> None:
    """The guard only covers the shim's own read-only mappings: a fault anywhere else gets the
    previous handler's (here: the default) action."""
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT, gate_max_wait_us=2000)
    prod = play_production(tmp_path, seg)
    try:
        p = subprocess.run([str(probe_bin), "init", "launch:1:1:32", "sigbus"],
                           env=dict(shim_env, TGS_SEGMENT=str(seg.path)), capture_output=True,
                           text=True, timeout=60)
    finally:
        seg.close()
        prod.close()
    assert p.returncode == -signal.SIGBUS, (p.returncode, p.stdout, p.stderr)
    assert "survived" not in p.stdout


def test_sigbus_guard_chains_the_programs_handler(probe_bin: Path, tmp_path: Path,
                                                  shim_env: dict[str, str]) -> None:
    """A program's own SIGBUS handler (installed before the shim's guard) still gets the faults
    that are not the guard's."""
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT, gate_max_wait_us=2000)
    prod = play_production(tmp_path, seg)
    try:
        p = subprocess.run([str(probe_bin), "bushandler", "init", "busowner", "launch:1:1:32",
                            "busowner", "sigbus"],
                           env=dict(shim_env, TGS_SEGMENT=str(seg.path)), capture_output=True,
                           text=True, timeout=60)
    finally:
        seg.close()
        prod.close()
    out = p.stdout.splitlines()
    assert p.returncode == 3, (p.returncode, p.stdout)
    assert out[2] == "busowner app" and out[4] == "busowner other"   # the guard went on top
    assert out[-1] == "app handler"                                  # ... and chains to it


def test_sigbus_guard_goes_back_in_front_of_a_later_handler(probe_bin: Path, tmp_path: Path,
                                                            shim_env: dict[str, str]) -> None:
    """A program that installs its own SIGBUS handler after the guard: the guard notices on a
    later gated launch (checked every 100 ms) and goes back in front, chaining it."""
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT, gate_max_wait_us=2000)
    prod = play_production(tmp_path, seg)
    try:
        p = subprocess.run([str(probe_bin), "init", "launch:1:1:32", "bushandler", "busowner",
                            "sleep:150", "launch:1:1:32", "busowner", "sigbus"],
                           env=dict(shim_env, TGS_SEGMENT=str(seg.path)), capture_output=True,
                           text=True, timeout=60)
    finally:
        seg.close()
        prod.close()
    out = [ln for ln in p.stdout.splitlines() if ln.startswith(("busowner", "app"))]
    assert out == ["busowner app", "busowner other", "app handler"], p.stdout
    assert p.returncode == 3


_WAKER = r"""
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* waker PUB OFFSET SECONDS: bump the futex word of a pub and wake, as fast as possible */
int main(int argc, char **argv)
{
    int fd = open(argv[1], O_RDWR);
    char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    uint32_t *w = (uint32_t *)(m + atoi(argv[2]));
    time_t end = time(NULL) + atoi(argv[3]);
    while (time(NULL) < end) {
        __atomic_add_fetch(w, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
    return 0;
}
"""


def test_hostile_futex_wakes_do_not_make_the_waiter_spin(probe_bin: Path, tmp_path: Path,
                                                         shim_env: dict[str, str]) -> None:
    """A production tenant that stays busy and bumps/wakes its own idle_futex in a tight loop:
    the opportunistic launch it holds sleeps out its steps instead of spinning on the wakes."""
    from tgs.intercept.header import ffi

    src, waker = tmp_path / "waker.c", tmp_path / "waker"
    src.write_text(_WAKER)
    subprocess.run(["gcc", "-O1", "-o", str(waker), str(src)], check=True)
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT, gate_max_wait_us=1_500_000)
    prod = play_production(tmp_path, seg)
    prod.set_busy(1)
    off = ffi().offsetof("struct tgs_pub", "idle_futex")
    w = subprocess.Popen([str(waker), str(prod.pub.path), str(off), "4"])
    p = subprocess.Popen([str(probe_bin), "init", "launch:1:1:32"], text=True,
                         stdout=subprocess.PIPE, env=dict(shim_env, TGS_SEGMENT=str(seg.path)))
    try:
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        for q in (p, w):
            if q.poll() is None:
                q.kill()
                q.wait()
        seg.close()
        prod.close()
    assert p.returncode == 0
    assert p.stdout is not None
    held_ns = int(p.stdout.read().splitlines()[1].split()[3])
    assert held_ns > 1.2e9                         # held for (about) its max wait ...
    assert ru.ru_utime + ru.ru_stime < 0.4, (ru.ru_utime, ru.ru_stime)   # ... mostly asleep


def test_missing_pub_is_looked_at_again(probe_bin: Path, tmp_path: Path,
                                        shim_env: dict[str, str]) -> None:
    """A listed production pub that is missing reads as idle; once it exists (and is busy) the
    opportunistic process sees it at its next look (100 ms), with no change to the list."""
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT, gate_max_wait_us=200_000)
    prod = play_production(tmp_path, seg)
    prod.set_busy(1)
    good = prod.pub.path.read_bytes()
    prod.pub.path.unlink()
    p = subprocess.Popen([str(probe_bin), "init", "launch:2:1:32", "ready", "launch:2:1:32"],
                         env=dict(shim_env, TGS_SEGMENT=str(seg.path)), text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdin is not None
        assert p.stdout.readline().strip() == "init 0"
        assert int(p.stdout.readline().split()[3]) < 0.2e9      # not held: no pub, idle
        assert p.stdout.readline().strip() == "ready"
        prod.pub.path.write_bytes(good)
        time.sleep(0.3)
        out, _ = p.communicate("go\n", timeout=30)
        assert int(out.splitlines()[0].split()[3]) > 0.35e9      # held twice by the gate
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        seg.close()
        prod.close()


def test_opportunistic_tenant_cannot_hold_another_back(probe_bin: Path, tmp_path: Path,
                                                       shim_env: dict[str, str]) -> None:
    """An opportunistic tenant writes busy = 1000 (and a claim
    on every gap) into its own pub.  Another opportunistic job is not held: only production
    pubs count as busy, and a gap's claim is read from its owner's pub only."""
    victim = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                            gate_flags=segment.GATE_WAIT, gate_max_wait_us=500_000)
    liar = segment.create(tmp_path / "liar.seg", "liar",
                          priority=segment.PRIORITY_OPPORTUNISTIC)
    prod = play_production(tmp_path, victim, liar)            # production idle
    lp = own_pub(liar)
    try:
        lp.view.busy, lp.view.busy_seq, lp.view.gap_claim = 1000, 77, 1
        lp.view.idle_futex = 5
        t = int(run_probe(probe_bin, dict(shim_env, TGS_SEGMENT=str(victim.path)), "init",
                          "launch:4:1:32")[1].split()[3])
        assert t < 0.4e9                                       # never held for 4 x 0.5 s
    finally:
        lp.close()
        liar.close()
        victim.close()
        prod.close()


def test_truncated_device_segment_cannot_kill_a_job(probe_bin: Path, tmp_path: Path,
                                                    shim_env: dict[str, str]) -> None:
    """Defence in depth: tenants get the device segment read-only, but
    even if it were truncated under a running job, the guard covers it: gating goes off, the
    job runs on and exits 0."""
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT, gate_max_wait_us=2000)
    prod = play_production(tmp_path, seg)
    prod.set_busy(1)
    p = subprocess.Popen([str(probe_bin), "init", "launch:1:1:32", "ready", "launchfor:1:10:32"],
                         env=dict(shim_env, TGS_SEGMENT=str(seg.path)), text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdin is not None
        assert [p.stdout.readline().split()[0] for _ in range(3)] == ["init", "launch", "ready"]
        os.truncate(prod.dev.path, 0)
        out, err = p.communicate("go\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        seg.close()
        prod.close()
    assert p.returncode == 0, err
    assert int(out.splitlines()[0].split()[1]) > 0
