"""A test kubelet: the Registration server and a DevicePlugin client over unix sockets in a
temp directory, the pod resources API, and a tiny API server for pod annotations; all from
the plugin's own .proto files (tgs.k8s.api). It restarts as upstream's kubelet does
(restart_like_upstream): every socket gone while it is down, then a pod resources server that
lists no pods until its pod manager is filled."""

from __future__ import annotations

import json
import queue
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
from tgs.k8s.api import dp, dp_grpc, pr, pr_grpc


class _Registration(dp_grpc.RegistrationServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self.kubelet = kubelet

    def Register(self, request: Any, context: Any) -> Any:
        self.kubelet.attempts += 1
        if self.kubelet.reject:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "resource name already taken")
        self.kubelet.registrations.put(request)
        return dp.Empty()


class _PodResources(pr_grpc.PodResourcesListerServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self.kubelet = kubelet

    def List(self, request: Any, context: Any) -> Any:
        self.kubelet.lists += 1
        with self.kubelet.lock:
            filling = time.monotonic() < self.kubelet.filled_at
            pods = {} if filling else dict(self.kubelet.pods)
        out = []
        for (ns, name), ctrs in pods.items():
            out.append(pr.PodResources(namespace=ns, name=name, containers=[
                pr.ContainerResources(name=c, devices=[
                    pr.ContainerDevices(resource_name=res, device_ids=ids)])
                for c, (res, ids) in ctrs.items()]))
        return pr.ListPodResourcesResponse(pod_resources=out)


class FakeKubelet:
    """`dir` plays /var/lib/kubelet/device-plugins; `pod_resources` its pod-resources socket."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "device-plugins"
        self.dir.mkdir()
        self.pod_resources = root / "pod-resources.sock"
        self.registrations: queue.Queue = queue.Queue()      # accepted RegisterRequests
        self.reject = False                                  # refuse registrations
        self.attempts = 0
        self.lock = threading.Lock()
        # (namespace, pod) -> {container: (resource, [device ids])}
        self.pods: dict[tuple[str, str], dict[str, tuple[str, list[str]]]] = {}
        self.filled_at = 0.0                 # List names no pods before (monotonic)
        self.lists = 0                       # List calls answered
        self.restarted_at = 0.0              # restart_like_upstream: servers back (monotonic)
        self._reg: grpc.Server | None = None
        self._pr: grpc.Server | None = None
        self.start_pod_resources()
        self._channels: list[grpc.Channel] = []

    def start_pod_resources(self, empty_for: float = 0.0) -> None:
        """The pod resources server, listing no pods for `empty_for` s: upstream starts it
        before its pod manager holds the node's pods."""
        with self.lock:
            self.filled_at = time.monotonic() + empty_for
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pr_grpc.add_PodResourcesListerServicer_to_server(_PodResources(self), server)
        server.add_insecure_port(f"unix://{self.pod_resources}")
        server.start()
        self._pr = server

    def stop_pod_resources(self) -> None:
        if self._pr is not None:
            self._pr.stop(0).wait(5)
            self._pr = None
        self.pod_resources.unlink(missing_ok=True)

    @property
    def socket(self) -> Path:
        return self.dir / "kubelet.sock"

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        dp_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._reg = server

    def stop(self) -> None:
        """A stopping kubelet: its server goes; its socket file is removed."""
        if self._reg is not None:
            self._reg.stop(0).wait(5)
            self._reg = None
        self.socket.unlink(missing_ok=True)

    def restart(self) -> None:
        """As the real kubelet does at start: every socket in the directory is removed
        (the plugins' too), then kubelet.sock is created anew."""
        self.stop()
        for p in self.dir.iterdir():
            if p.is_socket():
                p.unlink()
        self.start()

    def restart_like_upstream(self, down: float, empty_for: float) -> None:
        """A kubelet restart as upstream's: both servers and every socket gone for `down` s,
        then kubelet.sock and the pod resources socket anew, the latter listing no pods
        for `empty_for` s more."""
        self.stop()
        self.stop_pod_resources()
        for p in self.dir.iterdir():
            if p.is_socket():
                p.unlink()
        time.sleep(down)
        self.restarted_at = time.monotonic()         # before the new servers answer
        self.start_pod_resources(empty_for)
        self.start()

    def next_registration(self, timeout: float = 15.0) -> Any:
        return self.registrations.get(timeout=timeout)

    def plugin(self, endpoint: str) -> Any:
        """A DevicePlugin client on the registered endpoint."""
        ch = grpc.insecure_channel(f"unix://{self.dir / endpoint}")
        self._channels.append(ch)
        return dp_grpc.DevicePluginStub(ch)

    def hold(self, ns: str, pod: str, container: str, resource: str, ids: list[str]) -> None:
        with self.lock:
            self.pods.setdefault((ns, pod), {})[container] = (resource, list(ids))

    def add_pod(self, ns: str, pod: str) -> None:
        """A pod without devices (List names every pod of the node)."""
        with self.lock:
            self.pods.setdefault((ns, pod), {})

    def release(self, ns: str, pod: str) -> None:
        with self.lock:
            self.pods.pop((ns, pod), None)

    def close(self) -> None:
        for ch in self._channels:
            ch.close()
        self.stop()
        self.stop_pod_resources()


class Watch:
    """A ListAndWatch stream read by a thread into a queue of device lists
    ({id: health})."""

    def __init__(self, stub: Any, wait_for_ready: bool = False) -> None:
        """wait_for_ready: the call waits (up to 30 s) for the plugin's socket to accept, as
        a kubelet retries, instead of failing at once on a socket not served yet."""
        self.updates: queue.Queue = queue.Queue()
        self._call = stub.ListAndWatch(dp.Empty(), wait_for_ready=True, timeout=30) \
            if wait_for_ready else stub.ListAndWatch(dp.Empty())
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        try:
            for resp in self._call:
                self.updates.put({d.ID: d.health for d in resp.devices})
        except grpc.RpcError:
            self.updates.put(None)

    def next(self, timeout: float = 15.0) -> dict[str, str] | None:
        return self.updates.get(timeout=timeout)

    def until(self, pred: Any, timeout: float = 20.0) -> dict[str, str]:
        """The first update for which pred holds (AssertionError if none in time)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.updates.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if last is not None and pred(last):
                return last
        raise AssertionError(f"no matching ListAndWatch update; last: {last}")

    def close(self) -> None:
        self._call.cancel()
        self._t.join(timeout=5)


def serve_http(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """A fake API server's HTTP side on a free loopback port, served by a daemon thread:
    the server and its URL (stop_http ends it)."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def stop_http(srv: ThreadingHTTPServer) -> None:
    srv.shutdown()
    srv.server_close()


class FakeApiServer:
    """GET /api/v1/namespaces/NS/pods/NAME -> a Pod with the annotations set here."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, str]] = {}
        self.requests: list[str] = []
        self.auth: list[str | None] = []
        self.node_patches: list[tuple[str, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                outer.requests.append(self.path)
                outer.auth.append(self.headers.get("Authorization"))
                parts = self.path.strip("/").split("/")
                key = (parts[3], parts[5]) if len(parts) == 6 else None
                if key not in outer.pods:
                    self.send_response(404)
                    self.end_headers()
                    return
                body = json.dumps({"kind": "Pod", "metadata": {
                    "namespace": key[0], "name": key[1], "annotations": outer.pods[key]}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def do_PATCH(self) -> None:  # noqa: N802
                parts = self.path.strip("/").split("/")
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                ok = len(parts) == 4 and parts[2] == "nodes" and self.headers.get(
                    "Content-Type") == "application/merge-patch+json"
                if ok:
                    outer.node_patches.append((parts[3], body))
                self.send_response(200 if ok else 400)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._srv, self.url = serve_http(Handler)

    def close(self) -> None:
        stop_http(self._srv)

