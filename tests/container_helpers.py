"""Container test set-up shared by tests/tools and tests/k8s: a minimal root file system for
podman on the simulated GPU (the workload and the libraries it needs; the driver and the shim
come with the injection), skipped where no container can start."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "build" / "bin" / "tgs-workload"
CDI_DIR = Path("/var/run/cdi")
# `podman run` without --rm: each test adds it where its container should go.
PODMAN = ["podman", "run", "--runtime", "runc", "--network", "none",
          "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]


def require_podman() -> None:
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman/runc not installed (apt-get install podman runc; .ci/run does)")


def libs(*files: Path) -> set[str]:
    """The shared libraries (absolute paths) ldd lists for `files`."""
    out = subprocess.run(["ldd", *map(str, files)], capture_output=True, text=True).stdout
    return {w for w in out.split() if w.startswith("/") and not w.endswith(":")}


def fill_rootfs(root: Path, native: Iterable[Path] = (), dirs: Iterable[str] = (),
                skip: Iterable[Path] = ()) -> Path:
    """Lay out `root` (the usual top directories and `dirs`), copy the workload and the
    libraries it, the shim, the simulated driver and `native` need (less those under `skip`:
    mounted or injected), then skip the test unless a container starts from it."""
    for d in ("bin", "proc", "dev", "sys", "etc", "tmp", *dirs):
        (root / d).mkdir(parents=True)
    shutil.copy2(WORKLOAD, root / "bin" / "tgs-workload")
    skipped = tuple(str(p) for p in skip)
    for lib in libs(WORKLOAD, ROOT / "build/libtgs.so", ROOT / "build/sim/libcuda.so.1",
                    *native):
        if skipped and lib.startswith(skipped):
            continue
        dst = root / lib.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, dst)
    r = subprocess.run([*PODMAN, "--rm", "--rootfs", str(root), "/bin/tgs-workload", "--help"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"no container can be started here: {r.stderr.strip()[-300:]}")
    return root


def podman_rm(name: str) -> None:
    """Remove a container this test started (by its name), if it is still there."""
    subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, timeout=60)
