"""The PyTorch scenarios T1-T8: their definitions, command lines, solo sharing, skip and the
go-signal start protocol (no PyTorch needed), and one short T1 run end to end (slow; skipped
without the frameworks venv)."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tgs.bench import harness as H
from tgs.bench import scenarios as SC
from tgs.bench import suite as SU
from tgs.bench import torch_infer, torch_train
from tgs.bench import torch_scenarios as T
from tgs.bench.harness import job_argv
from tgs.bench.main import suite_keys
from tgs.bench.torch_calibrate import parse_job
from tgs.testbed.frameworks_venv import torch_available
from tgs.testbed.workload import WorkloadSpec

pytestmark = pytest.mark.timeout(30)
PARSERS = {"train": torch_train.parse, "infer": torch_infer.parse}


def _opts(argv: list[str]) -> list[str]:
    """What follows the program's path."""
    return argv[2:]


@pytest.mark.parametrize("key", SC.TORCH_KEYS)
@pytest.mark.parametrize("budget", [SC.FULL, SC.QUICK])
def test_every_torch_scenario_builds_and_parses(key: str, budget: SC.Budget) -> None:
    for pol in (None, *SC.POLICIES):
        sc = SC.build(key, budget, pol)
        assert sc.key == key and SC.needs_torch(sc) and all(j.torch for j in sc.jobs)
        (p,), (o,) = sc.production, sc.opportunistic
        assert o.start_s < p.start_s and p.start_s + p.seconds < o.start_s + o.seconds
        for j in sc.jobs:
            assert j.torch is not None
            argv = job_argv(j)
            assert argv[1].endswith(SC.TORCH_PROGRAMS[j.torch.program])
            a = PARSERS[j.torch.program](_opts(argv))     # the program accepts its options
            assert a.go_signal and a.name == j.name and a.seconds == j.seconds
            assert a.report_ms == SC.REPORT_MS


def test_torch_scenarios_join_the_full_run_where_pytorch_is_installed() -> None:
    assert set(SC.TORCH_KEYS) <= set(SC.EXTRA_KEYS)
    assert not set(SC.TORCH_KEYS) & (set(SC.ALL_KEYS) | set(SC.QUICK_KEYS))
    assert T.KEYS == SC.TORCH_KEYS
    full = suite_keys((), False, True, None)
    assert full == [*SC.ALL_KEYS, *SC.TORCH_KEYS]
    assert suite_keys((), False, True, "no PyTorch") == list(SC.ALL_KEYS)
    assert suite_keys((), True, False, None) == list(SC.QUICK_KEYS)
    assert suite_keys(("t2", "s1"), False, False, None) == ["T2", "S1"]


def test_torch_scenario_shapes() -> None:
    def parsed(key: str, role: str) -> argparse.Namespace:
        sc = SC.build(key, SC.FULL, "adaptive")
        job = (sc.production if role == "prod" else sc.opportunistic)[0]
        assert job.torch is not None
        return PARSERS[job.torch.program](_opts(job_argv(job)))

    p1 = parsed("T1", "prod")
    assert (p1.optim, p1.sync_every, p1.gap_ms, p1.hidden) == ("adam", 1, 4.0, T.PROD_HIDDEN)
    o1 = parsed("T1", "opp")
    assert (o1.optim, o1.gap_ms, o1.graph, o1.hidden) == ("sgd", 0.0, False, 4096)
    assert parsed("T2", "prod").sync_every == 10
    assert parsed("T3", "prod").sync_every == 1
    o3 = parsed("T3", "opp")
    assert o3.graph and o3.gap_ms == 0.0
    for key, load in T.INFERENCE_LOADS.items():
        sc = SC.build(key, SC.FULL, "adaptive")
        server = sc.production[0].torch
        assert sc.latency and server is not None and server.program == "infer"
        assert parsed(key, "prod").rate == pytest.approx(load * T.INFER_CAPACITY_RPS, abs=0.1)
        assert parsed(key, "opp").hidden == 4096


def test_torch_job_argv_is_data() -> None:
    job = SC.torch_job("train", gap_ms=4.0, hidden=2, graph=True, optim="adam", compile=False)
    assert job.argv() == ["--gap-ms", "4.0", "--hidden", "2", "--graph", "--optim", "adam"]
    assert job.get("hidden") == 2 and job.get("nothing", 7) == 7
    with pytest.raises(ValueError):
        SC.torch_job("serve")
    assert parse_job("train:graph=1,hidden=2816,gap_ms=0") == SC.torch_job(
        "train", graph=True, hidden=2816, gap_ms=0)


def test_use_torch_converts_workload_jobs_and_keeps_pytorch_ones() -> None:
    s1 = SC.use_torch(SC.build("S1", SC.QUICK, "adaptive"))
    prod, opp = (torch_train.parse(_opts(job_argv(j))) for j in (s1.production[0],
                                                                  s1.opportunistic[0]))
    assert prod.gap_ms == 1.7 and prod.hidden == 1024 and opp.hidden == 4096 and prod.go_signal
    s3 = SC.use_torch(SC.build("S3", SC.QUICK, "adaptive"))
    assert torch_train.parse(_opts(job_argv(s3.production[0]))).phase_list
    t3 = SC.build("T3", SC.QUICK, "adaptive")
    assert SC.use_torch(t3).jobs == t3.jobs


