"""The controller's Prometheus endpoint, scraped over HTTP and parsed."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from tools_helpers import Ctl, Probe, probe_cmd, tool, wait_for

GIB = 1 << 30
ROOT = Path(__file__).resolve().parents[2]


def scrape(ctl: Ctl) -> dict[str, list]:
    url = ctl.status()["metrics_url"].replace("0.0.0.0", "127.0.0.1")
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def one(m: dict[str, list], name: str, **labels: str) -> float:
    hits = [s.value for s in m.get(name, []) if all(s.labels.get(k) == v
                                                    for k, v in labels.items())]
    assert len(hits) == 1, (name, labels, m.get(name))
    return hits[0]


def test_job_and_gpu_metrics(ctl: Ctl, probes: list[Probe]) -> None:
    p = Probe(probe_cmd("--name", "m1", "--mem", "2GiB"), ctl.env)
    probes.append(p)
    assert p.ask(f"alloc {GIB}") == "alloc 0"
    r = ctl.run("tgs-run", "--name", "busy", "--", str(ROOT / "build/bin/tgs-workload"),
                "--seconds", "1.5", "--gap-ms", "0")
    assert r.returncode == 0, r.stderr
    m = scrape(ctl)
    assert one(m, "tgs_job_memory_used_bytes", job="m1") == GIB
    assert one(m, "tgs_job_memory_quota_bytes", job="m1", priority="opportunistic") == 2 * GIB
    assert one(m, "tgs_job_processes", job="m1") == 1
    assert one(m, "tgs_gpu_memory_total_bytes", gpu="0") > 0
    assert one(m, "tgs_gpu_jobs_memory_used_bytes", gpu="0") == GIB
    assert one(m, "tgs_controller_steps_total") > 0
    assert "tgs_job_throttled_seconds_total" in m and "tgs_job_work_units_total" in m
    # the workload ran 1.5 s alone on the GPU: its work shows in the GPU's utilisation
    util = m.get("tgs_gpu_utilization_ratio")
    assert util and 0.0 <= util[0].value <= 1.0
    # placement signals, per GPU, the same figures as status.placement
    place = {g["index"]: g for g in ctl.status()["placement"]}
    duty = one(m, "tgs_gpu_production_duty", gpu="0")
    assert 0.0 <= duty <= 1.0 and 0 in place
    idle = one(m, "tgs_gpu_production_idle_seconds_total", gpu="0")
    busy = one(m, "tgs_gpu_production_busy_seconds_total", gpu="0")
    assert idle > 0 and busy >= 0              # no production job here: the GPU was idle
    assert wait_for(lambda: one(scrape(ctl), "tgs_gpu_production_idle_seconds_total",
                                gpu="0") > idle, 5)


def test_work_counter_grows(ctl: Ctl) -> None:
    with subprocess.Popen([tool("tgs-run"),
                           "--name", "w", "--", str(ROOT / "build/bin/tgs-workload"),
                           "--seconds", "3"], env=ctl.env, stdout=subprocess.DEVNULL) as wl:
        try:
            assert wait_for(lambda: "tgs_job_work_units_total" in scrape(ctl)
                            and any(s.labels["job"] == "w" and s.value > 0
                                    for s in scrape(ctl)["tgs_job_work_units_total"]), 10)
            first = one(scrape(ctl), "tgs_job_work_units_total", job="w")
            assert wait_for(lambda: one(scrape(ctl), "tgs_job_work_units_total", job="w")
                            > first, 5)
        finally:
            # tgs-run's workload ends by itself (3 s): killing the wrapper would orphan it
            try:
                wl.wait(30)
            except subprocess.TimeoutExpired:
                wl.kill()


def test_work_total_is_exact(ctl: Ctl) -> None:
    """The work counter is summed from the shims' lane counters, not estimated from rates."""
    import json
    import os

    reply = json.loads(ctl.run("tgsctl", "add", "exact", "--priority", "production",
                               "--json").stdout)
    env = dict(ctl.env)
    env.update(reply["env"])
    if "LD_PRELOAD" in os.environ:
        env["LD_PRELOAD"] = reply["env"]["LD_PRELOAD"]
    r = subprocess.run([str(ROOT / "build/bin/tgs-workload"), "--iters", "30", "--warmup", "0",
                        "--kernels", "3", "--kernel-us", "200", "--gap-ms", "1"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    summary, geometry = json.loads(lines[-1]), json.loads(lines[0])["geometry"]
    expected = summary["work_units"]
    assert expected > 0
    assert wait_for(lambda: one(scrape(ctl), "tgs_job_work_units_total", job="exact")
                    == expected, 10), (expected, scrape(ctl).get("tgs_job_work_units_total"))
    assert one(scrape(ctl), "tgs_job_launches_total", job="exact") == summary["kernels"]
    # blocks: the grid of every kernel, counted by the shim beside the threads
    blocks = one(scrape(ctl), "tgs_job_blocks_total", job="exact")
    assert blocks == summary["kernels"] * geometry["grid"] == expected // geometry["block"]
    assert ctl.jobs()["exact"]["blocks_total"] == blocks         # and in the job's stats
