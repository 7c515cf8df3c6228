"""Stream capture on a real GPU: the simulator's rules against the real driver's, and the shim.

The capture scenarios of tests/sim (progs/capture.c) run on the real driver and on the simulator;
every return code and count must agree (ids and timings aside): where they differ the
simulator's model (docs/simulator.md, "Stream capture") is wrong.  Then the shim's capture probe
(tests/shim/progs/capture.c) captures under an in-flight cap on the real driver: the capture must
succeed, nothing be charged until the graph is replayed.  Skipped without a real GPU.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gpu_helpers import ROOT, gpu_env
from tgs.intercept import segment
from tgs.intercept.segment import SlotDefaults

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300)]
SHIM = ROOT / "build" / "libtgs.so"
SIM_DIR = ROOT / "build" / "sim"
SCENARIOS = ["basic", "streamsync", "streamquery", "ctxsync", "legacy", "eventquery",
             "eventsync", "malloc", "nonblocking", "relaxed", "modes", "wrongthread", "forkjoin",
             "unjoined", "crossing", "memcpy", "plainevent", "updatedeps", "otherstream",
             "perthread"]
NOT_COMPARED = {"id", "capture_ms", "replay_ms"}


def build(src: Path, tmp: Path) -> Path:
    exe = tmp / src.stem
    subprocess.run(["gcc", "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                    f"-I{ROOT / 'contracts' / 'include'}", str(src), "-o", str(exe),
                    "-Wl,--no-as-needed", f"-L{SIM_DIR}", "-lcuda", "-ldl", "-lpthread"],
                   check=True, capture_output=True, text=True)
    return exe


def scenarios(exe: Path, env: dict[str, str], name: str) -> dict[str, str]:
    p = subprocess.run([str(exe), name], env=env, capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and lines[:1] == ["init 0"], p.stdout + p.stderr
    _, *kv = lines[1].split()
    return {k: v for k, v in (item.split("=", 1) for item in kv) if k not in NOT_COMPARED}


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_simulator_captures_as_the_real_driver_does(tmp_path: Path, name: str) -> None:
    exe = build(ROOT / "tests" / "sim" / "progs" / "capture.c", tmp_path)
    real = scenarios(exe, gpu_env(), name)
    sim_env = dict(gpu_env(), TGS_SIM_STATE=str(tmp_path / "sim-state"),
                   LD_LIBRARY_PATH=str(SIM_DIR))
    sim = scenarios(exe, sim_env, name)
    assert sim == real


def test_a_capture_under_the_shim_and_an_inflight_cap_on_the_real_driver(tmp_path: Path) -> None:
    exe = build(ROOT / "tests" / "shim" / "progs" / "capture.c", tmp_path)
    seg = segment.create(tmp_path / "job.seg", "gpu-capture", nslots=8)
    seg.set_defaults(SlotDefaults(inflight_cap=1000 * 1000))
    env = dict(gpu_env(), LD_PRELOAD=str(SHIM), TGS_SEGMENT=str(seg.path))
    try:
        p = subprocess.run([str(exe), "init", "kick:2:1000:1000", "sync", "capture:5:1000:1000",
                            "mixed:4:1000:1000", "replay:3"], env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        out = [ln.split() for ln in p.stdout.splitlines()]
        assert out[:3] == [["init", "0"], ["kick", "0"], ["sync", "0"]]
        for line, kernels in ((out[3], 5), (out[4], 4)):
            assert line[1:5] == ["0", "0", "0", str(kernels)], line   # capture succeeded
        assert out[4][8] == "0"
        assert out[5][:3] == ["replay", "0", "0"]
        slot = seg.live_slots() or list(range(seg.nslots))
        launches = sum(seg.counters(i).launches for i in slot) + int(seg.header.retired_launches)
        # 2 kicks + 4 launches on the other stream during "mixed" + 3 replays of its 4 kernels
        assert launches == 2 + 4 + 3 * 4
    finally:
        seg.close()
