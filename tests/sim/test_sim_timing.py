"""The time model: throughput, time slicing between processes, events and graphs.

Margins are generous (a noisy 2-core machine shared with other jobs); shares
are measured side by side so that machine noise affects both sides alike.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sim_helpers import start_at
from tgs.intercept import simstate

pytestmark = pytest.mark.timeout(90)

KERNEL_NS = 1024 * 1024  # default shape: 1024 blocks x 1024 threads x 1 ns


def _run(prog: Path, env: dict[str, str], *args: str) -> dict[str, float]:
    r = subprocess.run([str(prog), *args], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _run_together(prog: Path, env: dict[str, str], *argsets: list[str]) -> list[dict[str, float]]:
    when = start_at()
    procs = [
        subprocess.Popen([str(prog), "-S", when, *a], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for a in argsets
    ]
    try:
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    return [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]


def test_single_workload_matches_model(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> None:
    out = _run(sim_progs["load"], sim_env, "-n", "400", "-e")
    model_s = 400 * KERNEL_NS / 1e9
    assert out["wall_s"] == pytest.approx(model_s, rel=0.10)
    # events report simulated completion times: exact, whatever the host noise
    assert out["event_ms"] == pytest.approx(model_s * 1e3, rel=0.002)


def test_cost_factor_and_ns_per_thread(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> None:
    env = dict(sim_env, TGS_SIM_NS_PER_THREAD="0.5")
    out = _run(sim_progs["load"], env, "-n", "50", "-c", "3", "-e")
    assert out["event_ms"] == pytest.approx(50 * KERNEL_NS * 0.5 * 3 / 1e6, rel=0.002)


def test_graph_takes_sum_of_kernels(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> None:
    out = _run(sim_progs["load"], sim_env, "-n", "20", "-G", "5", "-g", "500", "-e")
    assert out["kernels"] == 100
    assert out["event_ms"] == pytest.approx(100 * 500 * 1024 / 1e6, rel=0.002)


def test_two_saturating_processes_share_evenly(
    sim_progs: dict[str, Path], sim_env: dict[str, str]
) -> None:
    env = dict(sim_env, TGS_SIM_QUEUE_DEPTH="4")
    # one process has kernels twice as long: shares are of device time, not launches
    a, b = _run_together(sim_progs["load"], env, ["-t", "1.5"], ["-t", "1.5", "-c", "2"])
    busy_a, busy_b = a["kernels"] * KERNEL_NS, b["kernels"] * KERNEL_NS * 2
    share = busy_a / (busy_a + busy_b)
    assert 0.40 <= share <= 0.60, (a, b)
    snap = simstate.read_state(env["TGS_SIM_STATE"])
    dev = snap.devices[0]
    assert dev.busy_ns >= busy_a + busy_b - 2 * KERNEL_NS
    assert dev.switches > 10  # they really alternated


def test_light_and_heavy_share_as_time_slices_predict(
    sim_progs: dict[str, Path], sim_env: dict[str, str]
) -> None:
    env = dict(sim_env, TGS_SIM_QUEUE_DEPTH="4", TGS_SIM_TIMESLICE_US="4000")
    light_args = ["-t", "1.5", "-g", "1000", "-s", "1", "-p", "2000"]  # 1 ms kernel, 2 ms idle
    alone = _run(sim_progs["load"], env, *light_args)
    heavy, light = _run_together(sim_progs["load"], env, ["-t", "1.5"], light_args)
    k_light = 1000 * 1024 / 1e9
    lat_alone = alone["mean_lat_us"] / 1e6
    lat_shared = light["mean_lat_us"] / 1e6
    # Alone, a light kernel waits for nothing; shared, it waits for the rest of
    # the heavy job's slice (at most one slice), never more.  The noise margins are a loaded
    # 2-core machine's: the behaviour is the order of magnitude (a slice, not the heavy job).
    assert lat_alone < k_light + 0.004
    assert lat_shared > lat_alone
    assert lat_shared < k_light + 0.004 + 0.008  # kernel + one slice + noise
    # The heavy job gets what the light one leaves: together the device is busy.
    busy_light = light["kernels"] * k_light
    busy_heavy = heavy["kernels"] * KERNEL_NS / 1e9
    window = max(heavy["wall_s"], light["wall_s"])
    assert busy_light + busy_heavy >= 0.7 * window
    assert busy_light / (busy_light + busy_heavy) < 0.4


@pytest.mark.parametrize("loading", ["", "LAZY", "EAGER"])
def test_lazy_loading_costs_a_functions_first_launch(sim_progs: dict[str, Path],
                                                     sim_env: dict[str, str],
                                                     loading: str) -> None:
    """TGS_SIM_LAZY_LOAD_US: under lazy loading (the default) the first launch of a function
    takes that much host time, once; five launches of one function pay 0.2 s, not 1 s.
    CUDA_MODULE_LOADING=EAGER pays nothing at launch."""
    env = dict(sim_env, TGS_SIM_LAZY_LOAD_US="200000")
    if loading:
        env["CUDA_MODULE_LOADING"] = loading
    wall = _run(sim_progs["load"], env, "-n", "5", "-g", "1", "-b", "32")["wall_s"]
    if loading == "EAGER":
        assert wall < 0.19, wall
    else:
        assert 0.2 <= wall < 0.6, wall
