"""CUDA_VISIBLE_DEVICES in the simulated driver (sim/visible.c): read at cuInit as the real
driver reads it (ordinals or UUIDs, unique UUID prefixes, the list stops at the first invalid
entry, none valid = no devices), the state file still indexed by physical device; the
simulated NVML ignores it, as NVML does."""

from __future__ import annotations

import pytest
from nvml_helpers import run_py
from tgs.intercept import simstate

pytestmark = pytest.mark.timeout(120)

# A child's view: the visible devices' UUIDs, and (with `alloc`) 1 MiB allocated on each
# visible ordinal's primary context, then cuCtxGetDevice / the pointer's device ordinal.
VIEW = """
import ctypes
lib = ctypes.CDLL("libcuda.so.1")
out = {"init": lib.cuInit(0)}
n = ctypes.c_int(-1)
out["count_rc"] = lib.cuDeviceGetCount(ctypes.byref(n))
out["count"] = n.value
uuids = []
for k in range(n.value):
    u = (ctypes.c_ubyte * 16)()
    assert lib.cuDeviceGetUuid_v2(u, k) == 0
    h = bytes(u).hex()
    uuids.append(f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}")
out["uuids"] = uuids
d = ctypes.c_int()
out["get_past_end"] = lib.cuDeviceGet(ctypes.byref(d), n.value)
if ALLOC:
    ords = []
    for k in range(n.value):
        ctx = ctypes.c_void_p()
        assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), k) == 0
        assert lib.cuCtxSetCurrent(ctx) == 0
        p = ctypes.c_uint64()
        assert lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
        cur = ctypes.c_int(-1)
        assert lib.cuCtxGetDevice(ctypes.byref(cur)) == 0
        ptr_ord = ctypes.c_int(-1)
        assert lib.cuPointerGetAttribute(ctypes.byref(ptr_ord), 9, p) == 0  # DEVICE_ORDINAL
        ords.append([cur.value, ptr_ord.value])
    out["ords"] = ords
    import tgs.intercept.simstate as ss
    out["mem_used"] = [dv.mem_used for dv in ss.read_state().devices]
"""


def view(env: dict[str, str], visible: str | None, alloc: bool = False) -> dict:
    env = {k: v for k, v in env.items() if k != "CUDA_VISIBLE_DEVICES"}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return run_py(env, f"ALLOC = {alloc}\n" + VIEW)


@pytest.fixture
def env3(sim_env: dict[str, str]) -> dict[str, str]:
    return dict(sim_env, TGS_SIM_DEVICES="3")


def test_unset_shows_every_device_in_order(env3: dict[str, str]) -> None:
    out = view(env3, None, alloc=True)
    assert (out["init"], out["count_rc"], out["count"]) == (0, 0, 3)
    assert len(set(out["uuids"])) == 3 and out["get_past_end"] == 101   # INVALID_DEVICE
    assert out["ords"] == [[0, 0], [1, 1], [2, 2]]
    assert out["mem_used"] == [1 << 20] * 3


def test_ordinals_and_uuids_select_and_reorder(env3: dict[str, str]) -> None:
    phys = view(env3, None)["uuids"]
    out = view(env3, "2,0", alloc=True)
    assert out["count"] == 2 and out["uuids"] == [phys[2], phys[0]]
    # the API sees ordinals 0 and 1; the state file is charged on physical 2 and 0
    assert out["ords"] == [[0, 0], [1, 1]]
    assert out["mem_used"] == [1 << 20, 0, 1 << 20]
    out = view(env3, f"{phys[1]},{phys[2].upper()}")
    assert out["uuids"] == [phys[1], phys[2]]


def test_unique_uuid_prefixes(env3: dict[str, str]) -> None:
    phys = view(env3, None)["uuids"]
    # the shortest prefix of device 2's UUID that no other UUID shares
    n = next(n for n in range(5, 40) if sum(u.startswith(phys[2][:n]) for u in phys) == 1)
    assert view(env3, phys[2][:n])["uuids"] == [phys[2]]
    # "GPU-" alone matches all three: ambiguous, so invalid, so no device
    assert view(env3, "GPU-")["count"] == 0


@pytest.mark.parametrize("visible, want", [
    ("1,7,0", [1]),            # unknown ordinal: the list stops there
    ("0,0,1", [0]),            # a device listed twice stops the list
    ("1,,2", [1]),             # an empty entry stops it
    ("1,x", [1]),
    ("", []),                  # empty: no devices, cuInit still succeeds
    ("-1", []),
    ("GPU-00000000-nope", []),
    ("5", []),
])
def test_the_list_stops_at_the_first_invalid_entry(env3: dict[str, str], visible: str,
                                                   want: list[int]) -> None:
    phys = view(env3, None)["uuids"]
    out = view(env3, visible)
    assert (out["init"], out["count_rc"]) == (0, 0)
    assert out["uuids"] == [phys[i] for i in want]


def test_nvml_ignores_cuda_visible_devices(env3: dict[str, str]) -> None:
    pytest.importorskip("pynvml")
    phys = view(env3, None)["uuids"]
    env = dict(env3, CUDA_VISIBLE_DEVICES="2")
    out = run_py(env, """
nv.nvmlInit()
out = [nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(i)) for i in
       range(nv.nvmlDeviceGetCount())]
out = [u.decode() if isinstance(u, bytes) else u for u in out]
""")
    assert out == phys
    assert simstate.SIM_MAX_DEVICES >= 3
