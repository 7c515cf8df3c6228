"""The public driver API beyond the basics: strict images, the JIT linker, libraries, host memory
and pointer attributes, copies and memsets, every graph node kind, occupancy.

Each scenario of scripts/api_probe.py runs in its own process on its own simulated GPU.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)
SCRIPT = Path(__file__).resolve().parent / "scripts" / "api_probe.py"

INVALID_VALUE, INVALID_CONTEXT, INVALID_IMAGE, INVALID_PTX = 1, 201, 200, 218
INVALID_HANDLE, NOT_FOUND, NOT_SUPPORTED = 400, 500, 801


def probe(env: dict[str, str], scenario: str, *args: str) -> dict:
    p = subprocess.run([sys.executable, str(SCRIPT), scenario, *args], env=env,
                       capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_images_are_strict(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "images")
    for case in ("junk", "empty_text", "binary_bytes", "bad_elf", "truncated_fatbin"):
        assert out[case] == INVALID_IMAGE, case
    assert out["ptx"] == 0
    # .entry kernels are found; a commented-out one and a device function are not
    assert out["kernels"] == [0, 0, NOT_FOUND, NOT_FOUND]
    assert out["globals"] == {"counter": 4, "table": 64, "quad": 16, "a": 8, "b": 24,
                              "init": 12, "elsewhere": f"error {NOT_FOUND}"}
    assert out["annotated"] == 0  # the project's annotation-only test images still load


def test_jit_linker_merges_inputs_into_a_cubin(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "link")
    assert out["add_junk"] == INVALID_PTX and out["add_object"] == NOT_SUPPORTED
    assert out["elf"] is True
    assert out["kernels"] == [0, 0, NOT_FOUND] and out["ga"] == 32


def test_library_api_without_a_context(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "library")
    assert out["missing_kernel"] == NOT_FOUND and out["count"] == 1
    assert out["function_without_context"] == INVALID_CONTEXT
    assert out["dyn_smem"] == 65536  # set on the kernel before any context existed
    assert out["global_size"] == 32
    assert out["launch_kernel_handle"] == 0
    assert out["after_unload"] == INVALID_HANDLE


def test_host_memory_copies_memsets_and_pointer_attributes(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "memory")
    assert out["d16"] == "efbeefbe"
    assert out["d2d8"] == [7, 7, 0xEF, 7, 0xEF]  # only 16 bytes of each pitched row
    assert out["attr_dev"] == [0, 2] and out["attr_host"] == [0, 1]  # DEVICE, HOST
    assert out["attr_plain"] == INVALID_VALUE
    assert out["range"] == [True, 65536]
    assert out["register_twice"] == 712 and out["unregister_twice"] == 713
    assert out["registered_devptr"] is True
    assert out["free_host_as_device"] == INVALID_VALUE


def test_graph_node_kinds_replay_and_updates(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "graph")
    assert out["child_type"] == 4 and out["nodes"] == 6 and out["edges"] == 5
    # kernel (1 ms) + child graph's kernel (1 ms): the replay takes their sum
    assert out["replay_ms"] >= 1.999
    assert out["host_calls"] == 1 and out["memset"] == [0x11] * 4
    assert out["replay_after_set_ms"] >= 2.999  # the first kernel now has 2000 blocks
    assert out["update_other_shape"] == 910 and out["update_result"] == 2  # TOPOLOGY_CHANGED
    assert out["update_clone"] == 0
    assert out["cycle"] == INVALID_VALUE


def test_occupancy_of_an_sm90_sm(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "occupancy")
    # 2048 threads, 32 blocks, 228 KiB of shared memory per SM (1 KiB reserved per block)
    assert out["blocks"] == {"256/0": 8, "1024/0": 2, "128/49152": 4, "64/0": 32}
    assert out["potential"] == [2 * 108, 1024]
    assert out["set_readonly"] == INVALID_VALUE
    assert out["stack"] == 1024


def test_memory_pools_count_what_they_hand_out(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "pools")
    assert out["current_is_default"] is True
    assert out["used_after_alloc"] == 1 << 20 and out["used_after_free"] == 0
    assert out["used_high"] == 1 << 20 and out["threshold"] == 1 << 30
    assert out["destroy_default"] == INVALID_VALUE
    assert out["current_after_destroy_is_default"] is True


def test_device_stream_and_graph_edits(sim_env: dict[str, str], tmp_path: Path) -> None:
    out = probe(sim_env, "misc", str(tmp_path / "g.dot"))
    assert out["cc"] == [9, 0] and out["pci_dev"] == 0 and out["pci_bad"] == 101
    assert out["peer_self"] == 0
    assert out["stream_priority"] == -2 and out["priority_after_set"] == -4
    assert out["write_value"] == 0xCAFE
    assert out["bank_default"] == 1 and out["bank_set"] == 2  # 4-byte banks, then 8
    assert out["dependents"] == 2 and out["deps_after_remove"] == 0
    assert out["remove_missing_edge"] == INVALID_VALUE
    assert out["dot"] == 1  # one edge left


def test_sm_count_option(sim_env: dict[str, str]) -> None:
    out = probe(dict(sim_env, TGS_SIM_SMS="132"), "occupancy")  # an H100 SXM
    assert out["potential"] == [2 * 132, 1024]


def test_managed_memory_advice_reads_back(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "managed")
    assert out["preferred_before"] == -2  # CU_DEVICE_INVALID: no advice yet
    assert out["attrs"] == {"read_mostly": 1, "preferred": 0, "last_prefetch": -1,
                            "preferred_type": 1, "accessed_by": [-1, -2, -2]}
    assert out["not_managed"] == INVALID_VALUE


def test_tensor_maps_and_cluster_occupancy(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "tensormap")
    assert out["tiled"] == 0 and out["address_kept"] is True
    assert out["bad_stride"] == INVALID_VALUE and out["misaligned"] == INVALID_VALUE
    # 8 blocks of 256 threads per SM, 18 SMs per GPC, 6 GPCs for 108 SMs: 72 pairs each
    assert out["clusters"] == 72 * 6 and out["cluster_size"] == 8


def test_generic_node_api(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "generic")
    assert out["sizeof"] == 256 and out["set_child"] == 0
    assert out["replay_ms"] >= 3.999  # the updated kernel (1 ms) and child (3 ms)
    assert out["memset"] == [0x22, 0x22]
    assert out["unsupported_kind"] == NOT_SUPPORTED


def test_vmm_handles_share_through_a_file_descriptor(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "vmm_share")
    assert out["shared_bytes"] == [0x5A, 0x5A]  # the import maps the same bytes
    assert out["retained_same"] is True
    assert out["props"] == [1, 1, 1, 0]  # PINNED, POSIX fd, DEVICE 0
    assert out["export_unrequested"] == INVALID_VALUE
    assert out["release_again"] == INVALID_VALUE


def test_kernel_parameter_layout_from_ptx(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "params")
    # .u32 a; .u64 b (8-aligned); .align 16 .b8 c[24]; .f32 d
    assert out["ptx"] == [[0, 4], [8, 8], [16, 24], [40, 4]]
    assert out["ptx_none"] == []
    assert out["annotated"] == NOT_SUPPORTED  # an annotation-only image does not say


def test_kernel_parameter_layout_from_an_nvcc_cubin(sim_env: dict[str, str],
                                                     tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc") or "/usr/local/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc is not installed")
    src = Path(__file__).resolve().parents[1] / "clients" / "progs" / "kernels.cu"
    cubin = tmp_path / "k.cubin"
    subprocess.run([nvcc, "-arch=sm_90", "-cubin", "-o", str(cubin), str(src)], check=True,
                   capture_output=True, timeout=120)
    out = probe(sim_env, "params", str(cubin))
    assert out["cubin"] == [[0, 8], [8, 4]]  # scale(float *p, int n): EIATTR_KPARAM_INFO
    assert out["cubin_kernel"] == [[0, 8], [8, 4]]


def test_kernel_node_attributes_clones_and_graph_memory(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "graph_more")
    assert out["clone_priority"] == -3 and out["found_differs"] is True
    assert out["graph_mem"] == 2 << 20 and out["graph_mem_after"] == 0
    assert out["graph_mem_high"] == 2 << 20


def test_arrays_keep_their_bytes(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "arrays")
    assert out["desc"] == [16, 4, 0x20, 1]
    assert out["roundtrip"] is True and out["past_end"] == INVALID_VALUE
    assert out["rows"] == [[72, 73], [136, 137]]


def test_user_objects_and_peer_copies(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "user_objects")
    assert out["after_user_release"] == 0 and out["after_graph_destroy"] == 1
    assert out["over_release"] == INVALID_VALUE
    assert out["peer_size"] == 200 and out["peer_copy"] == [0x33, 0x33]


def test_batched_copies(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "batch")
    assert out["fail_idx_ok"] is True and out["second"] == [32, 33]
    assert out["overflow"] == INVALID_VALUE and out["fail_idx"] == 1


def test_mutated_images_give_error_codes_not_crashes(sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "fuzz", "7")
    # success, INVALID_IMAGE, NO_BINARY_FOR_GPU, INVALID_PTX: nothing else, no crash
    assert set(out["codes"]) <= {0, INVALID_IMAGE, 209, INVALID_PTX}
    assert INVALID_IMAGE in out["codes"] and 0 in out["codes"]


def test_capture_of_copies_memsets_host_functions_and_graph_launches(
        sim_env: dict[str, str]) -> None:
    out = probe(sim_env, "capture_work")
    for k in ("begin", "memset", "memcpy", "htod", "hostfn", "graph_launch", "record",
              "wait_ptsz", "memset_s2", "join_back", "end"):
        assert out[k] == 0, (k, out)
    assert out["joined"] == 1  # CU_STREAM_CAPTURE_STATUS_ACTIVE: the waiting stream joined
    assert out["untouched"] is True  # nothing ran while captured
    # memset, memcpy, memcpy (HtoD), host, the launched graph's memset step, s2's memset
    assert out["types"] == [2, 1, 1, 3, 2, 2]
    assert out["replayed"] == {"memset": True, "memcpy": True, "htod": True, "graph": True,
                               "s2": True, "hostfn": 1}
    # cuStreamAddCallback in a capture: STREAM_CAPTURE_UNSUPPORTED, then INVALIDATED at the end
    assert [out["begin2"], out["callback"], out["end2"]] == [0, 900, 901]
