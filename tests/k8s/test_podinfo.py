"""Reading a pod's annotations: the API server client with a token, from a kubeconfig
(token, inline certificates, refused auth plugins), and the pod resources lookup."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
import yaml
from fake_kubelet import FakeApiServer, FakeKubelet
from tgs.k8s import podinfo

pytestmark = pytest.mark.timeout(60)


def _kubeconfig(tmp_path: Path, cluster: dict, user: dict) -> Path:
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "here",
           "contexts": [{"name": "elsewhere", "context": {"cluster": "x", "user": "x"}},
                        {"name": "here", "context": {"cluster": "c", "user": "u"}}],
           "clusters": [{"name": "c", "cluster": cluster}],
           "users": [{"name": "u", "user": user}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_annotations_with_a_kubeconfig_token(tmp_path: Path, apiserver: FakeApiServer) -> None:
    apiserver.pods[("ml", "p-0")] = {"tgs.io/priority": "production"}
    (tmp_path / "tok").write_text("s3cret\n")
    api = podinfo.ApiServer.from_kubeconfig(
        str(_kubeconfig(tmp_path, {"server": apiserver.url}, {"tokenFile": "tok"})))
    assert api.annotations("ml", "p-0") == {"tgs.io/priority": "production"}
    assert apiserver.auth == ["Bearer s3cret"]
    with pytest.raises(podinfo.PodInfoError, match="p-1"):
        api.annotations("ml", "p-1")                      # 404


def test_kubeconfig_inline_certificates_and_refusals(tmp_path: Path) -> None:
    b64 = {k: base64.b64encode(k.encode()).decode() for k in ("ca", "crt", "key")}
    api = podinfo.ApiServer.from_kubeconfig(str(_kubeconfig(
        tmp_path, {"server": "https://10.0.0.1:6443", "certificate-authority-data": b64["ca"]},
        {"client-certificate-data": b64["crt"], "client-key-data": b64["key"]})))
    assert api.url == "https://10.0.0.1:6443" and api.token is None
    for f, want in ((api.ca_file, b"ca"), (api.cert_file, b"crt"), (api.key_file, b"key")):
        assert f is not None and Path(f).read_bytes() == want
        assert stat.S_IMODE(Path(f).stat().st_mode) == 0o600
    api.close()                                           # the key material goes with it
    assert not any(Path(f).exists() for f in (api.ca_file, api.cert_file, api.key_file)
                   if f is not None)
    with pytest.raises(podinfo.PodInfoError, match="exec"):
        podinfo.ApiServer.from_kubeconfig(str(_kubeconfig(
            tmp_path, {"server": "https://x"}, {"exec": {"command": "aws"}})))
    with pytest.raises(podinfo.PodInfoError, match="server"):
        podinfo.ApiServer.from_kubeconfig(str(_kubeconfig(tmp_path, {}, {"token": "t"})))


def test_pod_resources_owner(kubelet: FakeKubelet) -> None:
    sock = str(kubelet.pod_resources)
    kubelet.hold("ns", "a", "main", "tgs.io/gpu", ["g-share-1", "g-share-0"])
    kubelet.hold("ns", "a", "side", "other.io/dev", ["g-share-2"])
    ref = podinfo.owner(sock, "tgs.io/gpu", ["g-share-0", "g-share-1"])
    assert ref == podinfo.PodRef("ns", "a", "main")
    assert podinfo.owner(sock, "tgs.io/gpu", ["g-share-0"]) is None    # exactly the set
    assert podinfo.owner(sock, "tgs.io/gpu", ["g-share-2"]) is None    # another resource
    with pytest.raises(podinfo.PodInfoError):
        podinfo.owner(str(kubelet.dir / "missing.sock"), "tgs.io/gpu", ["x"])
