"""Every public entry point: exported, resolvable, and either modelled or listed as a stub.

sim/entry_points.def is generated from the CUDA toolkit's cuda*Typedefs.h (sim/tools/
gen_entry_points.py); where the headers are installed, the committed list must match them.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEF = ROOT / "sim" / "entry_points.def"
LIB = ROOT / "build" / "sim" / "libcuda.so.1"
CUDA_INC = Path("/usr/local/cuda/include")
NOT_SUPPORTED = 801


def _tool(name: str):  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location(name, ROOT / "sim" / "tools" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows() -> list[tuple[str, str, int, int]]:
    return [(b, s, int(v), int(p)) for b, s, v, p in
            re.findall(r"^E\((\w+), (\w+), (\d+), ([01])\)$", DEF.read_text(), flags=re.M)]


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    if not LIB.exists():
        pytest.fail("build/sim/libcuda.so.1 is missing: run `make` first")
    return ctypes.CDLL(str(LIB), mode=ctypes.RTLD_LOCAL)


@pytest.mark.skipif(not (CUDA_INC / "cudaTypedefs.h").exists(), reason="no CUDA headers")
def test_committed_list_matches_the_cuda_headers() -> None:
    gen = _tool("gen_entry_points")
    want = gen.rows(gen.header_text(CUDA_INC))
    got = [(b, s, v, "_ptds" if s.endswith("_ptds") else "_ptsz" if p else "")
           for b, s, v, p in _rows()]
    assert got == want


def test_every_entry_point_is_a_dynamic_symbol(lib: ctypes.CDLL) -> None:
    missing = [s for _, s, _, _ in _rows() if not hasattr(lib, s)]
    assert missing == [] and len(_rows()) > 600


def test_every_entry_point_resolves_through_cugetprocaddress(lib: ctypes.CDLL) -> None:
    bad = []
    for base, sym, ver, pt in _rows():
        pfn, status = ctypes.c_void_p(), ctypes.c_int(-1)
        rc = lib.cuGetProcAddress_v2(base.encode(), ctypes.byref(pfn), ctypes.c_int(ver),
                                     ctypes.c_uint64(2 if pt else 1), ctypes.byref(status))
        want = ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value
        if rc != 0 or status.value != 0 or pfn.value != want:
            bad.append((base, ver, sym))
    assert bad == []


def test_stubs_answer_not_supported_and_docs_list_them(lib: ctypes.CDLL) -> None:
    cov = _tool("coverage")
    stubs = cov.stubs(LIB)
    assert "cuGraphicsGLRegisterBuffer" in stubs and "cuMemAlloc_v2" not in stubs
    # a stub reads no argument, so it can be called bare
    assert lib.cuGraphicsGLRegisterBuffer() == NOT_SUPPORTED
    assert lib.cuIpcOpenMemHandle_v2() == NOT_SUPPORTED
    # docs/simulator.md carries the generated list: refresh it with
    # `python3 sim/tools/coverage.py build/sim/libcuda.so.1 --write`
    doc = (ROOT / "docs" / "simulator.md").read_text()
    assert cov.render(LIB) in doc
