"""The API server calls of the DRA driver: GET a ResourceClaim, and the node's ResourceSlices
(list, create, update, delete), on resource.k8s.io/v1 (Kubernetes >= 1.34).

The connection (URL, token, CA, client certificate: in-cluster, a kubeconfig or flags) is the
device plugin's `podinfo.ApiServer`; this module only adds the requests. Errors are KubeError
with the HTTP status (None: no answer) and the API server's message.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..podinfo import ApiServer

GROUP_VERSION = "resource.k8s.io/v1"
_BASE = f"/apis/{GROUP_VERSION}"


class KubeError(Exception):
    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


class Kube:
    def __init__(self, api: ApiServer) -> None:
        self.api = api

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                query: dict[str, str] | None = None) -> dict[str, Any]:
        url = self.api.url.rstrip("/") + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Accept": "application/json"})
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.api.token:
            req.add_header("Authorization", f"Bearer {self.api.token}")
        what = f"{method} {path}"
        try:
            with urllib.request.urlopen(req, timeout=self.api.timeout,
                                        context=self.api._ssl()) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise KubeError(exc.code, f"{what}: {exc.code} {_message(exc)}") from None
        except (urllib.error.URLError, OSError, ValueError, ssl.SSLError) as exc:
            raise KubeError(None, f"{what}: {exc}") from None
        try:
            out = json.loads(raw) if raw else {}
        except ValueError:
            raise KubeError(None, f"{what}: the answer is not JSON") from None
        if not isinstance(out, dict):
            raise KubeError(None, f"{what}: the answer is not a JSON object")
        return out

    # ------------------------------------------------------------ claims
    def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        return self.request("GET", f"{_BASE}/namespaces/{_q(namespace)}/resourceclaims/"
                                   f"{_q(name)}")

    # ------------------------------------------------------------ slices
    def list_slices(self, node: str, driver: str) -> list[dict[str, Any]]:
        out = self.request("GET", f"{_BASE}/resourceslices", query={
            "fieldSelector": f"spec.nodeName={node},spec.driver={driver}"})
        items = out.get("items") or []
        return [i for i in items if isinstance(i, dict)]

    def create_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", f"{_BASE}/resourceslices", obj)

    def update_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT with the object's resourceVersion: 409 when the slice changed since read."""
        return self.request("PUT", f"{_BASE}/resourceslices/{_q(obj['metadata']['name'])}", obj)

    def delete_slice(self, name: str) -> None:
        try:
            self.request("DELETE", f"{_BASE}/resourceslices/{_q(name)}")
        except KubeError as exc:
            if exc.status != 404:
                raise


def _message(exc: urllib.error.HTTPError) -> str:
    """The `message` of the Status the API server answers with, else the reason phrase."""
    try:
        body = json.loads(exc.read() or b"{}")
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])[:300]
    except (ValueError, OSError):
        pass
    return str(exc.reason)
