"""TGS_LOG_LEVEL has one grammar (tgs/log_level.h: error|warn|info|debug, any case), read alike
by the simulated driver and the shim: a value outside it is refused with one line and warn is
used; a name inside it is taken in any case."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "build" / "libtgs.so"


def _run(prog: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(prog)], env=env, capture_output=True, text=True, timeout=50)


@pytest.mark.parametrize("shim", [False, True], ids=["simulator", "shim+simulator"])
@pytest.mark.parametrize("value", ["warning", "2", "verbose", "0"])
def test_values_outside_the_grammar_are_refused_by_both(sim_progs: dict[str, Path],
                                                        sim_env: dict[str, str], shim: bool,
                                                        value: str) -> None:
    env = dict(sim_env, TGS_LOG_LEVEL=value)
    if shim:
        env["LD_PRELOAD"] = str(SHIM)
    r = _run(sim_progs["smoke"], env)
    assert r.returncode == 0, r.stderr
    refusals = [ln for ln in r.stderr.splitlines() if f"TGS_LOG_LEVEL={value} is not one of"
                in ln]
    # the simulator says it once; under the shim the shim says it too (two readers, one line each)
    assert len(refusals) == (2 if shim else 1), r.stderr
    assert all("error|warn|info|debug" in ln for ln in refusals)


@pytest.mark.parametrize("value", ["DEBUG", "Info", "error", "warn", ""])
def test_names_in_any_case_are_taken(sim_progs: dict[str, Path], sim_env: dict[str, str],
                                     value: str) -> None:
    env = dict(sim_env, TGS_LOG_LEVEL=value, LD_PRELOAD=str(SHIM))
    r = _run(sim_progs["smoke"], env)
    assert r.returncode == 0, r.stderr
    assert "is not one of" not in r.stderr

