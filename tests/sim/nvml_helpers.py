"""Helpers for the simulated-NVML tests: pynvml (and ctypes) in a child process.

pynvml loads `libnvidia-ml.so.1` by soname, so the library path must be set when the
process starts: every query runs in a child with the test's sim_env (build/sim first on
LD_LIBRARY_PATH, a private TGS_SIM_STATE).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

NVML_LIB = Path(__file__).resolve().parents[2] / "build" / "sim" / "libnvidia-ml.so.1"
MIB = 1 << 20

PRELUDE = """
import ctypes, json, os, sys, time, warnings
warnings.simplefilter("ignore")
import pynvml as nv

def err(fn, *args):
    try:
        fn(*args)
    except nv.NVMLError as exc:
        return exc.value
    return 0

def cuda():
    lib = ctypes.CDLL("libcuda.so.1")
    assert lib.cuInit(0) == 0
    return lib
"""


def run_py(env: dict[str, str], body: str, timeout: float = 60) -> Any:
    """Run PRELUDE + body (which assigns `out`) in a child; return `out` (JSON)."""
    code = PRELUDE + textwrap.dedent(body) + "\nprint('OUT ' + json.dumps(out))\n"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert res.returncode == 0, f"child failed:\n{res.stdout}\n{res.stderr}"
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("OUT ")]
    assert lines, f"no result:\n{res.stdout}\n{res.stderr}"
    return json.loads(lines[-1][4:])
