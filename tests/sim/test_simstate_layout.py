"""tgs.intercept.simstate binds contracts/include/tgs/sim_state.h through cffi: prove the binding
equal to the compiler's sizes, offsets and constants, its ctypes view equal to the binding, and
its rules equal to the simulator's own."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
from pathlib import Path

import pytest
from tgs.intercept import simstate

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "contracts" / "include" / "tgs" / "sim_state.h"


def _compiled(tmp_path: Path, exprs: list[str]) -> list[int]:
    body = "".join(f'    printf("%llu\\n", (unsigned long long)({e}));\n' for e in exprs)
    src = tmp_path / "layout.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "tgs/sim_state.h"\n'
                   f"int main(void)\n{{\n{body}    return 0;\n}}\n")
    exe = tmp_path / "layout"
    subprocess.run(["gcc", "-std=gnu11", f"-I{ROOT / 'contracts' / 'include'}", str(src), "-o",
                    str(exe)], check=True, timeout=60)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=10)
    return [int(x) for x in out.stdout.split()]


def test_binding_matches_the_compiler(tmp_path: Path) -> None:
    want = simstate.offsets()
    # Every struct of the header is bound, and every field of each (not a sample).
    text = HEADER.read_text()
    assert set(re.findall(r"^struct (sim_\w+) \{", text, re.M)) == set(simstate.STRUCTS)
    assert "offsetof(struct sim_device, lock)" in want     # the union's members too
    got = dict(zip(want, _compiled(tmp_path, list(want)), strict=True))
    assert got == want


def test_ctypes_view_matches_the_binding() -> None:
    """The ctypes classes (SimState, ...) are the binding's layout: same sizes and offsets."""
    want = simstate.offsets()
    for cname, cls in simstate.STRUCTS.items():
        assert ctypes.sizeof(cls) == want[f"sizeof(struct {cname})"], cname
        for fname, *_ in cls._fields_:
            assert getattr(cls, fname).offset == want[f"offsetof(struct {cname}, {fname})"]
    assert simstate.SimState is simstate.STRUCTS["sim_state"]
    assert [f for f, *_ in simstate.SimDevice._fields_][:2] == ["lock_pad", "mem_total"]


def test_constants_match_the_header(tmp_path: Path) -> None:
    want = simstate.CONSTANTS
    assert {"SIM_STATE_MAGIC", "SIM_MAX_DEVICES", "SIM_MAX_MRANGES"} <= set(want)
    got = dict(zip(want, _compiled(tmp_path, list(want)), strict=True))
    assert got == want
    assert simstate.SIM_MAX_DEVICES == want["SIM_MAX_DEVICES"]


def test_state_path_follows_the_simulators_rule() -> None:
    assert simstate.state_path({simstate.STATE_ENV: "/x/y"}) == Path("/x/y")
    default = Path(f"/dev/shm/tgs-sim-{os.getuid()}")
    assert simstate.state_path({simstate.STATE_ENV: "relative"}) == default
    assert simstate.state_path({simstate.STATE_ENV: ""}) == default
    assert simstate.state_path({}) == default
    assert simstate.state_path({simstate.STATE_ENV: "/" + "x" * 3999}) == default   # too long
    assert "4000" in (HEADER.parent / "state_path.h").read_text()


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
