"""The controller's NVML bindings come from nvidia-ml-py (its `pynvml` module): the deprecated
`pynvml` package hooks every `import pynvml` with a FutureWarning, which a controller on a
real GPU would print at every start."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")     # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
NVML_LIB = ROOT / "build" / "sim" / "libnvidia-ml.so.1"

# every NVML path of the controller, against the simulated NVML, warnings as errors
START = """
from tgs.controller import bypass, devices, gpustats
devs = devices.nvml_devices()
assert devs and [d.kind for d in devs] == ["nvml", "nvml"], devs
bypass.nvml_processes([0, 1])
assert gpustats._nvml(0) != (None, None)
"""


def test_pyproject_depends_on_nvidia_ml_py() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0].lower() for d in deps}
    assert "nvidia-ml-py" in names and "pynvml" not in names


@pytest.mark.timeout(60)
def test_controller_nvml_imports_without_a_warning(sim_env: dict[str, str]) -> None:
    if not NVML_LIB.exists():
        pytest.fail(f"{NVML_LIB} is missing: run `make` first")
    r = subprocess.run([sys.executable, "-W", "error", "-c", START], capture_output=True,
                       text=True, timeout=50, env={**sim_env, "TGS_SIM_DEVICES": "2"})
    hint = ("the deprecated `pynvml` package is installed: `pip uninstall pynvml` "
            "(tgs needs nvidia-ml-py, which provides the module)")
    assert "FutureWarning" not in r.stderr, hint
    assert r.returncode == 0 and r.stderr == "", r.stderr[-3000:]
