"""Helpers for the DRA driver tests: a test kubelet (the plugin watcher's registration calls,
then a DRAPlugin client, from the driver's own .proto files), a fake API server for
resource.k8s.io/v1 (ResourceClaims to read, ResourceSlices to write, with resourceVersions),
ResourceClaim objects as the scheduler leaves them, and the driver as a process."""

from __future__ import annotations

import copy
import json
import shutil
import signal
import subprocess
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import grpc
import pytest
from fake_kubelet import serve_http, stop_http
from k8s_helpers import Controller
from proc_helpers import stop, tool, wait_for
from tgs.k8s.dra.api import dra, dra1, dra1_grpc, dra_grpc, reg, reg_grpc

DRIVER = "gpu.tgs.io"
NODE = "node-1"
BASE = "/apis/resource.k8s.io/v1"
KUBELET_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")     # a 1.34+ kubelet's


# ---------------------------------------------------------------- the API server
class FakeResourceApi:
    """resource.k8s.io/v1 on 127.0.0.1: GET namespaces/NS/resourceclaims/NAME from `claims`;
    resourceslices: list (fieldSelector spec.nodeName, spec.driver), GET, POST (409 when the
    name exists), PUT (409 unless the resourceVersion is the current one), DELETE. With
    `down` set, every request has its connection closed unanswered (an unreachable API
    server, as the client sees one); `fail` maps a claim (namespace, name) to the HTTP error
    its GET answers with."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict] = {}
        self.slices: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []      # (method, path without the query)
        self.down = False
        self.fail: dict[tuple[str, str], int] = {}
        self.lock = threading.RLock()
        self._rv = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, message: str) -> None:
                self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "message": message, "code": code})

            def _body(self) -> dict:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def _route(self, method: str) -> None:
                if outer.down:
                    self.close_connection = True       # no answer at all
                    return
                url = urllib.parse.urlsplit(self.path)
                outer.requests.append((method, url.path))
                parts = url.path[len(BASE):].strip("/").split("/") \
                    if url.path.startswith(BASE) else []
                with outer.lock:
                    if len(parts) == 4 and parts[0] == "namespaces" and \
                            parts[2] == "resourceclaims" and method == "GET":
                        code = outer.fail.get((parts[1], parts[3]))
                        if code is not None:
                            return self._status(code, "refused by the test")
                        obj = outer.claims.get((parts[1], parts[3]))
                        if obj is None:
                            return self._status(404, f'resourceclaims "{parts[3]}" not found')
                        return self._send(200, obj)
                    if parts[:1] == ["resourceslices"]:
                        return outer._slices(self, method, parts[1:],
                                             urllib.parse.parse_qs(url.query))
                return self._status(404, "no such path")

            def do_GET(self) -> None:  # noqa: N802
                self._route("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._route("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._route("PUT")

            def do_DELETE(self) -> None:  # noqa: N802
                self._route("DELETE")

            def log_message(self, *args: Any) -> None:
                pass

        self._srv, self.url = serve_http(Handler)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _slices(self, h: Any, method: str, rest: list[str], query: dict) -> None:
        if not rest and method == "GET":
            want = dict(kv.split("=", 1) for sel in query.get("fieldSelector", [])
                        for kv in sel.split(","))
            items = [s for s in self.slices.values()
                     if all({"spec.nodeName": s["spec"].get("nodeName"),
                             "spec.driver": s["spec"].get("driver")}.get(k) == v
                            for k, v in want.items())]
            return h._send(200, {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                                 "metadata": {"resourceVersion": str(self._rv)},
                                 "items": copy.deepcopy(items)})
        if not rest and method == "POST":
            obj = h._body()
            name = obj["metadata"]["name"]
            if name in self.slices:
                return h._status(409, f'resourceslices "{name}" already exists')
            obj["metadata"]["resourceVersion"] = self._next_rv()
            self.slices[name] = obj
            return h._send(201, obj)
        if len(rest) != 1:
            return h._status(404, "no such path")
        name = rest[0]
        have = self.slices.get(name)
        if have is None:
            return h._status(404, f'resourceslices "{name}" not found')
        if method == "GET":
            return h._send(200, have)
        if method == "DELETE":
            del self.slices[name]
            return h._send(200, {"kind": "Status", "status": "Success"})
        if method == "PUT":
            obj = h._body()
            if obj["metadata"].get("resourceVersion") != have["metadata"]["resourceVersion"]:
                return h._status(409, "the object has been modified")
            obj["metadata"]["resourceVersion"] = self._next_rv()
            self.slices[name] = obj
            return h._send(200, obj)
        return h._status(405, "method not allowed")

    def node_slices(self, node: str = NODE) -> list[dict]:
        with self.lock:
            return [copy.deepcopy(s) for s in self.slices.values()
                    if s["spec"].get("nodeName") == node]

    def writes(self) -> int:
        return sum(1 for m, p in self.requests if m in ("POST", "PUT")
                   and "/resourceslices" in p)

    def close(self) -> None:
        stop_http(self._srv)


def claim(ns: str, name: str, uid: str, devices: list[tuple[str, str]],
          configs: list[tuple[str, list[str], Any]] = (),  # type: ignore[assignment]
          node: str = NODE, driver: str = DRIVER) -> dict:
    """A ResourceClaim as the scheduler leaves it allocated: `devices` (request, device name)
    of `driver` in the node's pool; `configs` (source FromClass|FromClaim, requests,
    parameters) the opaque configs for the driver."""
    results = [{"request": r, "driver": driver, "pool": node, "device": d} for r, d in devices]
    config = [{"source": src, "requests": list(reqs),
               "opaque": {"driver": driver, "parameters": params}}
              for src, reqs, params in configs]
    requests = sorted({r.split("/")[0] for r, _ in devices}) or ["gpu"]
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": ns, "name": name, "uid": uid, "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": r, "exactly": {
            "deviceClassName": driver, "count": sum(1 for q, _ in devices
                                                    if q.split("/")[0] == r)}}
            for r in requests]}},
        "status": {"allocation": {"devices": {"results": results, "config": config}}},
    }


# ---------------------------------------------------------------- the kubelet
class DraKubelet:
    """`registry` plays /var/lib/kubelet/plugins_registry, `plugins` /var/lib/kubelet/plugins.

    `restart` is a kubelet going away and coming back, as upstream's does: its gRPC clients
    dropped; at start its plugin watcher makes the registry directory if missing (MkdirAll)
    and registers the sockets found there again (`register`); its DRA plugin manager deletes
    the node's ResourceSlices of every driver (NewDRAPluginManager, wipeResourceSlices)."""

    def __init__(self, root: Path) -> None:
        self.registry = root / "plugins_registry"
        self.registry.mkdir()
        self.plugins = root / "plugins"
        self._channels: list[grpc.Channel] = []
        self.restarts = 0
        self.chosen: str | None = None                 # the DRAPlugin service registered

    def restart(self, api: FakeResourceApi | None = None, wipe_registry: bool = False,
                node: str = NODE) -> None:
        """The kubelet stops (every client connection closed) and starts again: the node's
        slices on `api` deleted; with `wipe_registry`, the registry directory was removed
        meanwhile (its sockets with it) and is made again, empty. Call `register` next."""
        self.close()
        if wipe_registry:                   # moved away first: the driver may serve meanwhile
            gone = self.registry.with_name(f"{self.registry.name}.removed-{self.restarts}")
            self.registry.rename(gone)
            self.registry.mkdir()
            shutil.rmtree(gone, ignore_errors=True)
        if api is not None:
            with api.lock:
                for name in [n for n, s in api.slices.items()
                             if s["spec"].get("nodeName") == node]:
                    del api.slices[name]
        self.restarts += 1

    def socket(self, driver: str = DRIVER) -> Path:
        return self.registry / f"{driver}-reg.sock"

    def register(self, proc: DraPluginProc | None = None, driver: str = DRIVER,
                 timeout: float = 30.0, accept: bool = True) -> Any:
        """What the plugin watcher does: find the socket, GetInfo, check it, notify. The
        PluginInfo."""
        sock = self.socket(driver)
        if not wait_for(sock.exists, timeout=timeout, step=0.05):
            pytest.fail(f"no registration socket {sock}: "
                        f"{proc.log.read_text()[-3000:] if proc else ''}")
        ch = grpc.insecure_channel(f"unix://{sock}")
        self._channels.append(ch)
        stub = reg_grpc.RegistrationStub(ch)
        # a socket a killed driver left behind refuses until the new one replaces it
        info = stub.GetInfo(reg.InfoRequest(), timeout=30, wait_for_ready=True)
        # upstream's choice (DRAPluginManager.validateSupportedServices): the first entry of
        # the plugin's list that the kubelet supports
        self.chosen = next((v for v in info.supported_versions if v in KUBELET_SERVICES), None)
        ok = accept and info.type == "DRAPlugin" and info.name == driver and \
            self.chosen is not None
        stub.NotifyRegistrationStatus(reg.RegistrationStatus(
            plugin_registered=ok, error="" if ok else "refused by the test kubelet"),
            timeout=15)
        return info

    def dra(self, endpoint: str, version: str = "v1beta1") -> tuple[Any, Any]:
        """A DRAPlugin client of that version on the registered endpoint: (stub, messages)."""
        ch = grpc.insecure_channel(f"unix://{endpoint}")
        self._channels.append(ch)
        if version == "v1":
            return dra1_grpc.DRAPluginStub(ch), dra1
        return dra_grpc.DRAPluginStub(ch), dra

    def close(self) -> None:
        for ch in self._channels:
            ch.close()
        self._channels.clear()


