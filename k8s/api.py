"""The kubelet's gRPC APIs, loaded from the .proto files beside this module.

No generated code is kept in the repository: `grpc.protos_and_services` compiles the
.proto files when this module is first imported (grpcio-tools' bundled protoc, in
process, a few tens of milliseconds), so the .proto is the single source for the plugin
and for the test kubelet alike, and there is no build step that could go stale.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import grpc

HERE = Path(__file__).resolve().parent
API_VERSION = "v1beta1"


def _load(name: str) -> tuple[ModuleType, ModuleType]:
    # protos_and_services finds the file through sys.path: put this directory first
    # only while it loads (an editable install has no tgs/k8s directory on disk).
    sys.path.insert(0, str(HERE))
    try:
        return grpc.protos_and_services(name)  # type: ignore[attr-defined,no-any-return]
    finally:
        sys.path.remove(str(HERE))


dp, dp_grpc = _load("deviceplugin.proto")          # v1beta1: Registration, DevicePlugin
pr, pr_grpc = _load("podresources.proto")          # v1: PodResourcesLister
