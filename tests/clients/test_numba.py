"""numba-cuda (@cuda.jit, device arrays) on the simulator and under the shim with a quota."""

from __future__ import annotations

import pytest
from client_helpers import QUOTA, MiB, QuotaJob, quota_lines, require_module, run_json

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_numba() -> None:
    require_module("numba_cuda", "numba-cuda")


def test_jit_kernel_and_arrays_on_the_simulator(sim_env: dict[str, str]) -> None:
    r = run_json("numba_flow.py", sim_env)
    assert r.out["roundtrip"] is True and r.out["stream_roundtrip"] is True
    assert r.out["device"] == "TGS Simulated GPU"
    assert r.out["total"] == 16 * 1024 * MiB


def test_quota_shows_and_refuses_under_the_shim(quota_job: QuotaJob) -> None:
    r = run_json("numba_flow.py", quota_job.env, str(2 * QUOTA))
    assert r.out["roundtrip"] is True and r.out["stream_roundtrip"] is True
    assert r.out["total"] == QUOTA  # get_memory_info() shows the quota
    assert 0 < int(r.out["free"]) < QUOTA  # type: ignore[arg-type]
    assert "CUDA_ERROR_OUT_OF_MEMORY" in str(r.out["too_big"])
    lines = quota_lines(r.stderr)  # the one line that says a quota refused it
    assert len(lines) == 1, r.stderr[-2000:]
    assert "'client-job'" in lines[0] and f"allocation of {2 * QUOTA} bytes" in lines[0]
    assert f"quota {QUOTA}" in lines[0]
