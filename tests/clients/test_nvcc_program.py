"""A C driver-API program compiled by nvcc and linked with -lcuda against the simulator."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from client_helpers import PROGS, QuotaJob, nvcc_path

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = nvcc_path()
    if not nvcc:
        pytest.skip("nvcc is not installed")
    exe = tmp_path_factory.mktemp("prog") / "driver_fatbin"
    subprocess.run([nvcc, "-o", str(exe), str(PROGS / "driver_fatbin.c"),
                    f"-L{ROOT / 'build' / 'sim'}", "-lcuda"],
                   check=True, capture_output=True, timeout=120)
    return exe


def _run(exe: Path, env: dict[str, str], image: Path) -> list[str]:
    p = subprocess.run([str(exe), str(image)], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout.split()


@pytest.mark.parametrize("image", ["fatbin", "ptx_fatbin"])
def test_loads_an_nvcc_fatbin_and_launches(program: Path, nvcc_kernels: dict[str, Path],
                                           sim_env: dict[str, str], image: str) -> None:
    out = _run(program, sim_env, nvcc_kernels[image])
    assert out[0] == "ok" and out[1] == "400"  # gbuf's real size, from the ELF or the PTX
    assert float(out[2]) >= 1.0  # 1M threads x 1 ns


def test_runs_under_the_shim_with_a_quota(program: Path, nvcc_kernels: dict[str, Path],
                                          quota_job: QuotaJob) -> None:
    out = _run(program, quota_job.env, nvcc_kernels["fatbin"])
    assert out[0] == "ok"
