"""The device plugin's liveness/readiness probe (deploy/tgs.yaml): one `GetDevicePluginOptions`
call on the plugin's own socket, the call the kubelet makes first.

    python -m tgs.k8s.probe /var/lib/kubelet/device-plugins/tgs-gpu.sock [--timeout 3]

Exit 0 when the plugin answers within the timeout, 1 otherwise (the reason on stderr).  It
checks that the gRPC server is up and serving on the path the kubelet knows, not the
controller (the plugin reports a dead controller as Unhealthy devices, which is not a reason
to restart the plugin)."""

from __future__ import annotations

import argparse
import sys


def probe(socket: str, timeout: float) -> str | None:
    """None when the plugin at `socket` answers; else why not."""
    import grpc

    from .api import dp, dp_grpc

    with grpc.insecure_channel(f"unix://{socket}") as channel:
        try:
            dp_grpc.DevicePluginStub(channel).GetDevicePluginOptions(dp.Empty(),
                                                                     timeout=timeout)
        except grpc.RpcError as exc:
            return f"{exc.code().name}: {exc.details()}"   # type: ignore[attr-defined]
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tgs.k8s.probe", description=__doc__.split("\n")[0])
    ap.add_argument("socket", help="the plugin's socket (--plugin-dir/--endpoint)")
    ap.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    args = ap.parse_args(argv)
    why = probe(args.socket, args.timeout)
    if why is not None:
        print(f"tgs-device-plugin probe: {args.socket}: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