def test_solo_baselines_are_shared_only_by_identical_jobs() -> None:
    t1, t2, t3 = (SC.build(k, SC.FULL, None) for k in ("T1", "T2", "T3"))
    key = SU._solo_key
    assert key(t1.production[0], 6.0) == key(t3.production[0], 6.0)     # the same program
    assert key(t1.production[0], 6.0) != key(t2.production[0], 6.0)     # --sync-every 10
    assert key(t1.opportunistic[0], 6.0) != key(t3.opportunistic[0], 6.0)
    # the plan counts each run's PyTorch start-up
    bare = SC.RUN_OVERHEAD_S * (len(SC.POLICIES) + 2)
    assert SC.estimate_s(SC.QUICK, ["T1"]) >= bare + SC.TORCH_START_S * (len(SC.POLICIES) + 2)


def test_skipped_with_one_line_without_pytorch(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SU, "torch_available", lambda: "/x/python has no PyTorch")
    lines: list[str] = []
    suite = SU.Suite(SU.SuiteConfig(keys=["T1"], out=tmp_path, log=lines.append))
    try:
        assert suite.scenario("T1") is None
    finally:
        suite.close()
    assert lines == ["T1: skipped: its jobs are PyTorch programs and /x/python has no PyTorch"]


CHILD = """
import sys, time
sys.path.insert(0, {bench!r})
from job_report import arm_go, emit, wait_go
arm_go()
print("armed", flush=True)
time.sleep(0.5)                 # "warming up": a go sent now stays pending
wait_go("j", {{"now": False}})
emit("start", "j", t=time.monotonic())
"""


def test_go_signal_sent_during_the_warm_up_is_kept(tmp_path: Path) -> None:
    bench = str(Path(torch_train.__file__).parent)
    p = subprocess.Popen([sys.executable, "-c", CHILD.format(bench=bench)],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "armed"
        p.send_signal(signal.SIGUSR1)
        sent = time.monotonic()
        out, _ = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0
    assert '"type": "ready"' in out and '"type": "start"' in out
    assert time.monotonic() - sent < 5


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_t1_end_to_end_on_the_simulator(tmp_path: Path, shim_lib: Path, sim_lib: Path,
                                        workload_bin: Path) -> None:
    why = torch_available()
    if why is not None:
        pytest.skip(why)
    out = tmp_path / "res"
    doc = SU.run_suite(SU.SuiteConfig(keys=["T1"], policies=["adaptive"], budget=SC.QUICK,
                                      gpu="sim", out=out, plots=False, log=lambda s: None))
    assert (out / "results.json").exists() and "| T1 | adaptive |" in \
        (out / "results.md").read_text()
    t1 = doc["scenarios"]["T1"]
    m = t1["policies"]["adaptive"]
    assert "errors" not in m, m
    # the clock starts after the warm-up: every job ran its whole schedule
    assert m["window_s"] == pytest.approx(SC.QUICK.shape_s, abs=0.4)
    assert t1["baseline"]["prod_it_per_s"]["prod"] > 20
    assert 0.5 < m["prod_vs_solo"] < 1.5


FAKE_JOB = """
import sys, time
sys.path.insert(0, {bench!r})
from job_report import Progress, arm_go, emit, wait_go
name, seconds = sys.argv[1], float(sys.argv[2])
born = time.monotonic()
arm_go()
time.sleep(0.4)                 # the warm-up
wait_go(name, {{"now": False}})
go = time.monotonic()
emit("start", name, born=born, go=go)
time.sleep(seconds)
Progress(name, 0, go).summary(time.monotonic() - go)
"""


def test_harness_warms_up_in_start_order_then_keeps_the_schedule(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_jobs with stand-ins for the PyTorch programs (same go protocol, no torch): the
    later job is launched only once the earlier one is ready, the clock starts after both
    are, and each run starts at its scheduled offset."""
    bench = str(Path(torch_train.__file__).parent)
    monkeypatch.setattr(H, "job_argv", lambda j: [sys.executable, "-c",
                                                  FAKE_JOB.format(bench=bench), j.name,
                                                  repr(j.seconds)])
    spec = WorkloadSpec()
    jobs = [SC.JobDef("prod", SC.PRODUCTION, spec, 0.5, 0.2, torch=T.PROD_TRAIN),
            SC.JobDef("opp", SC.OPPORTUNISTIC, spec, 0.0, 1.0, torch=T.OPP_TRAIN)]
    rec = H.run_jobs("TX", "fake", None, jobs, "sim", tmp_path / "logs", tmp_path)
    prod, opp = rec.jobs["prod"], rec.jobs["opp"]
    assert not prod.error and not opp.error and prod.start and opp.start
    assert prod.start["born"] > opp.start["born"] + 0.4        # after opp's warm-up
    assert opp.start["go"] == pytest.approx(rec.t0, abs=0.15)
    assert prod.start["go"] - opp.start["go"] == pytest.approx(0.5, abs=0.15)
    assert rec.t0 > prod.start["born"] + 0.4                   # both ready before the clock
