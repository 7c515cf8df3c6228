"""Bad command-line input: every case exits 2 with one line on stderr and no traceback,
without reaching a controller."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from tgs.tools import ctl as ctl_mod
from tgs.tools import inject as inject_mod
from tgs.tools import run as run_mod
from tgs.tools.params import DEVICE, WEIGHT, AsciiFloat
from tgs.tools.sizes import SizeError, parse_size
from tools_helpers import tool

KELVIN = "1\u212a"                        # "1K" with the Kelvin sign
ARABIC = "\u0661\u0662M"                  # "12M" in Arabic-Indic digits
FULLWIDTH = "\uff11\uff12M"               # "12M" in fullwidth digits
LONG = "9" * 5000
NBSP = "1\u00a0G"
BAD_SIZES = [KELVIN, ARABIC, FULLWIDTH, LONG, NBSP, "1e3", "-1", "0x10", "1,5G", "", " ",
             "1.5", "GiB", "1\u0130B", "\u00b9K"]
NOWHERE = "ipc:///nonexistent/tgs/control.sock"

# (tool module, argv): every one is a usage error
CASES: list[tuple[str, list[str]]] = (
    [("run", ["--mem", s, "--", "true"]) for s in BAD_SIZES]
    + [("ctl", ["add", "j", "--mem", s]) for s in BAD_SIZES]
    + [("ctl", ["set", "j", "--mem", s]) for s in BAD_SIZES if s.strip()]
    + [("inject", ["run", "--mem", s, "--", "podman", "run", "img"]) for s in BAD_SIZES]
    + [
        ("run", ["--name", "", "--", "true"]),
        ("run", ["--name", "../../x", "--", "true"]),
        ("run", ["--name", "-x", "--", "true"]),
        ("run", ["--name", "a" * 64, "--", "true"]),
        ("run", ["--name", "j\u0131b", "--", "true"]),
        ("run", ["--weight", "\u0665", "--", "true"]),
        ("run", ["--weight", "0", "--", "true"]),
        ("run", ["--weight", "1001", "--", "true"]),
        ("run", ["--weight", LONG, "--", "true"]),
        ("run", ["--device", "\u0660", "--", "true"]),
        ("run", ["--device", "64", "--", "true"]),
        ("run", ["--device", "GPU/../x", "--", "true"]),
        ("run", ["--timeout", "\u0661", "--", "true"]),
        ("run", ["--timeout", "nan", "--", "true"]),
        ("run", ["--timeout", "inf", "--", "true"]),
        ("run", ["--timeout", "1e9", "--", "true"]),
        ("run", ["--priority", "PRODUCTION", "--", "true"]),
        ("run", ["--mem", "1G"]),
        ("ctl", ["add", ""]),
        ("ctl", ["add", "../x"]),
        ("ctl", ["add", "j", "--weight", "\u0662"]),
        ("ctl", ["add", "j", "--device", "1" * 30]),
        ("ctl", ["set", "j"]),
        ("ctl", ["set", "j", "--weight", "-1"]),
        ("ctl", ["set", "", "--weight", "1"]),
        ("ctl", ["--timeout", "0", "ls"]),
        ("ctl", ["top", "--interval", "\u0661"]),
        ("inject", ["run", "--name", "", "--", "podman", "run", "img"]),
        ("inject", ["run", "--weight", "x", "--", "podman", "run", "img"]),
        ("inject", ["run", "--", "sh", "-c", "true"]),
        ("inject", ["k8s", "--job", "", "-f", "-"]),
        ("inject", ["k8s", "--job", "../x", "-f", "-"]),
    ])
MODULES = {"run": (run_mod.cli, "tgs-run"), "ctl": (ctl_mod.cli, "tgsctl"),
           "inject": (inject_mod.cli, "tgs-inject")}


def _invoke(mod: str, argv: list[str], stdin: str | None = None):  # type: ignore[no-untyped-def]
    cli, prog = MODULES[mod]
    return CliRunner().invoke(cli, ["--controller", NOWHERE, *argv], prog_name=prog,
                              input=stdin)


def _check_one_line(result, prog: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == (125 if prog == "tgs-run" else 2), (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{prog}: error: "), lines
    assert "Traceback" not in result.output


@pytest.mark.parametrize("mod,argv", CASES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(CASES)])
def test_bad_input_exits_2_with_one_line(mod: str, argv: list[str]) -> None:
    _check_one_line(_invoke(mod, argv), MODULES[mod][1])


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "i"}]}}


def _pod(**container: object) -> str:
    pod = json.loads(json.dumps(POD))
    pod["spec"]["containers"][0].update(container)
    return json.dumps(pod)


BAD_MANIFESTS = [
    ("containers: [1]", '{"kind": "Pod", "spec": {"containers": [1]}}'),
    ("containers: a map", '{"kind": "Pod", "spec": {"containers": {"a": 1}}}'),
    ("containers: []", '{"kind": "Pod", "spec": {"containers": []}}'),
    ("spec: a list", '{"kind": "Pod", "spec": [1]}'),
    ("env: 5", _pod(env=5)),
    ("env: [1]", _pod(env=[1])),
    ("env: name missing", _pod(env=[{"value": "x"}])),
    ("env: value 3", _pod(env=[{"name": "A", "value": 3}])),
    ("volumeMounts: {a: 1}", _pod(volumeMounts={"a": 1})),
    ("volumeMounts: [a]", _pod(volumeMounts=["a"])),
    ("volumeMounts: no mountPath", _pod(volumeMounts=[{"name": "v"}])),
    ("container name 7", _pod(name=7)),
    ("volumes: 1", '{"kind": "Pod", "spec": {"containers": [{"name": "c"}], "volumes": 1}}'),
    ("volumes: [{}]", '{"kind": "Pod", "spec": {"containers": [{"name": "c"}], '
                      '"volumes": [{}]}}'),
    ("yaml list", "- 1\n- 2\n"),
    ("kind Service", '{"kind": "Service", "spec": {}}'),
    ("not yaml", "a: [\n"),
    ("deep", "[" * 5000 + "]" * 5000),
]


@pytest.mark.parametrize("what,text", BAD_MANIFESTS, ids=[w for w, _ in BAD_MANIFESTS])
def test_k8s_bad_manifest_shape(what: str, text: str) -> None:
    _check_one_line(_invoke("inject", ["k8s", "--job", "j", "-f", "-"], stdin=text),
                    "tgs-inject")


def test_k8s_good_manifest_shape_passes_validation() -> None:
    """A valid manifest gets past validation (then fails on the missing controller)."""
    from tgs.tools import k8s
    m = k8s.load(_pod(env=[{"name": "A", "value": "1"}],
                      volumeMounts=[{"name": "v", "mountPath": "/v"}]))
    assert m.fmt == "json" and m.docs[0]["kind"] == "Pod" and len(m.pods) == 1


@pytest.mark.parametrize("text", BAD_SIZES)
def test_parse_size_refuses_non_ascii(text: str) -> None:
    with pytest.raises(SizeError):
        parse_size(text)


def test_strict_types_accept_ascii() -> None:
    assert parse_size("12M") == 12 << 20 and parse_size("1K") == 1024
    assert parse_size("0.5KiB") == 512 and parse_size("1.5GiB") == 3 << 29
    assert WEIGHT.convert("7", None, None) == 7
    assert DEVICE.convert("3", None, None) == 3
    assert DEVICE.convert("GPU-12ab", None, None) == "GPU-12ab"
    assert AsciiFloat(0.1, 600).convert("2.5", None, None) == 2.5


@pytest.mark.parametrize("argv", [
    ["tgs-run", "--mem", KELVIN, "--", "true"],
    ["tgsctl", "add", "j", "--mem", LONG],
    ["tgs-inject", "run", "--mem", ARABIC, "--", "podman", "run", "i"],
    ["tgs-run", "--name", "", "--", "true"],
])
def test_console_scripts_one_line(argv: list[str], tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "TGS_CONTROLLER": NOWHERE, "HOME": str(tmp_path)}
    r = subprocess.run([tool(argv[0]), *argv[1:]], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == (125 if argv[0] == "tgs-run" else 2), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout == ""
