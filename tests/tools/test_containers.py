"""tgs-inject end to end with podman: a container with its own PID namespace on the simulated
GPU, injected once through the CDI spec and once through `tgs-inject run`.  Shows the quota
enforced inside, the controller seeing and throttling the container's process (static policy),
and its memory reclaimed after `podman kill`.  Skipped only where no container can start."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from container_helpers import CDI_DIR, PODMAN, fill_rootfs, podman_rm, require_podman
from tools_helpers import Ctl, cdi_spec, start_ctl, stop, tool, wait_for

GIB = 1 << 30
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A minimal root file system: the workload, the libraries it and the injected ones
    need, the dynamic loader; the driver comes with the injection."""
    require_podman()
    return fill_rootfs(tmp_path_factory.mktemp("rootfs"))


@pytest.fixture
def sctl(tmp_path: Path, sim_env: dict[str, str]) -> Iterator[Ctl]:
    """A controller with the static policy: an opportunistic job is always rate-limited."""
    yield from start_ctl(tmp_path, sim_env, "--policy", "static", "--static-share", "0.2")


def _lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def _container(args: list[str], name: str, rootfs: Path, *cmd: str) -> list[str]:
    return [*args, "--rm", "--name", name, "--rootfs", str(rootfs), "/bin/tgs-workload", *cmd]


