"""Fixtures for the third-party client tests: kernels built by nvcc, a job segment with a quota."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_helpers import PROGS, QUOTA, QuotaJob, nvcc_path
from tgs.intercept import segment


@pytest.fixture(scope="session")
def nvcc_kernels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """kernels.cu as an sm_90 cubin, an ELF+PTX fatbin and a PTX-only fatbin."""
    nvcc = nvcc_path()
    if not nvcc:
        pytest.skip("nvcc is not installed")
    d = tmp_path_factory.mktemp("nvcc")
    src = str(PROGS / "kernels.cu")
    out = {"cubin": d / "k.cubin", "fatbin": d / "k.fatbin", "ptx_fatbin": d / "kp.fatbin"}
    cmds = [
        [nvcc, "-arch=sm_90", "-cubin", "-o", str(out["cubin"]), src],
        [nvcc, "-gencode", "arch=compute_90,code=[sm_90,compute_90]", "-fatbin", "-o",
         str(out["fatbin"]), src],
        [nvcc, "-gencode", "arch=compute_90,code=compute_90", "-fatbin", "-o",
         str(out["ptx_fatbin"]), src],
    ]
    for cmd in cmds:
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return out


@pytest.fixture
def quota_job(tmp_path: Path, sim_env: dict[str, str], shim_lib: Path) -> Iterator[QuotaJob]:
    """The shim preloaded, in a job named 'client-job' with a 64 MiB memory quota."""
    seg = segment.create(tmp_path / "job.seg", "client-job", mem_quota=QUOTA, nslots=8)
    env = dict(sim_env)
    env["LD_PRELOAD"] = str(shim_lib)
    env["TGS_SEGMENT"] = str(seg.path)
    try:
        yield QuotaJob(seg, env)
    finally:
        seg.close()
