"""Sharing with real PyTorch jobs, in every CI run: S1 of the evaluation suite with
bench/torch_train.py as both jobs (tgs-bench --torch, quick budget) under the default policy.

Asserted: the run completes and production keeps its speed (a wide margin for a loaded 2-core
machine).  Reported, not asserted: the harvest (its target: >= 0.6, docs/policy.md);
docs/benchmarks.md has the full-length figures.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import pytest
from proc_helpers import tool

pytestmark = pytest.mark.timeout(240)


def test_default_policy_with_pytorch_jobs(fw_python: Path, fw_env: dict[str, str],
                                          tmp_path: Path) -> None:
    p = subprocess.run([tool("tgs-bench"), "--gpu", "sim", "--torch", "--quick", "--scenario",
                        "S1", "--policy", "adaptive", "--no-plots", "--json", "--out",
                        str(tmp_path / "out")], env=fw_env, capture_output=True, text=True,
                       timeout=220)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["torch"] is True
    r = doc["scenarios"]["S1"]["policies"]["adaptive"]
    assert r["prod_vs_solo"] >= 0.7, r
    assert 0 <= r["harvest"] <= 1.5
    warnings.warn(f"real PyTorch S1, default policy (quick): production {r['prod_vs_solo']:.2f} "
                  f"of solo, p99 {r['p99_vs_solo']:.2f}x, harvest {r['harvest']:.2f} of the idle "
                  "GPU (target >= 0.6)", stacklevel=1)
