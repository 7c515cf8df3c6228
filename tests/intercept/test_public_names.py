"""No package reaches into another's private names: what is shared is exported."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"intercept", "client", "controller", "tools", "bench", "testbed", "k8s"}


def _sources() -> list[tuple[str, Path]]:
    return [(pkg, p) for pkg in sorted(PACKAGES) for p in sorted((ROOT / pkg).rglob("*.py"))]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _cross_package_private_uses(pkg: str, path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    bad: list[str] = []
    foreign: set[str] = set()          # local names bound to another package's modules
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
            continue
        parts = node.module.split(".")
        if parts[0] != "tgs" or len(parts) < 2 or parts[1] == pkg:
            continue
        if any(_private(p) for p in parts):
            bad.append(f"from {node.module} import ...")
        for alias in node.names:
            if _private(alias.name):
                bad.append(f"from {node.module} import {alias.name}")
            foreign.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in foreign):
            bad.append(f"{node.value.id}.{node.attr}")
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return [f"{where}: {b}" for b in bad]


def test_no_cross_package_private_names() -> None:
    bad = [b for pkg, p in _sources() for b in _cross_package_private_uses(pkg, p)]
    assert bad == []


def test_the_checker_sees_a_private_import(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("from tgs.intercept.locate import _prepend_preload\n"
                 "from tgs.intercept.header import ffi\n"
                 "from tgs.intercept import ofd\nofd._flock(1, 2)\n"
                 "from tgs.tools.run import _own\n")
    got = _cross_package_private_uses("tools", f)
    assert [g.split(": ", 1)[1] for g in got] == [
        "from tgs.intercept.locate import _prepend_preload", "ofd._flock"]


def test_tgs_run_uses_the_exported_injection_env() -> None:
    text = (ROOT / "tools" / "run.py").read_text()
    assert "injection_env" in text
    assert "LD_PRELOAD\"] =" not in text and "prepend_preload" not in text


def test_controller_and_intercept_do_not_import_the_benchmarks() -> None:
    """The benchmarks use the controller, never the other way round."""
    for pkg in ("client", "controller", "intercept", "testbed", "tools"):
        for p in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(p.read_text(), str(p))
            mods = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
            mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            assert not [m for m in mods if m.startswith("tgs.bench")], p


def test_one_module_spells_the_simulators_state_path() -> None:
    owner = ROOT / "intercept" / "simstate.py"
    for pkg in sorted(PACKAGES):
        for p in (ROOT / pkg).rglob("*.py"):
            if p != owner:
                assert "/dev/shm/tgs-sim" not in p.read_text(), p
