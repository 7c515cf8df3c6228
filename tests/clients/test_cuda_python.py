"""cuda-python (cuda.bindings.driver) on the simulator and under the shim with a quota."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
from client_helpers import QUOTA, QuotaJob, quota_lines, require_module, run_json

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_cuda_python() -> None:
    require_module("cuda.bindings", "cuda-bindings")


def _check_flow(out: dict[str, object]) -> None:
    assert out["junk"] == "CUDA_ERROR_INVALID_IMAGE"
    assert out["unknown_kernel"] == "CUDA_ERROR_NOT_FOUND"
    assert out["global_size"] == 64  # .b8 table[64]
    assert out["regs"] == 32 and out["occupancy_256"] == 8
    assert out["roundtrip"] is True and out["memset"] is True
    assert out["host_ptr_type"] == 1 and out["dev_ptr_type"] == 2  # HOST, DEVICE
    assert out["host_func_called"] == 1
    assert out["graph_nodes"] == 2
    # 65536 threads x 1 ns per kernel: the event spans at least the kernel
    assert float(out["elapsed_ms"]) >= 0.0655  # type: ignore[arg-type]
    # three replays of two kernel nodes: the sum of their times
    assert float(out["graph_replay_ms"]) >= 6 * 0.0655  # type: ignore[arg-type]


def test_driver_flow_on_the_simulator(sim_env: dict[str, str]) -> None:
    r = run_json("cuda_python_flow.py", sim_env, "-", str(1 << 40))
    _check_flow(r.out)
    assert r.out["driver_version"] == 13000 and r.out["sms"] == 108
    assert r.out["too_big"] == "CUDA_ERROR_OUT_OF_MEMORY"


def test_nvcc_cubin_module_and_library(sim_env: dict[str, str],
                                       nvcc_kernels: dict[str, Path]) -> None:
    r = run_json("cuda_python_flow.py", sim_env, str(nvcc_kernels["cubin"]))
    _check_flow(r.out)
    assert r.out["cubin_global_size"] == 400  # float gbuf[100]
    assert r.out["cubin_library_kernel"] == "CUDA_SUCCESS"


@pytest.mark.parametrize("per_thread", ["0", "1"])
def test_driver_flow_under_the_shim_with_a_quota(quota_job: QuotaJob, per_thread: str) -> None:
    # with 1, cuda-bindings resolves every entry point with the per-thread default-stream
    # flag: the shim must substitute its hooks for the _ptsz/_ptds variants too
    env = dict(quota_job.env, CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=per_thread)
    r = run_json("cuda_python_flow.py", env, "-", str(2 * QUOTA))
    _check_flow(r.out)
    assert r.out["mem_total"] == QUOTA  # the device shows the job's quota
    assert r.out["too_big"] == "CUDA_ERROR_OUT_OF_MEMORY"
    lines = quota_lines(r.stderr)
    assert len(lines) == 1 and "'client-job'" in lines[0] and str(QUOTA) in lines[0]
    assert quota_job.seg.ledger()[0] == 0  # everything was given back at exit


def _resolves(env: dict[str, str], name: bytes) -> bool:
    lib = ctypes.CDLL(str(Path(env["LD_LIBRARY_PATH"].split(":")[0]) / "libcuda.so.1"))
    pfn, status = ctypes.c_void_p(), ctypes.c_int()
    lib.cuGetProcAddress_v2(name, ctypes.byref(pfn), 13000, ctypes.c_uint64(0),
                            ctypes.byref(status))
    return status.value == 0 and bool(pfn.value)


def test_cuda_core_compiles_allocates_and_launches(sim_env: dict[str, str]) -> None:
    require_module("cuda.core", "cuda-core")
    # cuda.core checks cuStreamIsCapturing before it allocates (stream capture is modelled)
    assert _resolves(sim_env, b"cuStreamIsCapturing")
    r = run_json("cuda_core_flow.py", sim_env)
    assert r.out == {"name": "TGS Simulated GPU", "cc": [9, 0], "event_done": True}
