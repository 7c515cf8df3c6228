"""Memory quota: every allocation path, the presented device memory, concurrent processes, and
reclaiming a killed process's memory (liveness by the slot's OFD lock)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shim_helpers import Job, finish, run_probe
from tgs.intercept import segment

pytestmark = pytest.mark.timeout(60)
MiB = 1 << 20


def _used(job: Job) -> int:
    return job.seg.ledger()[0]


@pytest.mark.parametrize(
    ("ok", "too_big"),
    [
        ("alloc:600000", "alloc:600000"),
        ("alloc32:600000", "alloc32:600000"),
        ("managed:600000", "managed:600000"),
        ("async:600000", "async:600000"),
        ("pool:600000", "pool:600000"),
        ("pitch:1000:600", "pitch:1000:600"),  # pitch 1024: 614400 B
        ("array:300:500", "array:300:500"),  # float: 600000 bytes
        ("array3d:100:100:15", "array3d:100:100:15"),
        ("mipmap:512:256:2", "mipmap:512:256:2"),  # 512x256 + 256x128 floats = 655360 B
    ],
)
def test_each_path_is_charged_and_freed(probe_bin: Path, job: Job, ok: str, too_big: str) -> None:
    out = run_probe(probe_bin, job.env, "init", ok, too_big, "meminfo", "free_all", "meminfo")
    kind = ok.split(":")[0]
    assert out[1] == f"{kind} 0" or out[1].startswith(f"{kind} 0 ")
    assert out[2].startswith(f"{kind} 2"), out  # exactly CUDA_ERROR_OUT_OF_MEMORY
    free1, total1 = map(int, out[3].split()[1:3])
    assert total1 == MiB and 0 < free1 < MiB // 2
    assert out[4] == "free_all 0"
    assert out[5].split()[1:3] == [str(MiB), str(MiB)]
    assert _used(job) == 0
    assert job.seg.snapshot() == []  # the slot was released at exit


def test_cumemcreate_counts_device_memory(probe_bin: Path, job: Job) -> None:
    job.seg.set_quota(8 * MiB)
    out = run_probe(probe_bin, job.env, "init", "create:4194304", "create:4194304",
                    "create:2097152", "meminfo", "free_all")
    assert out[1:4] == ["create 0", "create 0", "create 2"]
    assert out[4].split()[1:3] == ["0", str(8 * MiB)]


def test_meminfo_and_totalmem_present_quota(probe_bin: Path, job: Job) -> None:
    out = run_probe(probe_bin, job.env, "init", "alloc:262144", "meminfo", "totalmem")
    assert out[2].split()[1:] == [str(MiB - 262144), str(MiB), "0"]
    assert out[3].split()[1:] == [str(MiB), "0"]


def test_lowering_quota_blocks_new_allocations_only(probe_bin: Path, job: Job) -> None:
    p = subprocess.Popen([str(probe_bin), "init", "alloc:800000", "ready", "alloc:1000",
                          "meminfo", "free_all", "alloc:1000"], env=job.env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdin is not None
        assert p.stdout.readline().strip() == "init 0"
        assert p.stdout.readline().strip() == "alloc 0"
        assert p.stdout.readline().strip() == "ready"
        job.seg.set_quota(500000)  # below current usage
        p.stdin.write("go\n")
        p.stdin.close()
        rest = p.stdout.read().split("\n")
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rest[0] == "alloc 2"
    assert rest[1].split()[1:3] == ["0", "500000"]  # free clamped at 0, never wrapped
    assert rest[2] == "free_all 0" and rest[3] == "alloc 0"


def test_static_env_limit_without_segment(probe_bin: Path, shim_env: dict[str, str]) -> None:
    env = dict(shim_env, TGS_MEM_LIMIT="1MiB")
    out = run_probe(probe_bin, env, "init", "alloc:700000", "alloc:700000", "meminfo",
                    "free_all", "alloc:700000")
    assert out[1:3] == ["alloc 0", "alloc 2"]
    assert out[3].split()[2] == str(MiB)
    assert out[5] == "alloc 0"


@pytest.mark.parametrize(("value", "total"), [("1.5MiB", 3 * MiB // 2), (" 1.5 mb ", 3 * MiB // 2),
                                              ("0", None), ("Unlimited", None)])
def test_static_env_limit_grammar(probe_bin: Path, shim_env: dict[str, str], value: str,
                                  total: int | None) -> None:
    """TGS_MEM_LIMIT reads the tools' grammar (tgs/size.h): fractions, and 0 or
    'unlimited' as no limit."""
    out = run_probe(probe_bin, dict(shim_env, TGS_MEM_LIMIT=value), "init", "meminfo",
                    "alloc:4000000")
    if total is None:
        assert int(out[1].split()[2]) > 4000000 and out[2] == "alloc 0"
    else:
        assert out[1].split()[2] == str(total) and out[2] == "alloc 2"


def test_concurrent_processes_never_exceed_quota(probe_bin: Path, job: Job) -> None:
    """4 processes race 64 KiB allocations against a 1 MiB job quota."""
    chunk, quota = 65536, MiB
    procs = [
        subprocess.Popen([str(probe_bin), "init", f"alloc_until:{chunk}:1000", "ready"],
                         env=job.env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    try:
        admitted = []
        for p in procs:
            assert p.stdout is not None
            lines = [p.stdout.readline().strip() for _ in range(3)]
            assert lines[0] == "init 0" and lines[2] == "ready", lines
            n, rc = map(int, lines[1].split()[1:])
            assert rc == 2
            admitted.append(n)
        # all four hold their memory now: both views agree and never exceed the quota
        assert sum(admitted) * chunk <= quota
        assert sum(admitted) == quota // chunk
        assert _used(job) == sum(admitted) * chunk
        assert sum(c.mem_used for c in job.seg.snapshot()) == _used(job)
        assert len(job.seg.live_slots()) == 4
    finally:
        for p in procs:
            finish(p)
    assert _used(job) == 0


def test_sigkill_is_reclaimed(probe_bin: Path, job: Job) -> None:
    """Two C processes hold slots (the Python side sees them live); after SIGKILL nobody has
    reclaimed them yet (the controller never writes a tenant's segment); the next process of the
    job reclaims EVERY dead slot when it attaches, not only the one it claims."""
    procs = [subprocess.Popen([str(probe_bin), "init", "alloc:300000", "ready"], env=job.env,
                              text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
             for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout is not None
            assert [p.stdout.readline().strip() for _ in range(3)] == ["init 0", "alloc 0",
                                                                      "ready"]
        live = job.seg.live_slots()
        assert len(live) == 2 and {job.seg.counters(i).pid for i in live} == {
            p.pid for p in procs}
        assert _used(job) == 600000
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait(10)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert job.seg.live_slots() == [] and _used(job) == 600000
    out = run_probe(probe_bin, job.env, "init", "alloc:900000", "meminfo")
    assert out[1] == "alloc 0"
    assert out[2].split()[1] == str(MiB - 900000)    # both dead slots' memory came back
    assert _used(job) == 0 and job.seg.snapshot() == []


def test_sigkill_reclaimed_by_next_claimant(probe_bin: Path, job: Job) -> None:
    p = subprocess.Popen([str(probe_bin), "init", "alloc:700000", "ready"], env=job.env,
                         text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None
        assert [p.stdout.readline().strip() for _ in range(3)][2] == "ready"
        p.kill()
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # no controller: the next process takes the dead slot (slot 0) and reclaims it first
    out = run_probe(probe_bin, job.env, "init", "alloc:900000", "meminfo")
    assert out[1] == "alloc 0"
    assert _used(job) == 0


_HOLDER = r"""
import sys, time
from tgs.intercept import ofd, segment
seg = segment.open_segment(sys.argv[1])
j = int(sys.argv[2]) % seg.nslots
assert ofd.try_lock(seg.fd, segment.LOCK_SLOT_BASE + j)   # alive for as long as we live
s = seg.tenant_slot(j)
s.generation, s.state = 7, segment.SLOT_ACTIVE
h = seg.seg_header
h.ledger_lock = ((j + 1) << 48) | 7                      # holding the ledger lock ...
h.ledger_dirty, h.mem_used = 1, 123456789                # ... in the middle of an update
print("holding", flush=True)
time.sleep(120)
"""


def test_ledger_lock_stolen_from_sigkilled_holder(probe_bin: Path, job: Job) -> None:
    """A process SIGKILLed while it holds the ledger lock word: a live holder is waited for,
    a dead one (its slot lock gone) is detected and its half-done update repaired."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(job.seg.path), "-1"],
                              text=True, stdout=subprocess.PIPE)
    probe = None
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        probe = subprocess.Popen([str(probe_bin), "init", "alloc:1000", "ready"], env=job.env,
                                 text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert probe.stdout is not None
        assert probe.stdout.readline().strip() == "init 0"
        time.sleep(0.5)
        assert probe.poll() is None and _used(job) == 123456789   # still waiting: holder alive
        holder.kill()
        holder.wait(10)
        assert [probe.stdout.readline().strip() for _ in range(2)] == ["alloc 0", "ready"]
        assert _used(job) == 1000        # recomputed from the slots: the dead update is undone
        assert job.seg.seg_header.ledger_lock == 0
    finally:
        if probe is not None:
            finish(probe)
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert _used(job) == 0


def test_ledger_lock_of_a_dead_holder_in_the_slot_we_claim(probe_bin: Path, job: Job) -> None:
    """The holder died (in slot 0, holding the ledger word) before the next process started:
    that process claims slot 0, whose dead owner's id must not pass for its own."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(job.seg.path), "0"],
                              text=True, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    finally:
        holder.kill()
        holder.wait(10)
    out = run_probe(probe_bin, job.env, "init", "alloc:1000", "meminfo", timeout=20)
    assert out[1] == "alloc 0" and out[2].split()[1] == str(MiB - 1000)
    assert _used(job) == 0 and job.seg.seg_header.ledger_lock == 0


def test_many_processes_race_one_quota_exactly(probe_bin: Path, tmp_path: Path,
                                               shim_env: dict[str, str]) -> None:
    """16 processes race small allocations against one quota through the lock word: the sum
    admitted is exactly the quota, never more."""
    chunk, quota = 16384, MiB
    seg = segment.create(tmp_path / "race.seg", "race", mem_quota=quota, nslots=32)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path))
    job = Job(seg, env)
    procs = [subprocess.Popen([str(probe_bin), "init", f"alloc_until:{chunk}:1000", "ready"],
                              env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
             for _ in range(16)]
    try:
        admitted = 0
        for p in procs:
            assert p.stdout is not None
            lines = [p.stdout.readline().strip() for _ in range(3)]
            assert lines[0] == "init 0" and lines[2] == "ready", lines
            admitted += int(lines[1].split()[1])
        assert admitted * chunk == quota and _used(job) == quota
        assert sum(c.mem_used for c in seg.snapshot()) == quota
    finally:
        for p in procs:
            finish(p)
    assert _used(job) == 0
    seg.close()


def test_refused_allocation_first_reclaims_dead_processes(probe_bin: Path, job: Job) -> None:
    """A process that attached before another one died: when the dead process's memory is what
    its allocation lacks, the refusal path reclaims the dead slot and admits it."""
    dead = subprocess.Popen([str(probe_bin), "init", "alloc:700000", "ready"], env=job.env,
                            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    live = subprocess.Popen([str(probe_bin), "init", "meminfo", "ready", "alloc:900000",
                             "meminfo"], env=job.env, text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        assert dead.stdout is not None and live.stdout is not None
        assert [dead.stdout.readline().strip() for _ in range(3)][2] == "ready"
        assert [live.stdout.readline().strip() for _ in range(3)][2] == "ready"
        dead.kill()
        dead.wait(10)
        assert _used(job) == 700000                   # nobody has reclaimed it yet
        out, _ = live.communicate("go\n", timeout=20)
        assert out.splitlines()[0] == "alloc 0"
        assert out.splitlines()[1].split()[1] == str(MiB - 900000)
    finally:
        for p in (dead, live):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert _used(job) == 0
