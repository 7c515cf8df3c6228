"""Find the shim library and build the environment that injects it into a child process; where
the source tree's build outputs are (``build_path``, the one place that works it out)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SHIM_ENV = "TGS_SHIM_LIB"
SHIM_NAME = "libtgs.so"
INSTALLED_DIRS = (
    "/usr/local/lib/tgs",
    "/usr/local/lib",
    "/usr/lib/tgs",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib",
)


def source_root() -> Path:
    """The source tree this package runs from (an editable install's checkout)."""
    return Path(__file__).resolve().parent.parent


def build_path(*parts: str) -> Path:
    """A path under the source tree's build/ (``make``'s outputs: build/libtgs.so, build/sim/,
    build/bin/; the benchmarks' and tests' own builds); it need not exist (an installed copy
    has no build/)."""
    return source_root().joinpath("build", *parts)


def shim_candidates() -> list[Path]:
    out: list[Path] = []
    env = os.environ.get(SHIM_ENV)
    if env:
        out.append(Path(env))
    out.append(build_path(SHIM_NAME))  # source tree
    out.extend(Path(d) / SHIM_NAME for d in INSTALLED_DIRS)
    return out


def find_shim() -> Path:
    """The shim: $TGS_SHIM_LIB, then build/libtgs.so of the source tree, then installed places."""
    env = os.environ.get(SHIM_ENV)
    if env and not Path(env).is_file():
        raise FileNotFoundError(f"tgs: {SHIM_ENV}={env} does not exist")
    for cand in shim_candidates():
        if cand.is_file():
            return cand.resolve()
    raise FileNotFoundError(
        f"tgs: {SHIM_NAME} not found (set {SHIM_ENV} or run `make` in the source tree)"
    )


SIM_LIB_ENV = "TGS_SIM_LIB_DIR"


def find_sim_lib_dir() -> Path | None:
    """The simulated driver's directory (its libcuda.so.1): $TGS_SIM_LIB_DIR, then build/sim of
    the source tree; None when neither has it."""
    env = os.environ.get(SIM_LIB_ENV)
    for d in ([Path(env)] if env else []) + [build_path("sim")]:
        if (d / "libcuda.so.1").is_file():
            return d.resolve()
    return None


def prepend_path(existing: str, entry: str) -> str:
    """A ':'-separated search path with `entry` first, once."""
    return ":".join([entry, *(p for p in existing.split(":") if p and p != entry)])


def prepend_preload(existing: str, lib: str) -> str:
    # ld.so accepts ':' or whitespace as separators; keep the others, drop duplicates of ours.
    parts = [p for p in existing.replace(":", " ").split() if p]
    same = {lib, os.path.realpath(lib)}
    rest = [p for p in parts if p not in same and os.path.realpath(p) not in same]
    return ":".join([lib, *rest])


def injection_env(
    segment_path: str | os.PathLike[str] | None,
    shim_path: str | os.PathLike[str] | None = None,
    base: Mapping[str, str] | None = None,
    *,
    mem_limit: str | None = None,
    log_level: str | None = None,
    real_libcuda: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """A copy of ``base`` (default: os.environ) with the shim preloaded and pointed at a segment.

    ``segment_path`` None leaves TGS_SEGMENT unset (pass-through or the static TGS_MEM_LIMIT).
    """
    env = dict(os.environ if base is None else base)
    lib = str(Path(shim_path) if shim_path is not None else find_shim())
    env["LD_PRELOAD"] = prepend_preload(env.get("LD_PRELOAD", ""), lib)
    if segment_path is not None:
        env["TGS_SEGMENT"] = str(segment_path)
    else:
        env.pop("TGS_SEGMENT", None)
    if mem_limit is not None:
        env["TGS_MEM_LIMIT"] = mem_limit
    if log_level is not None:
        env["TGS_LOG_LEVEL"] = log_level
    if real_libcuda is not None:
        env["TGS_REAL_LIBCUDA"] = str(real_libcuda)
    return env
