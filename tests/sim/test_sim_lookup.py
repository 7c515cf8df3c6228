"""cuGetProcAddress(_v2): version- and flag-dependent variants like the real driver."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ABI = ROOT / "contracts" / "include" / "tgs" / "cuda_abi.h"

SUCCESS, NOT_FOUND_STATUS, VERSION_NOT_SUFFICIENT = 0, 1, 2
CUDA_ERROR_NOT_FOUND = 500
DEFAULT, LEGACY, PTDS = 0, 1, 2


@pytest.fixture(scope="module")
def lib(sim_lib_path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(sim_lib_path), mode=ctypes.RTLD_LOCAL)


@pytest.fixture(scope="module")
def sim_lib_path() -> Path:
    p = ROOT / "build" / "sim" / "libcuda.so.1"
    if not p.exists():
        pytest.fail("build/sim/libcuda.so.1 is missing: run `make` first")
    return p


def lookup(lib: ctypes.CDLL, name: str, version: int, flags: int = 0) -> tuple[int, int, int]:
    pfn = ctypes.c_void_p()
    status = ctypes.c_int(-1)
    rc = lib.cuGetProcAddress_v2(name.encode(), ctypes.byref(pfn), ctypes.c_int(version),
                                 ctypes.c_uint64(flags), ctypes.byref(status))
    return rc, pfn.value or 0, status.value


def addr(lib: ctypes.CDLL, symbol: str) -> int:
    return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value or 0


CASES = [
    ("cuMemAlloc", 2000, 0, "cuMemAlloc"),
    ("cuMemAlloc", 3020, 0, "cuMemAlloc_v2"),
    ("cuMemAlloc", 13000, 0, "cuMemAlloc_v2"),
    ("cuCtxCreate", 2000, 0, "cuCtxCreate"),
    ("cuCtxCreate", 3020, 0, "cuCtxCreate_v2"),
    ("cuCtxCreate", 11030, 0, "cuCtxCreate_v2"),
    ("cuCtxCreate", 11040, 0, "cuCtxCreate_v3"),
    ("cuCtxCreate", 12000, 0, "cuCtxCreate_v3"),
    ("cuCtxCreate", 12050, 0, "cuCtxCreate_v4"),
    ("cuCtxSynchronize", 12080, 0, "cuCtxSynchronize"),
    ("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2"),
    ("cuEventElapsedTime", 12050, 0, "cuEventElapsedTime"),
    ("cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2"),
    ("cuMemAdvise", 12000, 0, "cuMemAdvise"),
    ("cuMemAdvise", 12020, 0, "cuMemAdvise_v2"),
    ("cuMemPrefetchAsync", 12020, 0, "cuMemPrefetchAsync_v2"),
    ("cuMemPrefetchAsync", 12020, PTDS, "cuMemPrefetchAsync_v2_ptsz"),
    ("cuMemPrefetchAsync", 11030, PTDS, "cuMemPrefetchAsync_ptsz"),
    ("cuGraphAddKernelNode", 11030, 0, "cuGraphAddKernelNode"),
    ("cuGraphAddKernelNode", 12000, 0, "cuGraphAddKernelNode_v2"),
    ("cuGraphKernelNodeGetParams", 12000, 0, "cuGraphKernelNodeGetParams_v2"),
    ("cuGraphInstantiate", 10000, 0, "cuGraphInstantiate"),
    ("cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2"),
    # cudaTypedefs.h has no newer PFN_cuGraphInstantiate: cuda.h's 12.0 macro
    # maps the *name* to cuGraphInstantiateWithFlags, the table does not.
    ("cuGraphInstantiate", 13000, 0, "cuGraphInstantiate_v2"),
    ("cuGetProcAddress", 11030, 0, "cuGetProcAddress"),
    ("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"),
    ("cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2"),
    ("cuLaunchKernel", 12000, PTDS, "cuLaunchKernel_ptsz"),
    ("cuLaunchKernel", 12000, LEGACY, "cuLaunchKernel"),
    ("cuLaunchKernel", 12000, DEFAULT, "cuLaunchKernel"),
    ("cuLaunchKernel", 6050, PTDS, "cuLaunchKernel"),  # _ptsz appeared in 7.0
    ("cuMemcpyHtoD", 12000, PTDS, "cuMemcpyHtoD_v2_ptds"),
    ("cuMemcpyHtoD", 12000, LEGACY, "cuMemcpyHtoD_v2"),
    ("cuStreamSynchronize", 13000, PTDS, "cuStreamSynchronize_ptsz"),
    ("cuGraphLaunch", 12000, PTDS, "cuGraphLaunch_ptsz"),
    ("cuInit", 13000, PTDS, "cuInit"),  # no per-thread twin: the legacy one
]


@pytest.mark.parametrize(("name", "version", "flags", "symbol"), CASES)
def test_variant(lib: ctypes.CDLL, name: str, version: int, flags: int, symbol: str) -> None:
    rc, pfn, status = lookup(lib, name, version, flags)
    assert (rc, status) == (0, SUCCESS)
    assert pfn == addr(lib, symbol), f"{name}@{version} flags {flags} is not {symbol}"


def test_unknown_name(lib: ctypes.CDLL) -> None:
    assert lookup(lib, "cuNoSuchThing", 13000) == (CUDA_ERROR_NOT_FOUND, 0, NOT_FOUND_STATUS)
    # versioned names are not base names: the real table does not know them either
    assert lookup(lib, "cuMemAlloc_v2", 13000)[2] == NOT_FOUND_STATUS


def test_version_not_sufficient(lib: ctypes.CDLL) -> None:
    assert lookup(lib, "cuLaunchKernelEx", 11050) == (
        CUDA_ERROR_NOT_FOUND, 0, VERSION_NOT_SUFFICIENT)
    assert lookup(lib, "cuMemAllocAsync", 11000)[2] == VERSION_NOT_SUFFICIENT
    assert lookup(lib, "cuLaunchKernelEx", 11060)[2] == SUCCESS


def test_bad_flags_and_args(lib: ctypes.CDLL) -> None:
    assert lookup(lib, "cuInit", 13000, 8)[0] == 1  # CUDA_ERROR_INVALID_VALUE
    pfn = ctypes.c_void_p()
    assert lib.cuGetProcAddress_v2(None, ctypes.byref(pfn), 13000, ctypes.c_uint64(0), None) == 1


def test_four_argument_form(lib: ctypes.CDLL) -> None:
    pfn = ctypes.c_void_p()
    assert lib.cuGetProcAddress(b"cuCtxCreate", ctypes.byref(pfn), 12050, ctypes.c_uint64(0)) == 0
    assert pfn.value == addr(lib, "cuCtxCreate_v4")
    assert lib.cuGetProcAddress(b"cuNope", ctypes.byref(pfn), 12050, ctypes.c_uint64(0)) == 500
    assert pfn.value is None


def test_export_table_resolves(lib: ctypes.CDLL) -> None:
    # cudart finds cuGetExportTable through cuGetProcAddress like any entry point
    pfn = ctypes.c_void_p()
    rc = lib.cuGetProcAddress_v2(b"cuGetExportTable", ctypes.byref(pfn), 13000,
                                 ctypes.c_uint64(0), None)
    assert rc == 0
    assert pfn.value == addr(lib, "cuGetExportTable")


def _entry_points() -> list[str]:
    return re.findall(r"^\s+X\((cu\w+),", ABI.read_text(), flags=re.M)


def test_every_entry_point_is_exported_and_reachable(lib: ctypes.CDLL) -> None:
    """Each entry point of cuda_abi.h is a dlsym-able symbol and some lookup returns it."""
    reachable: set[int] = set()
    bases = {re.sub(r"(_v\d+)?(_pt[sd]z?)?$", "", s) for s in _entry_points()}
    for base in bases:
        for version in (2000, 3020, 4000, 5050, 7000, 9020, 10000, 11000, 11040, 12000, 12020,
                        12050, 12080, 13000):
            for flags in (LEGACY, PTDS):
                rc, pfn, _ = lookup(lib, base, version, flags)
                if rc == 0:
                    reachable.add(pfn)
    missing = [s for s in _entry_points() if addr(lib, s) not in reachable]
    assert missing == [], missing
