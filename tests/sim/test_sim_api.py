"""Entry points, argument checks and environment handling of the simulated driver."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tgs.intercept import simstate

pytestmark = pytest.mark.timeout(60)


def _run(prog: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(prog), *args], env=env, capture_output=True, text=True, timeout=50)


def test_api_checks(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> None:
    env = dict(sim_env, TGS_SIM_MEM="512MiB")
    r = _run(sim_progs["api"], env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAIL" not in r.stdout
    assert "ok " in r.stdout


def test_smoke_linked_with_lcuda(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> None:
    r = _run(sim_progs["smoke"], sim_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "version=13000 name=TGS Simulated GPU out=hello" in r.stdout
    assert "total=17179869184" in r.stdout  # default 16 GiB


def _uuid(out: str) -> str:
    return next(line.split()[1] for line in out.splitlines() if line.startswith("uuid "))


def test_uuid_stable_per_state_file(
    sim_progs: dict[str, Path], sim_env: dict[str, str], tmp_path: Path
) -> None:
    env = dict(sim_env, TGS_SIM_MEM="512MiB")
    a = _uuid(_run(sim_progs["api"], env).stdout)
    b = _uuid(_run(sim_progs["api"], env).stdout)
    other = dict(env, TGS_SIM_STATE=str(tmp_path / "other-state"))
    c = _uuid(_run(sim_progs["api"], other).stdout)
    assert a == b
    assert a != c


def test_malformed_env_warns_and_uses_defaults(
    sim_progs: dict[str, Path], sim_env: dict[str, str]
) -> None:
    env = dict(sim_env, TGS_SIM_MEM="lots", TGS_SIM_NS_PER_THREAD="fast",
               TGS_SIM_QUEUE_DEPTH="-3", TGS_SIM_DEVICES="x")
    r = _run(sim_progs["smoke"], env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "total=17179869184" in r.stdout
    for name in ("TGS_SIM_MEM", "TGS_SIM_NS_PER_THREAD", "TGS_SIM_QUEUE_DEPTH", "TGS_SIM_DEVICES"):
        lines = [ln for ln in r.stderr.splitlines() if name + "=" in ln]
        assert lines, r.stderr
        assert "default" in lines[0]


@pytest.mark.parametrize(("value", "total"), [("1.5GiB", 3 << 29), (" 2 gb", 2 << 30),
                                              ("0", 16 << 30), ("512KiB", 16 << 30)])
def test_sim_mem_reads_the_size_grammar(sim_progs: dict[str, Path], sim_env: dict[str, str],
                                        value: str, total: int) -> None:
    """TGS_SIM_MEM is a size (tgs/size.h) of at least 1MiB: 0 is refused like any bad value."""
    r = _run(sim_progs["smoke"], dict(sim_env, TGS_SIM_MEM=value))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"total={total}" in r.stdout
    assert ("TGS_SIM_MEM=" in r.stderr) == (total == 16 << 30), r.stderr
    assert simstate.env_bytes(value, 16 << 30) == total


def test_existing_state_file_wins(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> None:
    first = _run(sim_progs["smoke"], dict(sim_env, TGS_SIM_MEM="1GiB"))
    assert "total=1073741824" in first.stdout
    quiet = _run(sim_progs["smoke"], dict(sim_env, TGS_SIM_MEM="2G"))
    assert "total=1073741824" in quiet.stdout
    assert quiet.stderr == ""  # default log level: quiet
    loud = _run(sim_progs["smoke"], dict(sim_env, TGS_SIM_MEM="2G", TGS_LOG_LEVEL="info"))
    assert "total=1073741824" in loud.stdout
    assert "wins" in loud.stderr


def test_multiple_devices(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> None:
    code = (
        "import ctypes,sys\n"
        "c=ctypes.CDLL('libcuda.so.1')\n"
        "n=ctypes.c_int(); assert c.cuInit(0)==0; assert c.cuDeviceGetCount(ctypes.byref(n))==0\n"
        "b=ctypes.create_string_buffer(32)\n"
        "assert c.cuDeviceGetPCIBusId(b,32,n.value-1)==0\n"
        "print(n.value, b.value.decode())\n"
    )
    r = subprocess.run(["python3", "-c", code], env=dict(sim_env, TGS_SIM_DEVICES="3"),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3", "0000:03:00.0"]
