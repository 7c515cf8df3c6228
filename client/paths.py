"""Where the controller's sockets are: its runtime directory and endpoints (shared by the
controller and its clients), and the owner-only directories it creates."""

from __future__ import annotations

import os
import stat
from pathlib import Path

CONTROL_SOCK = "control.sock"
METRICS_SOCK = "metrics.sock"
IPC_PATH_MAX = 107          # sun_path is 108 bytes with the NUL


def default_runtime_dir() -> Path:
    """/run/tgs as root, else $XDG_RUNTIME_DIR/tgs, else /tmp/tgs-<uid>."""
    if os.environ.get("TGS_RUNTIME_DIR"):
        return Path(os.environ["TGS_RUNTIME_DIR"])
    if os.geteuid() == 0:
        return Path("/run/tgs")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "tgs"
    return Path(f"/tmp/tgs-{os.geteuid()}")


def control_endpoint(runtime_dir: Path) -> str:
    return f"ipc://{Path(runtime_dir) / CONTROL_SOCK}"


def metrics_endpoint(runtime_dir: Path) -> str:
    return f"ipc://{Path(runtime_dir) / METRICS_SOCK}"


def private_dir(path: Path) -> Path:
    """Create `path` owner-only (0700), or check that an existing one is ours and private."""
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.geteuid():
        raise PermissionError(f"{path} belongs to uid {st.st_uid}, not to us")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def check_ipc_path(path: Path) -> None:
    if len(str(path).encode()) > IPC_PATH_MAX:
        raise ValueError(f"socket path {path} is longer than {IPC_PATH_MAX} bytes: "
                         "choose a shorter --runtime-dir")


def listen_endpoint(spec: str) -> str:
    """--listen value -> ZeroMQ endpoint: a bare port or host:port binds to loopback."""
    if "://" in spec:
        return spec
    if spec.isascii() and spec.isdigit():
        return f"tcp://127.0.0.1:{spec}"
    return f"tcp://{spec}"
