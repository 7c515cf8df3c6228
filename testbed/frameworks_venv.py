"""The frameworks venv: real PyTorch (CUDA build) and CuPy, pinned, for the frameworks tier
(tests/frameworks) and the benchmarks' PyTorch jobs (tgs-bench --torch).

    python -m tgs.testbed.frameworks_venv       # make sure it is there; print its python

torch is several GiB, so the venv lives outside the checkout, where a fresh clone on the same
machine finds it again: $TGS_FRAMEWORKS_VENV, else $XDG_CACHE_HOME/tgs (~/.cache/tgs) under a
name made from the digest of frameworks-requirements.txt's pins.  It is reused while the pins
are unchanged (a ready stamp holds the digest, written only after the install and an import
check passed).  A failed
install is retried once from scratch; a second failure exits 1 with pip's last lines: the tier
never turns into a skip.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "frameworks-requirements.txt"
IMPORT_CHECK = "import torch, cupy, pynvml, numpy; assert torch.version.cuda, 'not a CUDA build'"
ATTEMPTS = 2


def digest() -> str:
    """Of the pins alone: a comment edit keeps the venv."""
    pins = [ln.split("#")[0].strip() for ln in REQUIREMENTS.read_text().splitlines()]
    return hashlib.sha256("\n".join(p for p in pins if p).encode()).hexdigest()[:12]


def venv_dir() -> Path:
    if os.environ.get("TGS_FRAMEWORKS_VENV"):
        return Path(os.environ["TGS_FRAMEWORKS_VENV"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "tgs" / f"frameworks-{digest()}"


def python() -> Path:
    return venv_dir() / "bin" / "python"


def torch_python() -> str:
    """The interpreter for PyTorch jobs: this one if it has torch, else the frameworks venv's
    once installed (make frameworks), else this one (whose job then reports the error)."""
    import importlib.util
    if importlib.util.find_spec("torch") is None and ready():
        return str(python())
    return sys.executable


@functools.cache
def torch_available() -> str | None:
    """None when torch_python() imports torch, else why not (one line); asked once (the
    import takes seconds)."""
    py = torch_python()
    try:
        res = subprocess.run([py, "-c", "import torch"], capture_output=True, timeout=120,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{py} does not import torch ({exc.__class__.__name__})"
    if res.returncode != 0:
        return f"{py} has no PyTorch (make frameworks installs the frameworks venv)"
    return None


def _stamp() -> Path:
    return venv_dir() / ".tgs-ready"


def ready() -> bool:
    try:
        return python().exists() and _stamp().read_text().strip() == digest()
    except OSError:
        return False


def _install(log: Path) -> bool:
    d = venv_dir()
    shutil.rmtree(d, ignore_errors=True)
    with open(log, "wb") as out:
        steps = [[sys.executable, "-m", "venv", str(d)],
                 [str(python()), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
                 [str(python()), "-c", IMPORT_CHECK]]
        for cmd in steps:
            out.write(f"$ {' '.join(cmd)}\n".encode())
            out.flush()
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                return False
    _stamp().write_text(digest() + "\n")
    return True


def ensure() -> Path:
    """The venv's python, installing it first if needed (one installer at a time)."""
    if ready():
        return python()
    venv_dir().parent.mkdir(parents=True, exist_ok=True)
    with open(venv_dir().parent / f".{venv_dir().name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return python()
        log = venv_dir().parent / f"{venv_dir().name}.install.log"
        for attempt in range(1, ATTEMPTS + 1):
            print(f"frameworks venv: installing {REQUIREMENTS.name} into {venv_dir()} "
                  f"(attempt {attempt} of {ATTEMPTS}; log {log})", file=sys.stderr, flush=True)
            if _install(log):
                return python()
        tail = log.read_text(errors="replace").splitlines()[-20:]
        raise SystemExit("frameworks venv: install failed twice; the last lines of "
                         f"{log}:\n" + "\n".join(tail))


if __name__ == "__main__":
    print(ensure())