def prepare(client: tuple[Any, Any], *claims: tuple[str, str, str]) -> dict[str, Any]:
    """NodePrepareResources for (namespace, uid, name) claims: uid -> the claim's answer."""
    stub, m = client
    req = m.NodePrepareResourcesRequest(claims=[m.Claim(namespace=ns, uid=uid, name=name)
                                                for ns, uid, name in claims])
    return dict(stub.NodePrepareResources(req, timeout=30).claims)


def unprepare(client: tuple[Any, Any], *claims: tuple[str, str, str]) -> dict[str, str]:
    stub, m = client
    req = m.NodeUnprepareResourcesRequest(claims=[m.Claim(namespace=ns, uid=uid, name=name)
                                                  for ns, uid, name in claims])
    return {u: r.error for u, r in stub.NodeUnprepareResources(req, timeout=30).claims.items()}


def devices(answer: Any) -> list[tuple[list[str], str, str, list[str]]]:
    """A claim's answer as (request_names, pool, device, cdi ids) tuples."""
    return [(list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids))
            for d in answer.devices]


# ---------------------------------------------------------------- the driver
class DraPluginProc:
    """tgs-dra-plugin pointed at the test kubelet's directories, the controller and the fake
    API server; its state and CDI specs in the test's directory."""

    def __init__(self, root: Path, kubelet: DraKubelet, ctl: Controller, api: FakeResourceApi,
                 *extra: str, cdi_dir: Path | None = None) -> None:
        self.log = root / "dra-plugin.log"
        self.plugin_dir = kubelet.plugins / DRIVER
        self.state_dir = root / "dra-state"
        self.cdi_dir = cdi_dir or root / "cdi"
        self.cmd = [tool("tgs-dra-plugin"), "--node-name", NODE, "--registrar-dir",
                    str(kubelet.registry), "--plugin-dir", str(self.plugin_dir), "--state-dir",
                    str(self.state_dir), "--cdi-dir", str(self.cdi_dir), "--api-server",
                    api.url, "--timeout", "2", "--health-interval", "0.2",
                    "--slice-interval", "0.5", "--resync-interval", "0.5",
                    "--log-level", "debug", *extra]
        self.env = ctl.env
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def endpoint(self) -> str:
        return str(self.plugin_dir / "dra.sock")

    def start(self) -> None:
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(self.cmd, stderr=logf, env=self.env)

    def close(self, sig: int = signal.SIGTERM) -> None:
        stop(self.proc, sig)

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text()[-n:]
