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
from tools_helpers import Ctl, start_ctl, stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "build" / "bin" / "tgs-workload"
CDI_DIR = Path("/var/run/cdi")
MIB, GIB = 1 << 20, 1 << 30
PODMAN = ["podman", "run", "--runtime", "runc", "--network", "none",
          "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
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


def _libs(*files: Path) -> set[str]:
    out = subprocess.run(["ldd", *map(str, files)], capture_output=True, text=True).stdout
    return {w for w in out.split() if w.startswith("/") and not w.endswith(":")}


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workload and the libraries it, the shim, the simulated driver and NVML and this
    Python need; Python itself and pynvml are bind-mounted read-only at run time."""
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman/runc not installed (apt-get install podman runc; .ci/run does)")
    pytest.importorskip("pynvml")
    root = tmp_path_factory.mktemp("rootfs")
    for d in ("bin", "proc", "dev", "sys", "etc", "tmp", "opt/py"):
        (root / d).mkdir(parents=True)
    shutil.copy2(WORKLOAD, root / "bin" / "tgs-workload")
    import pynvml
    shutil.copy2(pynvml.__file__, root / "opt" / "py" / "pynvml.py")
    native = [WORKLOAD, ROOT / "build/libtgs.so", ROOT / "build/sim/libcuda.so.1",
              ROOT / "build/sim/libnvidia-ml.so.1", Path(sys.executable).resolve(),
              *map(Path, glob.glob(str(PY_HOME / "lib" / "python3*" / "lib-dynload" / "_*.so")))]
    for lib in _libs(*native):
        if lib.startswith(str(PY_HOME)) or lib.startswith(str(ROOT)):
            continue   # mounted, or injected
        dst = root / lib.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, dst)
    r = subprocess.run([*PODMAN, "--rm", "--rootfs", str(root), "/bin/tgs-workload", "--help"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"no container can be started here: {r.stderr.strip()[-300:]}")
    return root


@pytest.fixture
def sctl(tmp_path: Path, sim_env: dict[str, str]) -> Iterator[Ctl]:
    yield from start_ctl(tmp_path, sim_env)


def _rm(name: str) -> None:
    subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, timeout=60)


def test_pynvml_in_an_injected_container_shows_the_job(sctl: Ctl, rootfs: Path) -> None:
    job = f"nvml-{secrets.token_hex(3)}"
    holder, query = f"tgs-test-{job}-hold", f"tgs-test-{job}-query"
    assert sctl.run("tgsctl", "add", job, "--mem", "1GiB").returncode == 0
    r = sctl.run("tgs-inject", "cdi", "--job", job, "--out", str(CDI_DIR),
                 "--rootfs", str(rootfs))
    if r.returncode != 0 and "cannot write" in r.stderr:
        pytest.skip(f"cannot write a CDI spec into {CDI_DIR}: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    spec = Path(r.stdout.split(":")[0])
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
        _rm(holder)
        _rm(query)
        spec.unlink(missing_ok=True)
