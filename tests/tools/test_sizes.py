"""Sizes on the command line: the one grammar (tests/abi/test_size_grammar.py runs its
vectors), what 0 means per option, and a size split over two words refused."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from tgs.tools import ctl as ctl_mod
from tgs.tools import inject as inject_mod
from tgs.tools import run as run_mod
from tgs.tools.sizes import SizeError, format_size, parse_size

GIB = 1 << 30
NOWHERE = "ipc:///nonexistent/tgs/control.sock"


@pytest.mark.parametrize("text,value", [
    ("512MiB", 512 << 20), ("8GiB", 8 * GIB), ("8G", 8 * GIB), ("8gb", 8 * GIB),
    ("1.5GiB", 3 * GIB // 2), ("4096", 4096), ("4096B", 4096), (" 2 K ", 2048),
    ("1T", 1 << 40), ("0", 0),
])
def test_parse(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "GiB", "-1G", "1.5", "1.5iB", "8X", "1e9", "8 GiB GiB",
                                  "99999999999T", "unlimited", "0.1B", "0.0001K"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(SizeError, match="size|large|byte"):
        parse_size(text)


def test_format() -> None:
    assert format_size(3 * GIB // 2) == "1.5GiB"
    assert format_size(512 << 20) == "512MiB"
    assert format_size(100) == "100B"
    assert format_size(None) == "unlimited"


class FakeClient:
    """Records what a tool asks the controller."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def register(self, name: str, **kw: Any) -> dict[str, Any]:
        self.calls.append(("register", kw))
        return {"job": {"name": name}, "env": {}, "segment": "/x.seg"}

    def set(self, name: str, **kw: Any) -> dict[str, Any]:
        self.calls.append(("set", kw))
        return {"job": {"name": name}}

    def unregister(self, name: str, **kw: Any) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    client = FakeClient()
    for mod in (run_mod, ctl_mod):
        monkeypatch.setattr(mod, "make_client", lambda *a, **k: client)
    return client


def _sent(client: FakeClient, what: str) -> dict[str, Any]:
    ((call, kw),) = [c for c in client.calls if c[0] == what]
    return kw


@pytest.mark.parametrize("value,quota", [("0", None), ("unlimited", None), ("Unlimited", None),
                                         ("1.5GiB", 3 * GIB // 2), ("1", 1)])
def test_mem_0_and_unlimited_mean_no_quota(fake: FakeClient, value: str,
                                           quota: int | None) -> None:
    r = CliRunner().invoke(run_mod.cli, ["--mem", value, "--host-pinned", value, "--", "true"],
                           prog_name="tgs-run")
    assert r.exit_code == 0, r.output
    kw = _sent(fake, "register")
    assert kw["mem_quota"] == quota
    assert kw["host_pinned_max"] == (quota or 0)       # on the wire 0 is "no limit"
    fake.calls.clear()
    r = CliRunner().invoke(ctl_mod.cli, ["add", "j", "--mem", value, "--host-pinned", value])
    assert r.exit_code == 0, r.output
    assert _sent(fake, "register")["mem_quota"] == quota
    fake.calls.clear()
    r = CliRunner().invoke(ctl_mod.cli, ["set", "j", "--json", "--mem", value,
                                         "--host-pinned", value])
    assert r.exit_code == 0, r.output
    assert _sent(fake, "set") == {"mem_quota": quota, "host_pinned_max": quota or 0}


def test_mem_total_0_is_off_and_takes_no_word(fake: FakeClient) -> None:
    r = CliRunner().invoke(ctl_mod.cli, ["set", "j", "--json", "--mem-total", "0"])
    assert r.exit_code == 0, r.output
    assert _sent(fake, "set") == {"mem_total": 0}
    r = CliRunner().invoke(ctl_mod.cli, ["set", "j", "--mem-total", "unlimited"])
    assert r.exit_code == 2 and "not a size" in r.output


def test_standalone_mem_0_sets_no_static_limit() -> None:
    assert "TGS_MEM_LIMIT" not in run_mod.standalone_env({}, None)
    assert run_mod.standalone_env({}, 3 * GIB // 2)["TGS_MEM_LIMIT"] == str(3 * GIB // 2)


SPLIT = [
    ("run", ["--mem", "4", "GiB", "--", "true"]),
    ("run", ["--mem", "4", "GiB", "true"]),
    ("run", ["--mem=1.5", "g", "--", "true"]),
    ("run", ["--priority", "production", "--mem-total", "2", "TB", "--", "true"]),
    ("run", ["--host-pinned", "4", "KiB", "--", "true"]),
    ("ctl", ["add", "j", "--mem", "4", "GiB"]),
    ("ctl", ["set", "j", "--mem", "4", "GiB"]),
    ("inject", ["run", "--mem", "4", "GiB", "--", "podman", "run", "img"]),
]
CLIS = {"run": (run_mod.cli, "tgs-run", 125), "ctl": (ctl_mod.cli, "tgsctl", 2),
        "inject": (inject_mod.cli, "tgs-inject", 2)}


@pytest.mark.parametrize("mod,argv", SPLIT, ids=[" ".join(a) for _, a in SPLIT])
def test_a_size_split_over_two_words_is_refused(fake: FakeClient, mod: str,
                                                argv: list[str]) -> None:
    """`--mem 4 GiB` would be a 4-byte quota (and tgs-run would run `GiB`): one line, the
    tool's usage status (tgs-run's own failures are 125), nothing sent."""
    cli, prog, status = CLIS[mod]
    r = CliRunner().invoke(cli, ["--controller", NOWHERE, *argv], prog_name=prog)
    assert r.exit_code == status, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), lines
    assert "as one word" in lines[0], lines
    assert fake.calls == []


@pytest.mark.parametrize("argv", [
    ["--mem", "4GiB", "--", "G", "x"],          # after `--` it is the command
    ["--mem", "4GiB", "K"],                     # the value has its unit: K is the command
    ["--name", "m", "--", "--mem", "4", "GiB"],
])
def test_unit_words_elsewhere_are_arguments(fake: FakeClient, argv: list[str]) -> None:
    r = CliRunner().invoke(run_mod.cli, argv, prog_name="tgs-run")
    assert "as one word" not in r.output
    assert [c for c, _ in fake.calls] == ["register"]
