"""The kubelet's DRA and plugin registration gRPC APIs, from the .proto files beside this
module, compiled when it is first imported (as tgs.k8s.api does for the device plugin API):
no generated code is kept, and the driver and the test kubelet use the same files.

    dra, dra_grpc          DRAPlugin v1beta1 (k8s.io/kubelet/pkg/apis/dra/v1beta1)
    dra1, dra1_grpc        DRAPlugin v1 (k8s.io/kubelet/pkg/apis/dra/v1; Kubernetes >= 1.34)
    reg, reg_grpc          Registration (k8s.io/kubelet/pkg/apis/pluginregistration/v1)
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import grpc

HERE = Path(__file__).resolve().parent
PLUGIN_TYPE = "DRAPlugin"                  # PluginInfo.type of a DRA plugin
SERVICE_V1 = "v1.DRAPlugin"                # PluginInfo.supported_versions entries
SERVICE_V1BETA1 = "v1beta1.DRAPlugin"
SERVICES = (SERVICE_V1, SERVICE_V1BETA1)   # the kubelet picks the first it knows


def _load(name: str) -> tuple[ModuleType, ModuleType]:
    sys.path.insert(0, str(HERE))          # protos_and_services looks the file up on sys.path
    try:
        return grpc.protos_and_services(name)  # type: ignore[attr-defined,no-any-return]
    finally:
        sys.path.remove(str(HERE))


dra, dra_grpc = _load("dra_v1beta1.proto")
dra1, dra1_grpc = _load("dra_v1.proto")
reg, reg_grpc = _load("pluginregistration.proto")
