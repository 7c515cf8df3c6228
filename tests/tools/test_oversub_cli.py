"""--mem-total (oversubscription): tgsctl add/set and tgs-run store it in the job, write it to
the .ctl, and refuse it for production jobs (exit 2, one line)."""

from __future__ import annotations

import pytest
from tgs.intercept import control
from tools_helpers import Ctl, Probe, probe_cmd, wait_for

pytestmark = pytest.mark.timeout(120)

GIB = 1 << 30
ONE_LINE = "--mem-total (oversubscription) is for opportunistic jobs only"


def ctl_mem_total(c: Ctl, job: str) -> int:
    seg = c.jobs()[job]["segment"]
    ctl = control.open_control(control.ctl_path(seg), readonly=True)
    try:
        return int(ctl.header.mem_total)
    finally:
        ctl.close()


def test_add_and_set_mem_total(ctl: Ctl) -> None:
    r = ctl.run("tgsctl", "add", "opp", "--mem", "1GiB", "--mem-total", "4GiB")
    assert r.returncode == 0, r.stderr
    assert ctl.jobs()["opp"]["mem_total"] == 4 * GIB
    assert ctl_mem_total(ctl, "opp") == 4 * GIB
    assert ctl.run("tgsctl", "set", "opp", "--mem-total", "2.5GiB").returncode == 0
    assert ctl.jobs()["opp"]["mem_total"] == int(2.5 * GIB)
    assert wait_for(lambda: ctl_mem_total(ctl, "opp") == int(2.5 * GIB), timeout=5)
    # an oversubscribing job cannot become production (the controller refuses)
    r = ctl.run("tgsctl", "set", "opp", "--priority", "production")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert ONE_LINE in r.stderr
    assert ctl.jobs()["opp"]["priority"] == "opportunistic"
    # 0: no oversubscription, back to the default: evictable up to its quota
    assert ctl.run("tgsctl", "set", "opp", "--mem-total", "0").returncode == 0
    assert wait_for(lambda: ctl_mem_total(ctl, "opp") == GIB, timeout=5)
    assert ctl.run("tgsctl", "set", "opp", "--mem-fixed").returncode == 0    # device memory
    assert wait_for(lambda: ctl_mem_total(ctl, "opp") == 0, timeout=5)
    assert ctl.jobs()["opp"]["mem_fixed"] is True
    assert ctl.run("tgsctl", "set", "opp", "--priority", "production").returncode == 0


@pytest.mark.parametrize("argv,code", [
    (["tgsctl", "add", "p", "--priority", "production", "--mem-total", "1GiB"], 2),
    # tgs-run's own failures exit 125 (a wrapper: docs/usage.md), never the command's status
    (["tgs-run", "--priority", "production", "--mem-total", "1GiB", "--", "true"], 125),
])
def test_production_refused(ctl: Ctl, argv: list[str], code: int) -> None:
    r = ctl.run(*argv)
    assert r.returncode == code, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and ONE_LINE in r.stderr, r.stderr
    assert "p" not in ctl.jobs()


def test_set_production_job_refused_by_controller(ctl: Ctl) -> None:
    assert ctl.run("tgsctl", "add", "prod", "--priority", "production").returncode == 0
    r = ctl.run("tgsctl", "set", "prod", "--mem-total", "1GiB")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert ONE_LINE in r.stderr
    assert ctl.jobs()["prod"]["mem_total"] == 0


def test_bad_size_refused(ctl: Ctl) -> None:
    r = ctl.run("tgsctl", "add", "opp", "--mem-total", "lots")
    assert r.returncode == 2 and "not a size" in r.stderr
    assert "opp" not in ctl.jobs()


def test_run_process_sees_its_total(ctl: Ctl, probes: list[Probe]) -> None:
    """The device has 16 GiB; the job may hold 24 GiB: cuMemGetInfo says so."""
    p = Probe(probe_cmd("--name", "big", "--mem", "8GiB", "--mem-total", "24GiB"), ctl.env)
    probes.append(p)
    assert p.info() == (24 * GIB, 24 * GIB)
    assert p.ask(f"alloc {20 * GIB}") == "alloc 0"   # more than the device has
    assert p.info() == (4 * GIB, 24 * GIB)
    assert p.ask(f"alloc {8 * GIB}") == "alloc 2"    # past mem_total
    assert p.close() == 0


def test_add_and_set_host_pinned(ctl: Ctl) -> None:
    """--host-pinned: the job's page-locked host memory limit, stored and written to the .ctl."""
    def ctl_pinned() -> int:
        seg = ctl.jobs()["opp"]["segment"]
        c = control.open_control(control.ctl_path(seg), readonly=True)
        try:
            return int(c.header.host_pinned_max)
        finally:
            c.close()

    assert ctl.run("tgsctl", "add", "opp", "--host-pinned", "2GiB").returncode == 0
    assert ctl.jobs()["opp"]["host_pinned_max"] == 2 * GIB
    assert ctl_pinned() == 2 * GIB
    assert ctl.run("tgsctl", "set", "opp", "--host-pinned", "0").returncode == 0
    assert wait_for(lambda: ctl_pinned() == 0, timeout=5)


def test_run_process_pinned_limit(ctl: Ctl, probes: list[Probe]) -> None:
    """tgs-run --host-pinned: the job is registered with it (its processes' .ctl says so)."""
    p = Probe(probe_cmd("--name", "pin", "--host-pinned", "1GiB"), ctl.env)
    probes.append(p)
    assert p.info()[1] > 0  # the process runs under the shim
    assert ctl.jobs()["pin"]["host_pinned_max"] == GIB
    assert p.close() == 0


def test_run_host_pinned_needs_the_controller(ctl: Ctl) -> None:
    r = ctl.run("tgs-run", "--standalone", "--host-pinned", "1GiB", "--", "true")
    assert r.returncode == 125 and "--host-pinned needs the controller" in r.stderr
