"""Every launch path counts thread blocks (grid size, TGS's unit) beside work (threads) in its
lane: kernels with 1D and 3D grids, cuLaunchKernelEx, cooperative launches and graph launches
(their kernel nodes' grids); a reclaimed slot's blocks fold into the header's retired_blocks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from shim_helpers import Job, finish, run_probe
from tgs.intercept import tenant
from tgs.intercept.segment import SlotDefaults

pytestmark = pytest.mark.timeout(60)

# (probe command, blocks, threads, kernels)
LAUNCHES = [
    ("launch:3:40:32", 3 * 40, 3 * 40 * 32, 3),
    ("grid3:2:5:3:2:32:2", 2 * 5 * 3 * 2, 2 * 30 * 64, 2),       # 3D grid, 2D block
    ("ex:2:7:64", 2 * 7, 2 * 7 * 64, 2),
    ("coop:1:9:32", 9, 9 * 32, 1),
    ("graph:3:2:11:32", 3 * 2 * 11, 3 * 2 * 11 * 32, 6),         # 3 nodes, 2 launches
]


def _retired(job: Job) -> tuple[int, int, int]:
    """What the probe's slot left in the header when it exited (its slot is free again)."""
    assert job.seg.snapshot() == []
    h = job.seg.seg_header
    return int(h.retired_blocks), int(h.retired_work), int(h.retired_launches)


@pytest.mark.parametrize("path", ["fast", "slow"])
def test_every_launch_path_counts_blocks(probe_bin: Path, job: Job, path: str) -> None:
    if path == "slow":      # a rate far above what these launches need: the slow path counts
        job.seg.set_defaults(SlotDefaults(rate=1 << 40, burst=1 << 40))
    out = run_probe(probe_bin, job.env, "init", *(cmd for cmd, *_ in LAUNCHES))
    assert all(ln.endswith(" 0") for ln in out), out
    blocks, work, launches = _retired(job)
    assert blocks == sum(b for _, b, _, _ in LAUNCHES)
    assert work == sum(w for _, _, w, _ in LAUNCHES)
    assert launches == sum(k for *_, k in LAUNCHES)


@pytest.mark.parametrize("cmd,blocks,work,kernels", LAUNCHES[1:2] + LAUNCHES[-1:])
def test_one_launch_kind_bumps_blocks_by_its_grid(probe_bin: Path, job: Job, cmd: str,
                                                  blocks: int, work: int, kernels: int) -> None:
    run_probe(probe_bin, job.env, "init", cmd)
    assert _retired(job) == (blocks, work, kernels)


def _ready(exe: Path, env: dict[str, str], *cmds: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([str(exe), *cmds, "ready"], env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout is not None
    for _ in cmds:
        assert p.stdout.readline().split()[-1] == "0"
    assert p.stdout.readline().strip() == "ready"
    return p


def test_dead_slot_reclaimed_folds_its_blocks_into_the_header(probe_bin: Path, job: Job) -> None:
    dead = _ready(probe_bin, job.env, "init", "launch:4:25:64")       # 100 blocks
    try:
        dead.kill()                                                    # dies holding its slot
        dead.wait(10)
        (c,) = job.seg.snapshot()
        assert c.blocks == 100
    finally:
        finish(dead)
    live = _ready(probe_bin, job.env, "init", "graph:2:1:6:32")       # reclaims it; 12 of its own
    try:
        h = job.seg.seg_header
        assert int(h.retired_blocks) == 100 and int(h.retired_work) == 100 * 64
        # the controller's reader (pread) sees the same split
        rd = tenant.SegReader.open(job.seg.path, job.seg.nslots, job.seg.job_name,
                                   job.seg.control.created_ns)
        try:
            r = rd.read()
        finally:
            rd.close()
        assert r.damaged is None
        assert r.retired[3] == 100
        assert [s.blocks for s in r.slots] == [12]
    finally:
        finish(live)
    assert int(job.seg.seg_header.retired_blocks) == 112                # and its own at exit
