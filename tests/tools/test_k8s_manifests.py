"""tgs-inject k8s's manifests: Pods, every workload's pod template, several documents (YAML
`---` or a `kind: List`), other documents passed through, one line for what is not a
manifest it can patch.  Unit level: a Plan made here, no controller."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from tgs.tools import k8s
from tgs.tools.injection import Mount, Plan

PLAN = Plan("web", env={"TGS_SEGMENT": "/run/tgs/seg/web.seg"},
            mounts=[Mount("/var/lib/tgs/web.seg", "/run/tgs/seg/web.seg", readonly=False)])
POD_SPEC = {"containers": [{"name": "main", "image": "i"}, {"name": "side", "image": "b"}]}


def _wrap(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A `kind` object whose pod spec is `spec`, where WORKLOADS says it is."""
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "w"}}
    node = doc
    path = k8s.WORKLOADS[kind]
    for key in path[:-1]:
        node[key] = {}
        node = node[key]
    node[path[-1]] = copy.deepcopy(spec)
    return doc


def _spec(doc: dict[str, Any]) -> dict[str, Any]:
    node = doc
    for key in k8s.WORKLOADS[doc["kind"]]:
        node = node[key]
    return node


def _patched(spec: dict[str, Any], container: str = "main") -> bool:
    (c,) = [c for c in spec["containers"] if c["name"] == container]
    return {"name": "TGS_SEGMENT", "value": "/run/tgs/seg/web.seg"} in (c.get("env") or []) \
        and any(v["name"].startswith("tgs-") for v in spec["volumes"])


def _run(text: str, container: str | None = None) -> str:
    return k8s.dump(k8s.patch(k8s.load(text), PLAN, container))


@pytest.mark.parametrize("kind", list(k8s.WORKLOADS))
def test_every_workload_kind_is_patched(kind: str) -> None:
    doc = _wrap(kind, POD_SPEC)
    for text in (yaml.safe_dump(doc), json.dumps(doc)):
        out = _run(text)
        got = json.loads(out) if text.startswith("{") else yaml.safe_load(out)
        assert got["kind"] == kind and _patched(_spec(got)) and _patched(_spec(got), "side")
        assert _run(out) == out                      # patching twice changes nothing


def test_cronjob_template_path() -> None:
    got = yaml.safe_load(_run(yaml.safe_dump(_wrap("CronJob", POD_SPEC)), "main"))
    spec = got["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert _patched(spec) and "env" not in spec["containers"][1]


def test_multi_document_file() -> None:
    """Each workload patched, the Service and ConfigMap written back as they were."""
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
           "spec": {"ports": [{"port": 80}], "selector": {"app": "w"}}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
          "data": {"k": "v"}}
    docs = [svc, _wrap("Deployment", POD_SPEC), cm, _wrap("Job", POD_SPEC)]
    text = "---\n" + "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs) + "---\n"
    out = _run(text)
    got = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in got] == ["Service", "Deployment", "ConfigMap", "Job"]
    assert got[0] == svc and got[2] == cm
    assert _patched(_spec(got[1])) and _patched(_spec(got[3]))
    assert _run(out) == out


def test_kind_list() -> None:
    lst = {"apiVersion": "v1", "kind": "List",
           "items": [_wrap("StatefulSet", POD_SPEC), {"kind": "Service", "spec": {}}]}
    got = json.loads(_run(json.dumps(lst)))
    assert got["kind"] == "List" and _patched(_spec(got["items"][0]))
    assert got["items"][1] == {"kind": "Service", "spec": {}}


@pytest.mark.parametrize("text,needle", [
    ("kind: Service\nspec: {}\n", "nothing to patch: expected kind: Pod, Deployment"),
    ("kind: Service\n---\nkind: ConfigMap\n", "(got ConfigMap, Service)"),
    ("", "empty"),
    ("---\n---\n", "empty"),
    ("kind: Deployment\nspec: {}\n", "the Deployment has no spec.template mapping"),
    ("kind: CronJob\nspec: {jobTemplate: {spec: {}}}\n",
     "no spec.jobTemplate.spec.template mapping"),
    ("kind: Deployment\nspec: {template: {spec: {containers: 1}}}\n",
     "spec.template.spec.containers must be a list"),
    ("kind: Service\n---\nkind: Job\nspec: {template: {spec: {}}}\n",
     "document 2: spec.template.spec.containers is missing or empty"),
    ("kind: Service\n---\n- 1\n", "document 2: the manifest is not an object"),
    ("metadata: {name: x}\n", "has no kind"),
    ("kind: List\nitems: [1]\n", "items[0] must be a mapping"),
    ("kind: Pod\nspec: {containers: [{name: a}]}\n---\nkind: Pod\nspec: [\n", "not a valid"),
])
def test_refused_with_one_line(text: str, needle: str) -> None:
    with pytest.raises(k8s.ManifestError) as exc:
        _run(text)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg, msg


def test_container_must_be_in_every_workload() -> None:
    other = _wrap("Deployment", {"containers": [{"name": "solo", "image": "i"}]})
    text = yaml.safe_dump_all([_wrap("Pod", POD_SPEC), other])
    with pytest.raises(k8s.ManifestError, match="no container named 'main' in the "
                                                "Deployment w \\(it has: solo\\)"):
        _run(text, "main")
