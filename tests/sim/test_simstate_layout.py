"""tgs.intercept.simstate is the one Python copy of the simulator's facts: prove it equal to
sim/sim_state.h (the compiler's sizes, offsets and constants) and to the simulator's own rules."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from tgs.intercept import simstate

ROOT = Path(__file__).resolve().parents[2]


def _compiled(tmp_path: Path, exprs: list[str]) -> list[int]:
    body = "".join(f'    printf("%llu\\n", (unsigned long long)({e}));\n' for e in exprs)
    src = tmp_path / "layout.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "sim_state.h"\n'
                   f"int main(void)\n{{\n{body}    return 0;\n}}\n")
    exe = tmp_path / "layout"
    subprocess.run(["gcc", "-std=gnu11", f"-I{ROOT / 'sim'}", str(src), "-o", str(exe)],
                   check=True, timeout=60)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=10)
    return [int(x) for x in out.stdout.split()]


def test_layout_matches_the_header(tmp_path: Path) -> None:
    want = simstate.offsets()
    # Every struct of the header is mirrored, and every field of each (not a sample).
    text = (ROOT / "sim" / "sim_state.h").read_text()
    assert set(re.findall(r"^struct (sim_\w+) \{", text, re.M)) == set(simstate.STRUCTS)
    assert len(want) == sum(1 + len(c._fields_) for c in simstate.STRUCTS.values())
    got = dict(zip(want, _compiled(tmp_path, list(want)), strict=True))
    assert got == want


def test_constants_match_the_header(tmp_path: Path) -> None:
    want = simstate.CONSTANTS
    got = dict(zip(want, _compiled(tmp_path, list(want)), strict=True))
    assert got == want


def test_state_path_follows_the_simulators_rule() -> None:
    assert simstate.state_path({simstate.STATE_ENV: "/x/y"}) == Path("/x/y")
    default = Path(f"/dev/shm/tgs-sim-{os.getuid()}")
    assert simstate.state_path({simstate.STATE_ENV: "relative"}) == default
    assert simstate.state_path({simstate.STATE_ENV: ""}) == default
    assert simstate.state_path({}) == default


def test_env_devices_defaults_and_clamps() -> None:
    assert simstate.env_devices({}) == (simstate.DEFAULT_DEVICES, simstate.DEFAULT_MEM)
    e = {simstate.DEVICES_ENV: "99", simstate.MEM_ENV: "3GiB"}
    assert simstate.env_devices(e) == (simstate.SIM_MAX_DEVICES, 3 << 30)
    assert simstate.env_devices({simstate.DEVICES_ENV: "x"})[0] == simstate.DEFAULT_DEVICES


@pytest.mark.timeout(60)
def test_read_devices_agrees_with_read_state(sim_env: dict[str, str], sim_lib: Path,
                                             tmp_path: Path) -> None:
    path = sim_env[simstate.STATE_ENV]
    code = f"import ctypes; ctypes.CDLL({str(sim_lib)!r}).cuInit(0)"
    subprocess.run(["python3", "-c", code], env={**sim_env, simstate.DEVICES_ENV: "2"},
                   check=True, timeout=30)
    snap = simstate.read_state(path)
    devs = simstate.read_devices(path)
    assert devs is not None and sorted(devs) == [0, 1]
    for d in snap.devices:
        assert devs[d.index] == (d.mem_total, d.mem_used, d.busy_ns)
    # A truncated or foreign file (a tenant may write it) is "not a state file", not an error.
    short = tmp_path / "short"
    short.write_bytes(Path(path).read_bytes()[:100])
    assert simstate.read_devices(short) is None
    short.write_bytes(b"\0" * 8192)
    assert simstate.read_devices(short) is None
    assert simstate.read_devices(tmp_path / "missing") is None
