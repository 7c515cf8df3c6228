"""The CUDA runtime's private tables (cuGetExportTable), as the real driver serves them.

What is checked is what cudart, cuBLAS(Lt) and cuDNN were seen to rely on
(docs/simulator.md, "The CUDA runtime"): an unknown table is INVALID_VALUE with a NULL
table; CUDART_INTERFACE loads modules from nvcc's fatbin wrapper and from a fatbin, and
hands out the primary context; context-local storage answers INVALID_HANDLE for a key
never put and runs destructors when the context goes; TOOLS_TLS gives the current context;
the context-id table agrees with cuCtxGetId; the integrity digest is HMAC-MD2 of the
process and device facts, recomputed here by an MD2 written from RFC 1319 alone.
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

# RFC 1319's substitution table: a permutation of 0..255 built from the digits of pi.
_S = bytes.fromhex(
    "292e43c9a2d87c013d3654a1ecf0061362a705f3c0c7738c98932bd9bc4c82ca"
    "1e9b573cfdd4e01667426f188a17e512be4ec4d6da9ede49a0fbf58ebb2fee7a"
    "a968799115b2073f94c210890b225f21807f5d9a5a903227353ecce7bff79703"
    "ff1930b348a5b5d1d75e922aac56aac64fb838d296a47db676fc6be29c7404f1"
    "459d705964718720865bcf65e62da8021b6025adaeb0b9f61c46616934407e0f"
    "5547a323dd51af3ac35cf9cebac5ea262c530d6e85288409d3dfcdf441814d52"
    "6adc37c86cc1abfa24e17b080cbdb14a7888958be363e86de9cbd5fe3b001d39"
    "f2efb70e6658d0e4a67772f8eb754b0a314450b48fed1f1adb998d339f118314"
)


def md2(msg: bytes) -> bytes:
    pad = 16 - len(msg) % 16
    msg += bytes([pad]) * pad
    c, last = bytearray(16), 0
    for i in range(0, len(msg), 16):
        for j in range(16):
            c[j] ^= _S[msg[i + j] ^ last]
            last = c[j]
    msg += bytes(c)
    x = bytearray(48)
    for i in range(0, len(msg), 16):
        for j in range(16):
            x[16 + j] = msg[i + j]
            x[32 + j] = x[16 + j] ^ x[j]
        t = 0
        for r in range(18):
            for k in range(48):
                x[k] ^= _S[t]
                t = x[k]
            t = (t + r) & 0xFF
    return bytes(x[:16])


def hmac_md2(key: bytes, msg: bytes) -> bytes:
    inner = md2(bytes(b ^ 0x36 for b in key) + msg)
    return md2(bytes(b ^ 0x5C for b in key) + inner)


KEY = bytes.fromhex("146addae53a9a752aa0841360bf55a9f")


def test_md2_matches_rfc1319() -> None:
    assert sorted(_S) == list(range(256))
    assert md2(b"").hex() == "8350e5a3e24c153df2275c9f80692773"
    assert md2(b"abc").hex() == "da853b0d3f88d99b30283a69e6ded6bb"
    assert md2(b"message digest").hex() == "ab4f496bfb2a530b219ff33031fe06b0"


def _facts(out: str) -> dict[str, list[str]]:
    """key -> values; the repeated keys (table, device) collect all their lines' values."""
    facts: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, *vals = line.split()
        if key in ("table", "device"):
            facts.setdefault(key, []).extend(vals)
        else:
            facts[key] = vals
    return facts


@pytest.fixture
def export_run(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> str:
    env = dict(sim_env, TGS_SIM_DEVICES="2")
    p = subprocess.run([str(sim_progs["export"])], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_tables_and_their_slots(export_run: str) -> None:
    lines = export_run.splitlines()
    tables = [ln.split()[1:] for ln in lines if ln.startswith("table ")]
    assert tables[0] == ["00000000", "1", "null"]  # unknown: INVALID_VALUE, NULL table
    assert all(t[1:] == ["0", "set"] for t in tables[1:])
    f = _facts(export_run)
    assert f["cudart_size"] == [str(13 * 8)]          # slot 0: the table's size in bytes
    assert f["primary"] == ["0", "0"] and f["primary_same"] == ["1", "1"]
    assert f["primary_kept"] == ["1"]                 # the runtime's reference outlived ours
    assert f["module_wrapper"] == ["0", "0"]          # loaded, and its kernel is there
    assert f["module_fatbin"] == ["0", "0"]
    assert f["cls_missing"] == ["400"]                 # CUDA_ERROR_INVALID_HANDLE
    assert f["cls_put"] == ["0"] and f["cls_get"] == ["0", "1"]
    assert f["cls_del"] == ["0", "400"]
    assert f["tls_ctx"] == ["0", "1"] and f["ctx_id"] == ["0", "1"]
    assert f["dtor_calls"] == ["1"]                    # the reset ran the put's destructor


def test_integrity_digest_is_hmac_md2_of_the_facts(export_run: str) -> None:
    f = _facts(export_run)
    rc, digest = f["digest"]
    assert rc == "0"
    drv, pid, tid, rt, ic, fn = (int(v) for v in f["facts"])
    msg = struct.pack("<IIIIQQQQ", drv, 13002, pid, tid, rt, ic, fn, 1764547200)
    devs = f["device"]
    assert len(devs) == 2 * 4
    for i in range(0, len(devs), 4):
        msg += bytes.fromhex(devs[i]) + struct.pack("<iii", *map(int, devs[i + 1:i + 4]))
    lo, hi = struct.unpack("<QQ", hmac_md2(KEY, msg))
    assert digest == f"{lo:016x}{hi:016x}"
    # a version ending in 0 gets the fixed answer cudart expects
    assert f["digest_v0"] == ["3341181c03cb675c8ed383aa1f4cd1e8"]
