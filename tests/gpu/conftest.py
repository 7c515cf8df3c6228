"""Real-GPU tests: they run only where a real NVIDIA driver and GPU are present.

Detection (gpu_helpers.real_gpu) loads the system's libcuda.so.1 in a child process (never the
simulator: the child's LD_LIBRARY_PATH has no build/sim) and asks for a device that is not
"TGS Simulated GPU". Without one every test here is skipped with the reason.
"""

from __future__ import annotations

import pytest
from gpu_helpers import real_gpu


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    ok, why = real_gpu()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"needs a real NVIDIA GPU ({why})")
    for item in gpu_items:
        item.add_marker(skip)
