"""A CDI spec (Container Device Interface) for one TGS job: `--device tgs.io/gpu=JOB`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .injection import Plan

CDI_VERSION = "0.5.0"
KIND = "tgs.io/gpu"
DEFAULT_DIR = "/var/run/cdi"


def spec(plan: Plan) -> dict[str, Any]:
    mounts = [{"hostPath": m.host, "containerPath": m.container,
               "options": ["ro" if m.readonly else "rw", "bind", "nosuid", "nodev"]}
              for m in plan.mounts]
    return {
        "cdiVersion": CDI_VERSION,
        "kind": KIND,
        "devices": [{"name": plan.job,
                     "containerEdits": {"env": plan.env_list(), "mounts": mounts}}],
    }


def spec_path(out_dir: str | Path, job: str) -> Path:
    return Path(out_dir) / f"tgs.io-gpu-{job}.json"


def write(plan: Plan, out_dir: str | Path) -> Path:
    """Write atomically (a runtime may be reading the directory)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = spec_path(out, plan.job)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(spec(plan), indent=2) + "\n")
    os.replace(tmp, path)
    return path
