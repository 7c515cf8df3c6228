"""NVML inside an injected container (podman, simulated GPU): pynvml in a container of a job
sees the job's quota as the GPU's memory, the job's usage as used, and the job's process (by the
pid its own container gave it), while another container of the job holds memory.  The
simulated NVML comes with the injection, as the container toolkit hands over the real one.
Skipped only where no container can start (as tests/tools/test_containers.py)."""

from __future__ import annotations

import glob
import json
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from container_helpers import (
    CDI_DIR,
    PODMAN,
    ROOT,
    fill_rootfs,
    podman_rm,
    require_podman,
)
from tools_helpers import Ctl, cdi_spec, start_ctl, stop, wait_for

MIB, GIB = 1 << 20, 1 << 30
PY_HOME = Path(sys.base_prefix)
pytestmark = pytest.mark.timeout(150)

QUERY = """
import json, warnings
warnings.simplefilter("ignore")
import pynvml as nv
nv.nvmlInit()
h = nv.nvmlDeviceGetHandleByIndex(0)
m = nv.nvmlDeviceGetMemoryInfo(h)
print(json.dumps({"mem": [m.total, m.free, m.used],
                  "procs": [[p.pid, p.usedGpuMemory]
                            for p in nv.nvmlDeviceGetComputeRunningProcesses(h)]}))
"""


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workload and the libraries it, the shim, the simulated driver and NVML and this
    Python need; Python itself and pynvml are bind-mounted read-only at run time."""
    require_podman()
    pytest.importorskip("pynvml")
    native = [ROOT / "build/sim/libnvidia-ml.so.1", Path(sys.executable).resolve(),
              *map(Path, glob.glob(str(PY_HOME / "lib" / "python3*" / "lib-dynload" / "_*.so")))]
    root = fill_rootfs(tmp_path_factory.mktemp("rootfs"), native, dirs=("opt/py",),
                       skip=(PY_HOME, ROOT))   # mounted, or injected
    import pynvml
    shutil.copy2(pynvml.__file__, root / "opt" / "py" / "pynvml.py")
    return root


@pytest.fixture
def sctl(tmp_path: Path, sim_env: dict[str, str]) -> Iterator[Ctl]:
    yield from start_ctl(tmp_path, sim_env)


def test_pynvml_in_an_injected_container_shows_the_job(sctl: Ctl, rootfs: Path) -> None:
    job = f"nvml-{secrets.token_hex(3)}"
    holder, query = f"tgs-test-{job}-hold", f"tgs-test-{job}-query"
    assert sctl.run("tgsctl", "add", job, "--mem", "1GiB").returncode == 0
    spec = cdi_spec(sctl, job, CDI_DIR, "--rootfs", str(rootfs))
    dev = ["--device", f"tgs.io/gpu={job}"]
    runner = None
    try:
        runner = subprocess.Popen(
            [*PODMAN, *dev, "--rm", "--name", holder, "--rootfs", str(rootfs),
             "/bin/tgs-workload", "--mem", "384MiB", "--seconds", "30"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert runner.stdout is not None
        start = json.loads(runner.stdout.readline())
        assert start["type"] == "start" and start["pid"] == 1
        assert wait_for(lambda: sctl.jobs()[job].get("mem_used") == 384 * MIB, timeout=15)
        r = subprocess.run(
            [*PODMAN, *dev, "--rm", "--name", query, "-v", f"{PY_HOME}:{PY_HOME}:ro",
             "-e", "PYTHONPATH=/opt/py", "--rootfs", str(rootfs),
             str(Path(sys.executable).resolve()), "-c", QUERY],
            capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout.strip().splitlines()[-1])
        assert got["mem"] == [GIB, GIB - 384 * MIB, 384 * MIB]
        assert got["procs"] == [[1, 384 * MIB]]     # the holder, as its container sees it
    finally:
        stop(runner)
        podman_rm(holder)
        podman_rm(query)
        spec.unlink(missing_ok=True)
