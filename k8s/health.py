"""When the shares turn Unhealthy: after several failed looks at the controller in a row.

One lost status poll (a controller busy for a moment, a restart of its container) would
otherwise turn every share Unhealthy, and a pod the kubelet admits in that window fails with
UnexpectedAdmissionError. So the plugin waits for `after` consecutive failed polls (at the
poll interval, --health-interval) and turns Healthy again on the first poll that succeeds.

A poll of a controller that is gone fails at once rather than after the call's whole timeout:
`refused` asks the ipc socket itself (a process killed with SIGKILL leaves its socket file,
and a ZMQ request to it would just wait), so a dead controller is seen after about
(after - 1) poll intervals (docs/kubernetes.md has the measured figure).
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

UNHEALTHY_AFTER = 3                 # consecutive failed polls before the shares go Unhealthy


@dataclass
class Hysteresis:
    """Counts consecutive failed polls; `down` once there were `after` of them."""

    after: int = UNHEALTHY_AFTER
    failures: int = 0

    def failed(self) -> bool:
        """One failed poll: whether the controller now counts as down."""
        self.failures += 1
        return self.down

    def succeeded(self) -> None:
        self.failures = 0

    @property
    def down(self) -> bool:
        return self.failures >= self.after


def refused(endpoint: str) -> str | None:
    """Why nothing can be listening on an ipc:// endpoint (no socket file, or a connection
    refused), or None when it may be (or the endpoint is not ipc): then the call decides."""
    if not endpoint.startswith("ipc://"):
        return None
    path = endpoint[len("ipc://"):]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.5)
    try:
        s.connect(path)
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return f"nothing listens on {path} ({errno.errorcode[exc.errno]})"
        return None                 # a full backlog or the like: not proof of death
    finally:
        s.close()
    return None
