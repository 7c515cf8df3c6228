"""The resolution matrix: every hooked entry point, reached by every lookup path, lands on the
shim's hook of EXACTLY the variant the real driver chose; everything else passes untouched."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from shim_helpers import run_probe

pytestmark = pytest.mark.timeout(60)


def _rows(lines: list[str]) -> list[list[str]]:
    return [ln.split("|") for ln in lines]


def test_matrix(resolve_bin: Path, sim_env: dict[str, str], shim_env: dict[str, str]) -> None:
    base = _rows(run_probe(resolve_bin, sim_env))
    shim = _rows(run_probe(resolve_bin, shim_env))
    assert len(base) == len(shim) > 500
    methods: set[str] = set()
    hooked_seen = 0
    for b, s in zip(base, shim):
        method, name, ver, flags, rc, status, lib, sym = s
        assert b[:4] == s[:4]
        assert (rc, status) == (b[4], b[5]), f"status changed: {b} -> {s}"
        methods.add(method)
        if method == "link":
            # a direct reference binds to the hook, whatever the driver exports
            assert (lib, sym) == ("libtgs.so", name), s
            hooked_seen += 1
        elif b[6] == "libcuda.so.1" and _is_hooked(b[7], shim):
            # the real driver's variant X became the hook of X: never another ABI
            assert (lib, sym) == ("libtgs.so", b[7]), f"{b} -> {s}"
            hooked_seen += 1
        else:
            assert (lib, sym) == (b[6], b[7]), f"unhooked lookup changed: {b} -> {s}"
    assert methods == {"link", "dlsym", "default", "proc", "proc2"}
    assert hooked_seen > 400


def _is_hooked(symbol: str, shim_rows: list[list[str]]) -> bool:
    return any(r[0] == "link" and r[1] == symbol for r in shim_rows)


def test_variants_per_version_and_flags(resolve_bin: Path, shim_env: dict[str, str]) -> None:
    rows = {(r[0], r[1], r[2], r[3]): r for r in _rows(run_probe(resolve_bin, shim_env))}
    # per-thread flag picks the _ptsz hook; default flag the legacy one
    assert rows[("proc2", "cuLaunchKernel", "12080", "2")][7] == "cuLaunchKernel_ptsz"
    assert rows[("proc2", "cuLaunchKernel", "12080", "0")][7] == "cuLaunchKernel"
    assert rows[("proc", "cuMemAlloc", "11030", "0")][7] == "cuMemAlloc_v2"
    # cuGetProcAddress obtained through itself is the hook too
    assert rows[("proc2", "cuGetProcAddress", "12000", "0")][6:] == ["libtgs.so",
                                                                   "cuGetProcAddress_v2"]
    assert rows[("proc2", "cuGetProcAddress", "11030", "0")][6:] == ["libtgs.so",
                                                                   "cuGetProcAddress"]


def test_calls_reach_the_right_hook(probe_bin: Path, shim_env: dict[str, str]) -> None:
    env = dict(shim_env, TGS_DEBUG_HITS="1")
    out = run_probe(probe_bin, env, "init", "launch:3:1:32", "proc:cuLaunchKernel:12080:2",
                    "proc:cuMemAlloc:11030:0", "ex:1:1:32", "coop:1:1:32", "graph:2:1:1:32",
                    "hits:cuLaunchKernel", "hits:cuLaunchKernel_ptsz", "hits:cuMemAlloc_v2",
                    "hits:cuLaunchKernelEx", "hits:cuLaunchCooperativeKernel",
                    "hits:cuGraphInstantiateWithFlags", "hits:cuGraphLaunch",
                    "hits:cuGetProcAddress_v2", "hits:cuCtxSynchronize", "free_all")
    hits = {ln.split()[1]: int(ln.split()[2]) for ln in out if ln.startswith("hits ")}
    assert hits == {
        "cuLaunchKernel": 3, "cuLaunchKernel_ptsz": 1, "cuMemAlloc_v2": 1,
        "cuLaunchKernelEx": 1, "cuLaunchCooperativeKernel": 1,
        "cuGraphInstantiateWithFlags": 1, "cuGraphLaunch": 1, "cuGetProcAddress_v2": 2,
        "cuCtxSynchronize": 4,
    }


def test_without_shim_no_debug_symbol(probe_bin: Path, sim_env: dict[str, str]) -> None:
    p = subprocess.run([str(probe_bin), "hits:cuLaunchKernel"], env=sim_env, capture_output=True,
                       text=True, timeout=30)
    assert p.stdout.strip() == "hits cuLaunchKernel -2"
