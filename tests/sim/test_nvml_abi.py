"""The simulated NVML's own ABI declarations (contracts/include/tgs/nvml_abi.h) against
NVIDIA's nvml.h.

nvml.h comes from the CUDA toolkit or the `nvidia-nvml-dev` wheel (in the test extra);
without one these tests skip.  Checked: struct sizes and field offsets, enum and macro
values (error codes, versioned-struct version words), every served prototype (redeclared
after nvml.h: a mismatch does not compile), and a C program written against nvml.h that
links with -lnvidia-ml against build/sim and runs.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ROOT / "contracts" / "include" / "tgs" / "nvml_abi.h"
CONTRACTS = ROOT / "contracts" / "include"
SIM_DIR = ROOT / "build" / "sim"

pytestmark = pytest.mark.timeout(120)


def _find_nvml_h() -> Path | None:
    pats = [os.path.join(p, "nvidia", "*", "include", "nvml.h") for p in sys.path if p]
    pats += ["/usr/local/cuda*/include/nvml.h", "/usr/local/cuda*/targets/*/include/nvml.h",
             "/usr/include/nvml.h"]
    for pat in pats:
        hits = sorted(glob.glob(pat))
        if hits:
            return Path(hits[-1])
    return None


NVML_H = _find_nvml_h()
needs_header = pytest.mark.skipif(NVML_H is None,
                                  reason="no nvml.h (CUDA toolkit or nvidia-nvml-dev)")

SIZES = ["nvmlPciInfo_t", "nvmlPciInfoExt_v1_t", "nvmlUtilization_t", "nvmlMemory_t",
         "nvmlMemory_v2_t", "nvmlProcessInfo_v1_t", "nvmlProcessInfo_v2_t", "nvmlProcessInfo_t",
         "nvmlTemperature_v1_t", "nvmlProcessUtilizationSample_t", "nvmlDevice_t",
         "nvmlReturn_t", "nvmlClockType_t"]
OFFSETS = {
    "nvmlPciInfo_t": ["busIdLegacy", "domain", "bus", "device", "pciDeviceId",
                      "pciSubSystemId", "busId"],
    "nvmlPciInfoExt_v1_t": ["version", "domain", "bus", "device", "pciDeviceId",
                            "pciSubSystemId", "baseClass", "subClass", "busId"],
    "nvmlMemory_t": ["total", "free", "used"],
    "nvmlMemory_v2_t": ["version", "total", "reserved", "free", "used"],
    "nvmlProcessInfo_v1_t": ["pid", "usedGpuMemory"],
    "nvmlProcessInfo_v2_t": ["pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId"],
    "nvmlTemperature_v1_t": ["version", "sensorType", "temperature"],
    "nvmlUtilization_t": ["gpu", "memory"],
    "nvmlProcessUtilizationSample_t": ["pid", "timeStamp", "smUtil", "memUtil", "encUtil",
                                       "decUtil"],
}
VALUES = [
    "NVML_SUCCESS", "NVML_ERROR_UNINITIALIZED", "NVML_ERROR_INVALID_ARGUMENT",
    "NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_NO_PERMISSION", "NVML_ERROR_ALREADY_INITIALIZED",
    "NVML_ERROR_NOT_FOUND", "NVML_ERROR_INSUFFICIENT_SIZE", "NVML_ERROR_INSUFFICIENT_POWER",
    "NVML_ERROR_DRIVER_NOT_LOADED", "NVML_ERROR_TIMEOUT", "NVML_ERROR_IRQ_ISSUE",
    "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_CORRUPTED_INFOROM", "NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_RESET_REQUIRED",
    "NVML_ERROR_OPERATING_SYSTEM", "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "NVML_ERROR_IN_USE",
    "NVML_ERROR_MEMORY", "NVML_ERROR_NO_DATA", "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
    "NVML_ERROR_INSUFFICIENT_RESOURCES", "NVML_ERROR_FREQ_NOT_SUPPORTED",
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "NVML_ERROR_DEPRECATED", "NVML_ERROR_NOT_READY",
    "NVML_ERROR_GPU_NOT_FOUND", "NVML_ERROR_INVALID_STATE", "NVML_ERROR_UNKNOWN",
    "NVML_FEATURE_DISABLED", "NVML_FEATURE_ENABLED", "NVML_COMPUTEMODE_DEFAULT",
    "NVML_COMPUTEMODE_EXCLUSIVE_THREAD", "NVML_COMPUTEMODE_PROHIBITED",
    "NVML_COMPUTEMODE_EXCLUSIVE_PROCESS", "NVML_TEMPERATURE_GPU", "NVML_CLOCK_GRAPHICS",
    "NVML_CLOCK_SM", "NVML_CLOCK_MEM", "NVML_CLOCK_VIDEO", "NVML_CLOCK_ID_CURRENT",
    "NVML_CLOCK_ID_APP_CLOCK_TARGET", "NVML_CLOCK_ID_APP_CLOCK_DEFAULT",
    "NVML_CLOCK_ID_CUSTOMER_BOOST_MAX", "NVML_BRAND_UNKNOWN", "NVML_BRAND_TESLA",
    "NVML_BRAND_NVIDIA", "NVML_PSTATE_0", "NVML_PSTATE_8", "NVML_PSTATE_UNKNOWN",
    "NVML_DEVICE_ARCH_HOPPER", "NVML_DEVICE_MIG_DISABLE", "NVML_INIT_FLAG_NO_GPUS",
    "NVML_INIT_FLAG_NO_ATTACH", "NVML_INIT_FLAG_FORCE_INIT",
    "NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE", "NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE",
    "NVML_DEVICE_UUID_BUFFER_SIZE", "NVML_DEVICE_UUID_V2_BUFFER_SIZE",
    "NVML_DEVICE_NAME_BUFFER_SIZE", "NVML_DEVICE_NAME_V2_BUFFER_SIZE",
    "NVML_DEVICE_SERIAL_BUFFER_SIZE", "NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE",
    "NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE", "nvmlMemory_v2", "nvmlPciInfoExt_v1",
    "nvmlTemperature_v1",
]


def _layout_source() -> str:
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#ifdef REAL", "#include <nvml.h>",
             "#else", '#include "tgs/nvml_abi.h"', "#endif", "int main(void) {"]
    for t in SIZES:
        lines.append(f'printf("sizeof {t} %zu\\n", sizeof({t}));')
    for t, fields in OFFSETS.items():
        for f in fields:
            lines.append(f'printf("offsetof {t}.{f} %zu\\n", offsetof({t}, {f}));')
    for v in VALUES:
        lines.append(f'printf("value {v} %lld\\n", (long long)({v}));')
    lines += ["return 0;", "}"]
    return "\n".join(lines) + "\n"


def _compile_run(tmp: Path, name: str, src: str, flags: list[str],
                 env: dict[str, str] | None = None) -> str:
    c = tmp / f"{name}.c"
    c.write_text(src)
    exe = tmp / name
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-o", str(exe), str(c), *flags],
                   check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True, env=env,
                          timeout=60).stdout


@needs_header
def test_struct_layouts_and_values_match_nvml_h(tmp_path: Path) -> None:
    assert NVML_H is not None
    src = _layout_source()
    real = _compile_run(tmp_path, "real", src, ["-DREAL", "-I", str(NVML_H.parent)])
    ours = _compile_run(tmp_path, "ours", src, ["-I", str(CONTRACTS)])
    real_map = dict(ln.rsplit(" ", 1) for ln in real.splitlines())
    ours_map = dict(ln.rsplit(" ", 1) for ln in ours.splitlines())
    assert len(ours_map) == len(SIZES) + sum(map(len, OFFSETS.values())) + len(VALUES)
    diff = {k: (ours_map[k], real_map.get(k)) for k in ours_map if ours_map[k] != real_map.get(k)}
    assert not diff, f"differs from {NVML_H}: {diff}"


@needs_header
def test_served_prototypes_match_nvml_h(tmp_path: Path) -> None:
    """Our prototypes redeclared after nvml.h: C rejects a redeclaration with another type."""
    assert NVML_H is not None
    text = OURS.read_text()
    start = text.index("/* Served entry points")
    end = text.index("#ifdef __cplusplus", start)
    protos = text[start:end]
    assert protos.count("nvmlReturn_t nvml") >= 50
    src = tmp_path / "protos.c"
    src.write_text("#define NVML_NO_UNVERSIONED_FUNC_DEFS\n#include <nvml.h>\n" + protos)
    res = subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-Wno-deprecated-declarations",
                          "-fsyntax-only", "-I", str(NVML_H.parent), str(src)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


C_CLIENT = r"""
#include <stdio.h>
#include <string.h>
#include <nvml.h>
int main(void)
{
    unsigned int n = 0, count = 0;
    nvmlDevice_t h;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    nvmlMemory_v2_t mem;
    nvmlPciInfo_t pci;
    memset(&mem, 0, sizeof mem);
    mem.version = nvmlMemory_v2;
    if (nvmlInit() || nvmlDeviceGetCount(&n) || nvmlDeviceGetHandleByIndex(0, &h) ||
        nvmlDeviceGetName(h, name, sizeof name) || nvmlDeviceGetMemoryInfo_v2(h, &mem) ||
        nvmlDeviceGetPciInfo(h, &pci))
        return 1;
    nvmlReturn_t r = nvmlDeviceGetComputeRunningProcesses(h, &count, NULL);
    printf("%u|%s|%llu|%s|%d|%s\n", n, name, mem.total, pci.busId, (int)r,
           nvmlErrorString(NVML_ERROR_NOT_FOUND));
    return nvmlShutdown() == NVML_SUCCESS ? 0 : 1;
}
"""


@needs_header
def test_a_c_program_built_against_nvml_h_links_and_runs(tmp_path: Path,
                                                         sim_env: dict[str, str]) -> None:
    assert NVML_H is not None
    if not (SIM_DIR / "libnvidia-ml.so").exists():
        pytest.fail("build/sim/libnvidia-ml.so is missing: run `make` first")
    env = {**sim_env, "TGS_SIM_MEM": "1GiB"}
    out = _compile_run(tmp_path, "client", C_CLIENT,
                       ["-I", str(NVML_H.parent), "-L", str(SIM_DIR), "-lnvidia-ml"], env=env)
    assert out.strip() == f"1|TGS Simulated GPU|{1 << 30}|00000000:01:00.0|0|Not Found"
