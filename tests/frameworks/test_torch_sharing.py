"""Sharing with real PyTorch jobs, in every CI run: S1 of the evaluation suite with
bench/torch_train.py as both jobs (tgs-bench --torch, quick budget) under the default policy.

Asserted: the run completes, the opportunistic job starts at tgs-run's CPU priority (nice 19),
and production keeps its speed (a wide margin for a loaded 2-core machine).  Reported, not
asserted: the harvest (its target: >= 0.6, docs/policy.md); docs/benchmarks.md has the
full-length figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest
from proc_helpers import tool

pytestmark = pytest.mark.timeout(240)   # two runs of ~40 s at most, 100 s each allowed


def _quick_s1(env: dict[str, str], out: Path) -> dict:
    p = subprocess.run([tool("tgs-bench"), "--gpu", "sim", "--torch", "--quick", "--scenario",
                        "S1", "--policy", "adaptive", "--no-plots", "--json", "--out",
                        str(out)], env=env, capture_output=True, text=True, timeout=100)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["torch"] is True
    # each job ran at the CPU priority tgs-run gives its role
    jobs = json.loads((out / "runs" / "S1-adaptive.json").read_text())["jobs"].values()
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert {(j["role"], j["nice"]) for j in jobs} == {("production", own),
                                                      ("opportunistic", max(19, own))}, jobs
    r: dict = doc["scenarios"]["S1"]["policies"]["adaptive"]
    assert 0 <= r["harvest"] <= 1.5, r
    return r


def test_default_policy_with_pytorch_jobs(fw_python: Path, fw_env: dict[str, str],
                                          tmp_path: Path) -> None:
    """Production keeps >= 0.7 of its solo rate.  The quick run measures 1.5 s windows, and a
    host that stalls this machine for part of one (once seen in CI: 0.54) is told apart from
    the policy by a second run: a policy that slows production fails both."""
    r = _quick_s1(fw_env, tmp_path / "out")
    first = r["prod_vs_solo"]
    if first < 0.7:
        r = _quick_s1(fw_env, tmp_path / "again")
    assert r["prod_vs_solo"] >= 0.7, (first, r)
    warnings.warn(f"real PyTorch S1, default policy (quick): production {r['prod_vs_solo']:.2f} "
                  f"of solo, p99 {r['p99_vs_solo']:.2f}x, harvest {r['harvest']:.2f} of the idle "
                  "GPU (target >= 0.6)" + (f"; first run {first:.2f}" if first < 0.7 else ""),
                  stacklevel=1)
