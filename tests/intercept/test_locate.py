"""intercept.locate: finding the shim and building the injection environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from tgs.intercept import locate


def test_injection_env_prepends_without_duplicates(tmp_path: Path) -> None:
    lib = tmp_path / "libtgs.so"
    lib.write_bytes(b"")
    base = {"LD_PRELOAD": f"/x/liba.so {lib}:/y/libb.so", "PATH": "/bin", "TGS_SEGMENT": "old"}
    env = locate.injection_env(tmp_path / "j.seg", lib, base, mem_limit="1GiB", log_level="info")
    assert env["LD_PRELOAD"] == f"{lib}:/x/liba.so:/y/libb.so"
    assert env["TGS_SEGMENT"] == str(tmp_path / "j.seg")
    assert env["TGS_MEM_LIMIT"] == "1GiB" and env["TGS_LOG_LEVEL"] == "info"
    assert env["PATH"] == "/bin" and base["TGS_SEGMENT"] == "old"  # base untouched
    env2 = locate.injection_env(None, lib, base)
    assert "TGS_SEGMENT" not in env2 and env2["LD_PRELOAD"].count(str(lib)) == 1


def test_find_shim_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "libtgs.so"
    lib.write_bytes(b"")
    monkeypatch.setenv(locate.SHIM_ENV, str(lib))
    assert locate.find_shim() == lib.resolve()
    monkeypatch.setenv(locate.SHIM_ENV, str(tmp_path / "missing.so"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        locate.find_shim()
