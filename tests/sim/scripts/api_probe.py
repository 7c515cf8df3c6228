"""Drive the simulated driver through ctypes, one scenario per run; prints one JSON object.

Run as a child process (the simulator's state file comes from the environment):
    python api_probe.py <scenario> [args...]
The scenarios live in probe_modules.py, probe_memory.py, probe_graphs.py, probe_device.py and
probe_capture.py.
"""

from __future__ import annotations

import json
import sys

import probe_capture
import probe_device
import probe_graphs
import probe_memory
import probe_modules
from probe_common import out

if __name__ == "__main__":
    name = f"scenario_{sys.argv[1]}"
    for mod in (probe_modules, probe_memory, probe_graphs, probe_device, probe_capture):
        if hasattr(mod, name):
            getattr(mod, name)()
            break
    else:
        raise SystemExit(f"no scenario {sys.argv[1]}")
    print(json.dumps(out))
