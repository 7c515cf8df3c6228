"""Which pod holds a set of device IDs, and that pod's annotations.

The kubelet's Allocate request carries only device IDs. The plugin asks for
PreStartContainer, which the kubelet calls before each start of the container, after it
has recorded the allocation: then the kubelet's pod resources API (List) names the pod,
namespace and container that hold exactly these IDs, and the API server (a GET of that
pod, when the plugin has credentials) gives its annotations. Without the pod resources
socket or the API server the plugin falls back to its defaults (see docs/kubernetes.md).
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import grpc

from .api import pr, pr_grpc

log = logging.getLogger("tgs.k8s")
POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class PodInfoError(Exception):
    pass


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    container: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}/{self.container}"


def _list(socket: str, timeout: float) -> list:  # type: ignore[type-arg]
    if not os.path.exists(socket):
        raise PodInfoError(f"no pod resources socket at {socket}")
    with grpc.insecure_channel(f"unix://{socket}") as ch:
        try:
            reply = pr_grpc.PodResourcesListerStub(ch).List(
                pr.ListPodResourcesRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            raise PodInfoError(f"pod resources List failed: {exc.code().name}") from None
    return list(reply.pod_resources)


def holders(socket: str, resource: str, timeout: float = 5.0) -> dict[frozenset[str], PodRef]:
    """Every set of `resource` device IDs the kubelet has assigned, with its container."""
    out: dict[frozenset[str], PodRef] = {}
    for pod in _list(socket, timeout):
        for ctr in pod.containers:
            ids = frozenset(i for d in ctr.devices if d.resource_name == resource
                            for i in d.device_ids)
            if ids:
                out[ids] = PodRef(pod.namespace, pod.name, ctr.name)
    return out


def owner(socket: str, resource: str, ids: Iterable[str], timeout: float = 5.0) -> PodRef | None:
    return holders(socket, resource, timeout).get(frozenset(ids))


@dataclass
class ApiServer:
    """A minimal read-only client of the Kubernetes API server: GET one pod."""

    url: str
    token: str | None = None
    ca_file: str | None = None
    timeout: float = 5.0

    @classmethod
    def in_cluster(cls) -> ApiServer | None:
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), \
            os.environ.get("KUBERNETES_SERVICE_PORT")
        token = SA_DIR / "token"
        if not host or not port or not token.exists():
            return None
        host = f"[{host}]" if ":" in host else host
        ca = SA_DIR / "ca.crt"
        return cls(f"https://{host}:{port}", token.read_text().strip(),
                   str(ca) if ca.exists() else None)

    def annotations(self, namespace: str, name: str) -> dict[str, str]:
        path = (f"/api/v1/namespaces/{urllib.parse.quote(namespace, safe='')}"
                f"/pods/{urllib.parse.quote(name, safe='')}")
        req = urllib.request.Request(self.url.rstrip("/") + path,
                                     headers={"Accept": "application/json"})
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        ctx = ssl.create_default_context(cafile=self.ca_file) \
            if self.url.startswith("https") else None
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=ctx) as resp:
                pod = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PodInfoError(f"GET pod {namespace}/{name}: {exc}") from None
        ann = (pod.get("metadata") or {}).get("annotations") or {}
        return {str(k): str(v) for k, v in ann.items()}
