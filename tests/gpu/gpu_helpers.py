"""Real-GPU detection shared by the GPU tests and their conftest."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = r"""
import ctypes, sys
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    print("no libcuda.so.1:", exc); sys.exit(1)
if cu.cuInit(0) != 0:
    print("cuInit failed"); sys.exit(1)
n = ctypes.c_int(0)
if cu.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value < 1:
    print("no CUDA device"); sys.exit(1)
name = ctypes.create_string_buffer(256)
cu.cuDeviceGetName(name, 256, 0)
if b"TGS Simulated" in name.value:
    print("only the simulated driver"); sys.exit(1)
print(name.value.decode())
"""


def gpu_env() -> dict[str, str]:
    """The environment without anything of the simulator or the shim."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TGS_", "LD_PRELOAD"))}
    paths = [p for p in env.get("LD_LIBRARY_PATH", "").split(":")
             if p and "build/sim" not in p]
    if paths:
        env["LD_LIBRARY_PATH"] = ":".join(paths)
    else:
        env.pop("LD_LIBRARY_PATH", None)
    return env


@functools.lru_cache(maxsize=1)
def real_gpu() -> tuple[bool, str]:
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE], env=gpu_env(), capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return r.returncode == 0, r.stdout.strip() or r.stderr.strip()[-200:]
