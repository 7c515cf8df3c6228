"""Which pod holds a set of device IDs, and that pod's annotations.

The kubelet's Allocate request carries only device IDs. The plugin asks for
PreStartContainer, which the kubelet calls before each start of the container, after it
has recorded the allocation: then the kubelet's pod resources API (List) names the pod,
namespace and container that hold exactly these IDs, and the API server (a GET of that
pod, when the plugin has credentials) gives its annotations. Without the pod resources
socket or the API server the plugin falls back to its defaults (see docs/kubernetes.md).
"""

from __future__ import annotations

import atexit
import base64
import json
import logging
import os
import shutil
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import yaml

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


def identity(path: str | Path) -> tuple[int, int, int] | None:
    """Which file is at `path` (None: none): a restarted kubelet makes its sockets anew."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


@dataclass(frozen=True)
class Listing:
    """One answer of the pod resources List: the device sets held, and every pod named."""

    holders: dict[frozenset[str], PodRef]
    pods: frozenset[tuple[str, str]]                  # (namespace, name)


def listing(socket: str, resource: str, timeout: float = 5.0) -> Listing:
    out: dict[frozenset[str], PodRef] = {}
    pods = set()
    for pod in _list(socket, timeout):
        pods.add((pod.namespace, pod.name))
        for ctr in pod.containers:
            ids = frozenset(i for d in ctr.devices if d.resource_name == resource
                            for i in d.device_ids)
            if ids:
                out[ids] = PodRef(pod.namespace, pod.name, ctr.name)
    return Listing(out, frozenset(pods))


def holders(socket: str, resource: str, timeout: float = 5.0) -> dict[frozenset[str], PodRef]:
    """Every set of `resource` device IDs the kubelet has assigned, with its container."""
    return listing(socket, resource, timeout).holders


def owner(socket: str, resource: str, ids: Iterable[str], timeout: float = 5.0) -> PodRef | None:
    return holders(socket, resource, timeout).get(frozenset(ids))


@dataclass
class ApiServer:
    """A minimal read-only client of the Kubernetes API server: GET one pod."""

    url: str
    token: str | None = None
    ca_file: str | None = None
    timeout: float = 5.0
    cert_file: str | None = None                  # client certificate and key (kubeconfig)
    key_file: str | None = None
    insecure: bool = False                        # insecure-skip-tls-verify (kubeconfig)
    private_dir: str | None = None                # inline *-data written here (close())

    @classmethod
    def from_kubeconfig(cls, path: str, context: str | None = None) -> ApiServer:
        """The cluster and user of `context` (default: current-context) in a kubeconfig:
        token, tokenFile or client certificate; inline *-data are written to a private
        directory. Exec and auth-provider plugins are not supported."""
        try:
            cfg = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise PodInfoError(f"kubeconfig {path}: {exc}") from None
        base = Path(path).resolve().parent

        def named(kind: str, name: Any) -> dict[str, Any]:
            for entry in cfg.get(kind) or []:
                if isinstance(entry, dict) and entry.get("name") == name:
                    return dict(entry.get(kind[:-1]) or {})
            raise PodInfoError(f"kubeconfig {path}: no {kind[:-1]} named {name!r}")

        ctx = named("contexts", context or cfg.get("current-context"))
        cluster = named("clusters", ctx.get("cluster"))
        user = named("users", ctx["user"]) if ctx.get("user") else {}
        if "exec" in user or "auth-provider" in user:
            raise PodInfoError(f"kubeconfig {path}: exec/auth-provider users are not supported"
                               " (use a token or a client certificate)")
        private: list[Path] = []

        def file_of(obj: dict[str, Any], key: str) -> str | None:
            if obj.get(f"{key}-data"):
                if not private:
                    private.append(Path(tempfile.mkdtemp(prefix="tgs-kubeconfig-")))
                out = private[0] / key
                out.touch(mode=0o600)
                out.write_bytes(base64.b64decode(obj[f"{key}-data"]))
                return str(out)
            if obj.get(key):
                return str(base / obj[key])           # relative to the kubeconfig's dir
            return None

        token = user.get("token")
        if not token and user.get("tokenFile"):
            token = (base / user["tokenFile"]).read_text().strip()
        if not cluster.get("server"):
            raise PodInfoError(f"kubeconfig {path}: the cluster has no server")
        api = cls(str(cluster["server"]), token, file_of(cluster, "certificate-authority"),
                  cert_file=file_of(user, "client-certificate"),
                  key_file=file_of(user, "client-key"),
                  insecure=bool(cluster.get("insecure-skip-tls-verify")))
        if private:                               # key material: removed at exit at the latest
            api.private_dir = str(private[0])
            atexit.register(api.close)
        return api

    def close(self) -> None:
        """Remove the files inline kubeconfig data was written to (the client is unusable
        for TLS afterwards)."""
        if self.private_dir is not None:
            shutil.rmtree(self.private_dir, ignore_errors=True)
            self.private_dir = None

    def _ssl(self) -> ssl.SSLContext | None:
        if not self.url.startswith("https"):
            return None
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

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

    def label_node(self, node: str, labels: dict[str, str]) -> None:
        """Set labels on a node (a JSON merge patch of its metadata)."""
        body = json.dumps({"metadata": {"labels": labels}}).encode()
        req = urllib.request.Request(
            f"{self.url.rstrip('/')}/api/v1/nodes/{urllib.parse.quote(node, safe='')}",
            data=body, method="PATCH",
            headers={"Content-Type": "application/merge-patch+json",
                     "Accept": "application/json"})
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl()):
                pass
        except (urllib.error.URLError, OSError, ValueError, ssl.SSLError) as exc:
            raise PodInfoError(f"PATCH node {node}: {exc}") from None

    def annotations(self, namespace: str, name: str) -> dict[str, str]:
        path = (f"/api/v1/namespaces/{urllib.parse.quote(namespace, safe='')}"
                f"/pods/{urllib.parse.quote(name, safe='')}")
        req = urllib.request.Request(self.url.rstrip("/") + path,
                                     headers={"Accept": "application/json"})
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl()) as resp:
                pod = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError, ssl.SSLError) as exc:
            raise PodInfoError(f"GET pod {namespace}/{name}: {exc}") from None
        ann = (pod.get("metadata") or {}).get("annotations") or {}
        return {str(k): str(v) for k, v in ann.items()}
