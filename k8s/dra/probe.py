"""The DRA driver's liveness/readiness probe (deploy/tgs-dra.yaml): the calls the kubelet
makes, on the driver's own sockets.

    python -m tgs.k8s.dra.probe DRA_SOCKET [--registration REG_SOCKET] [--timeout 3]

A NodePrepareResources with no claims on the DRA socket (v1, else v1beta1: an empty answer,
nothing prepared) and, with --registration, a GetInfo on the registration socket. Exit 0 when
both answer within the timeout, 1 otherwise (the reason on stderr). The controller is not
asked: a claim prepared while it is down gets an error the kubelet retries, which a restart
of the driver would not help.
"""

from __future__ import annotations

import argparse
import sys


def probe(dra_socket: str, registration: str | None, timeout: float) -> str | None:
    """None when the driver answers on its sockets; else why not."""
    import grpc

    from .api import dra, dra1, dra1_grpc, dra_grpc, reg, reg_grpc

    with grpc.insecure_channel(f"unix://{dra_socket}") as ch:
        why = None
        for stub, msgs in ((dra1_grpc.DRAPluginStub(ch), dra1), (dra_grpc.DRAPluginStub(ch), dra)):
            try:
                stub.NodePrepareResources(msgs.NodePrepareResourcesRequest(), timeout=timeout)
                why = None
                break
            except grpc.RpcError as exc:
                why = f"{dra_socket}: {exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
        if why is not None:
            return why
    if registration:
        with grpc.insecure_channel(f"unix://{registration}") as ch:
            try:
                reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=timeout)
            except grpc.RpcError as exc:
                return f"{registration}: {exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tgs.k8s.dra.probe",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("socket", help="the driver's DRA socket (<plugin dir>/dra.sock)")
    ap.add_argument("--registration", default=None,
                    help="its registration socket (<registrar dir>/<driver>-reg.sock)")
    ap.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    args = ap.parse_args(argv)
    why = probe(args.socket, args.registration, args.timeout)
    if why is not None:
        print(f"tgs-dra-plugin probe: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
