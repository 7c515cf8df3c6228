"""Every command's --version and --help, the second controller's error, --foreground, the
standalone quota's message and `tgs-inject run --print`'s job."""

from __future__ import annotations

import subprocess
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from tgs.controller.lease import LEASE_GRACE
from tgs.tools.injection import ENTRYPOINT
from tools_helpers import Ctl, Probe, probe_cmd, tool, wait_for

COMMANDS = ["tgs-controller", "tgsctl", "tgs-run", "tgs-inject", "tgs-entrypoint", "tgs-bench",
            "tgs-device-plugin", "tgs-dra-plugin"]
ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str, **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, **kw)


@pytest.mark.parametrize("prog", COMMANDS)
def test_version(prog: str) -> None:
    r = _run(tool(prog), "--version")
    assert r.returncode == 0 and r.stdout == f"{prog} {version('tgs')}\n", (r.stdout, r.stderr)


def test_every_script_is_covered() -> None:
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert sorted(scripts) == sorted(COMMANDS)


def test_entrypoint_help_and_version() -> None:
    for args in (["--help"], ["-h"]):
        r = _run(tool("tgs-entrypoint"), *args)
        assert r.returncode == 0 and r.stdout.startswith("usage: tgs-entrypoint"), r.stderr
    # the script itself, as a container runs it (no Python there)
    r = _run("sh", str(ENTRYPOINT), "--help")
    assert r.returncode == 0 and "usage: tgs-entrypoint" in r.stdout
    r = _run("sh", str(ENTRYPOINT), "--version")
    assert r.returncode == 0 and r.stdout == f"tgs-entrypoint {version('tgs')}\n"
    r = _run("sh", str(ENTRYPOINT), "--", "echo", "ran")
    assert r.returncode == 0 and r.stdout == "ran\n"
    r = _run(tool("tgs-entrypoint"), "sh", "-c", "echo $0 $1", "x", "--help")   # CMD's own
    assert r.returncode == 0 and r.stdout == "x --help\n"


def test_foreground_is_accepted_but_not_offered() -> None:
    r = _run(tool("tgs-controller"), "--help")
    assert r.returncode == 0 and "--foreground" not in r.stdout and "foreground" in r.stdout


def test_second_controller_names_the_holder(ctl: Ctl, tmp_path: Path) -> None:
    r = _run(tool("tgs-controller"), "--foreground", "--sim", "--state-dir",
             str(tmp_path / "state"), "--runtime-dir", str(tmp_path / "rt2"), env=ctl.env)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"tgs-controller: error: another tgs-controller (pid "
                               f"{ctl.proc.pid}) holds "), lines


def test_standalone_refusal_names_no_job(sim_env: dict[str, str]) -> None:
    env = dict(sim_env, TGS_CONTROLLER="ipc:///nonexistent/control.sock")
    p = Probe(probe_cmd("--standalone", "--mem", "1MiB"), env)
    try:
        assert p.ask(f"alloc {4 << 20}") == "alloc 2"
    finally:
        assert p.close() == 0
    assert p.proc.stderr is not None
    err = p.proc.stderr.read()
    assert "standalone (TGS_MEM_LIMIT): the memory quota refused" in err, err
    assert "'TGS_MEM_LIMIT'" not in err


def test_print_leaves_no_job_behind(ctl: Ctl) -> None:
    r = ctl.run("tgs-inject", "run", "--name", "shown", "--print", "--", "podman", "run",
                "--rm", "img:1", "true")
    assert r.returncode == 0, r.stderr
    seg = Path(ctl.jobs()["shown"]["segment"])
    assert seg.with_suffix(".lease").exists()            # a lease nobody takes ...
    born = time.monotonic()
    assert wait_for(lambda: "shown" not in ctl.jobs(), timeout=LEASE_GRACE + 15, step=0.5)
    assert time.monotonic() - born > LEASE_GRACE - 5     # ... dropped after its grace