def test_cdi_quota_throttle_and_reclaim(sctl: Ctl, rootfs: Path) -> None:
    job = f"cdi-{secrets.token_hex(3)}"
    ctr = f"tgs-test-{job}"
    assert sctl.run("tgsctl", "add", job, "--mem", "1GiB").returncode == 0
    spec = cdi_spec(sctl, job, CDI_DIR, "--rootfs", str(rootfs))
    runner = None
    try:
        dev = ["--device", f"tgs.io/gpu={job}"]
        # over the quota: refused inside the container
        r = subprocess.run(_container([*PODMAN, *dev], ctr, rootfs, "--mem", "2GiB",
                                      "--seconds", "0.2"), capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 1 and "OUT_OF_MEMORY" in r.stdout + r.stderr, r.stderr
        # within it: runs, sees the quota as its GPU's size, in its own PID namespace
        runner = subprocess.Popen(
            _container([*PODMAN, *dev], ctr, rootfs, "--mem", "512MiB", "--seconds", "20"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert runner.stdout is not None
        start = json.loads(runner.stdout.readline())
        assert start["type"] == "start" and start["pid"] == 1
        assert start["mem"]["total"] == GIB
        seen = wait_for(lambda: (j := sctl.jobs()[job]).get("processes") == 1
                        and j.get("mem_used") == 512 << 20 and j.get("rate") is not None
                        and j.get("throttled_frac", 0) > 0 and j, timeout=15)
        assert seen, sctl.jobs()[job]
        ls = sctl.json("tgsctl", "ls", "--json")["jobs"]
        (mine,) = [j for j in ls if j["name"] == job]
        assert mine["process_list"][0]["comm"] == "tgs-workload"
        subprocess.run(["podman", "kill", ctr], capture_output=True, timeout=60, check=True)
        runner.wait(timeout=30)
        gone = wait_for(lambda: (j := sctl.jobs()[job]).get("processes") == 0
                        and j.get("mem_used") == 0, timeout=15)
        assert gone, sctl.jobs()[job]
        # the controller only sees it dead (it never writes a tenant's segment); the job's
        # next process reclaims the slot when it attaches
        assert "a process died" in sctl.log.read_text()
    finally:
        stop(runner)
        podman_rm(ctr)
        spec.unlink(missing_ok=True)


def test_inject_run_quota_and_cleanup(sctl: Ctl, rootfs: Path) -> None:
    name = f"run-{secrets.token_hex(3)}"
    base = [tool("tgs-inject"), "run", "--name", name, "--mem", "1GiB", "--preload-file", "--"]
    r = subprocess.run([*base, *_container(PODMAN, name, rootfs, "--mem", "2GiB",
                                           "--seconds", "0.2")],
                       env=sctl.env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "OUT_OF_MEMORY" in r.stdout + r.stderr, r.stderr
    r = subprocess.run([*base, *_container(PODMAN, name, rootfs, "--mem", "512MiB",
                                           "--seconds", "0.5")],
                       env=sctl.env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    start, *_, summary = _lines(r.stdout)
    assert start["pid"] == 1 and start["mem"]["total"] == GIB   # /etc/ld.so.preload did it
    assert summary["type"] == "summary" and summary["iters"] > 0
    assert name not in sctl.jobs()                                 # unregistered at the end


def test_inject_run_gives_opportunistic_containers_the_lowest_cpu_share(sctl: Ctl,
                                                                         rootfs: Path) -> None:
    """The container side of tgs-run's nice 19: the engine sets the container's CPU cgroup."""
    shutil.copy2(shutil.which("cat") or "/bin/cat", rootfs / "bin" / "cat")  # libc's only
    shares = {}
    for prio in ("opportunistic", "production"):
        name = f"cpu-{prio[:4]}-{secrets.token_hex(3)}"
        # one of the two exists (cgroup v1 or v2): cat says so for the other
        r = subprocess.run([tool("tgs-inject"), "run", "--name", name, "--priority", prio,
                            "--preload-file", "--", *PODMAN, "--rm", "--rootfs", str(rootfs),
                            "/bin/cat", "/sys/fs/cgroup/cpu/cpu.shares",
                            "/sys/fs/cgroup/cpu.weight"],
                           env=sctl.env, capture_output=True, text=True, timeout=60)
        assert "No such file" in r.stderr, r.stderr
        shares[prio] = r.stdout.split()
    assert shares == {"opportunistic": ["2"], "production": ["1024"]} or \
        shares == {"opportunistic": ["1"], "production": ["100"]}, shares   # cgroup v1 or v2


_VANDAL = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* For each path: can this container write it? "rw" or "ro <errno name>". */
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_WRONLY | O_CREAT, 0600);
        if (fd >= 0)
            close(fd);
        printf("%s %s\n", argv[i], fd >= 0 ? "rw" : strerrorname_np(errno));
    }
    return 0;
}
"""


def test_container_cannot_write_what_others_read(sctl: Ctl, rootfs: Path,
                                                 tmp_path: Path) -> None:
    """From inside a container (root in its user namespace): the device
    segment, the job's own control segment and the other tenants' pubs are read-only mounts;
    only the job's own .seg and .pub are writable."""
    vandal = rootfs / "bin" / "vandal"
    src = tmp_path / "vandal.c"
    src.write_text(_VANDAL)
    subprocess.run(["gcc", "-D_GNU_SOURCE", "-o", str(vandal), str(src)], check=True)
    job, other = f"v-{secrets.token_hex(3)}", f"w-{secrets.token_hex(3)}"
    ctr = f"tgs-test-{job}"
    assert sctl.run("tgsctl", "add", job).returncode == 0
    assert sctl.run("tgsctl", "add", other, "--priority", "production").returncode == 0
    spec = cdi_spec(sctl, job, CDI_DIR)
    paths = ["/run/tgs/seg/device-0.seg", f"/run/tgs/seg/{job}.ctl",
             f"/run/tgs/seg/pub/{other}.pub", f"/run/tgs/seg/pub/{job}.pub",
             "/run/tgs/seg/pub/new.pub", f"/run/tgs/seg/{job}.seg", f"/run/tgs/own/{job}.pub"]
    try:
        r = subprocess.run([*PODMAN, "--device", f"tgs.io/gpu={job}", "--rm", "--name", ctr,
                            "--rootfs", str(rootfs), "/bin/vandal", *paths],
                           capture_output=True, text=True, timeout=60)
    finally:
        podman_rm(ctr)
        spec.unlink(missing_ok=True)
    assert r.returncode == 0, r.stderr
    got = dict(line.split() for line in r.stdout.splitlines())
    assert got == {**{p: "EROFS" for p in paths[:5]}, paths[5]: "rw", paths[6]: "rw"}, got
    assert sctl.jobs()[other].get("segment_damaged") is None
