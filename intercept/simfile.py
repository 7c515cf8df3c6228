"""The simulator's state file, created on demand: a cuInit of the simulated driver in a child
process creates it, with the seed that gives the simulated GPUs their CUDA UUIDs.  The
controller needs the file for a multi-device job's UUIDs, the injection for its bind mount."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tgs.intercept import simstate


def ensure_state_file(driver: Path, timeout: float = 30.0) -> Path:
    """The state file simstate.state_path() names; when it does not exist, created by a cuInit
    of `driver` (the simulated libcuda.so.1) in a child.  OSError when it cannot be."""
    path = simstate.state_path()
    if not path.exists():
        code = f"import ctypes; ctypes.CDLL({str(driver)!r}).cuInit(0)"
        subprocess.run([sys.executable, "-c", code], timeout=timeout, check=False,
                       env={**os.environ, simstate.STATE_ENV: str(path)})
        if not path.exists():
            raise OSError(f"cannot create the simulator's state file {path}")
    return path
