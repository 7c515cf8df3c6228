"""tgs-workload's command line and the Python wrapper's pure parts (no driver needed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tgs.testbed.workload import WorkloadSpec, parse_output

pytestmark = pytest.mark.timeout(30)

PTXAS = Path("/usr/local/cuda/bin/ptxas")


def _run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=20)


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["--bogus"], "unknown option '--bogus'"),
        (["--kernels", "0"], "--kernels"),
        (["--kernels", "12x"], "--kernels"),
        (["--kernel-us", "-5"], "--kernel-us"),
        (["--kernel-us", "nan"], "--kernel-us"),
        (["--threads-per-block", "2048"], "--threads-per-block"),
        (["--iters", "-1"], "--iters"),
        (["--iters", "3", "--seconds", "1"], "not both"),
        (["--mem", "12XB"], "--mem"),
        (["--mem", "-1G"], "--mem"),
        (["--alloc-chunk", "1M"], "--alloc-chunk needs --mem"),
        (["--mem", "1G", "--alloc-chunk", "1"], "larger chunk"),
        (["--name", "x" * 300], "--name"),
        (["--resolve", "magic"], "--resolve"),
        (["--launch", "warp"], "--launch"),
        (["--cuda-version", "2000"], "--cuda-version"),
        (["--iters"], "needs a value"),
        (["stray"], "unexpected argument 'stray'"),
    ],
)
def test_usage_errors_exit_2_with_message(workload_bin: Path, args: list[str],
                                          mentions: str) -> None:
    res = _run(workload_bin, *args)
    assert res.returncode == 2, res
    assert mentions in res.stderr
    assert "usage: tgs-workload" in res.stderr


def test_help_exits_0(workload_bin: Path) -> None:
    res = _run(workload_bin, "--help")
    assert res.returncode == 0
    assert "--kernel-us" in res.stdout and "--resolve" in res.stdout


def test_print_ptx_carries_cost_comment_only_when_asked(workload_bin: Path) -> None:
    plain = _run(workload_bin, "--print-ptx").stdout
    costly = _run(workload_bin, "--print-ptx", "--cost-factor", "2.5").stdout
    assert plain.startswith(".version 7.0\n.target sm_70\n.address_size 64\n")
    assert "%globaltimer" in plain and ".entry tgs_spin" in plain
    assert "tgs-sim" not in plain
    assert "// tgs-sim: cost tgs_spin 2.5\n" in costly
    assert costly.replace("// tgs-sim: cost tgs_spin 2.5\n", "") == plain


@pytest.mark.skipif(not PTXAS.exists(), reason="no CUDA toolkit ptxas")
def test_embedded_ptx_assembles_with_ptxas(workload_bin: Path, tmp_path: Path) -> None:
    ptx = tmp_path / "spin.ptx"
    ptx.write_text(_run(workload_bin, "--print-ptx", "--cost-factor", "3").stdout)
    res = subprocess.run([str(PTXAS), "-arch=sm_70", str(ptx), "-o", str(tmp_path / "a.cubin")],
                         capture_output=True, text=True, timeout=60)
    if res.returncode != 0 and "not defined for option" in res.stderr:
        # CUDA 13's ptxas no longer targets Volta; the PTX (.target sm_70) still
        # JITs on every newer GPU, so assemble it for the oldest and a current one.
        for arch in ("sm_75", "sm_90"):
            res = subprocess.run(
                [str(PTXAS), f"-arch={arch}", str(ptx), "-o", str(tmp_path / f"{arch}.cubin")],
                capture_output=True, text=True, timeout=60)
            assert res.returncode == 0, res.stderr
    else:
        assert res.returncode == 0, res.stderr


def test_spec_argv_round_trip() -> None:
    spec = WorkloadSpec(kernels=2, kernel_us=500, gap_ms=0, iters=7, mem="1GiB",
                        alloc_chunk=256 << 20, name="prod", launch="graph", per_thread=True,
                        priority=-1)
    argv = spec.argv()
    assert argv[0].endswith("tgs-workload")
    joined = " ".join(argv[1:])
    for part in ("--kernels 2", "--kernel-us 500.0", "--gap-ms 0.0", "--iters 7",
                 "--mem 1GiB", f"--alloc-chunk {256 << 20}", "--name prod", "--launch graph",
                 "--priority -1", "--per-thread"):
        assert part in joined
    assert "--seconds" not in joined
    assert WorkloadSpec(resolve="link").argv()[0].endswith("tgs-workload-linked")
    with pytest.raises(ValueError):
        WorkloadSpec(iters=1, seconds=1.0).argv()
    with pytest.raises(ValueError):
        WorkloadSpec(launch="warp").argv()


def test_parse_output_sorts_lines() -> None:
    out = "\n".join([
        '{"type":"start","name":"a","resolve":"proc"}',
        "not json",
        '{"type":"progress","name":"a","t_s":0.5,"iters":10,"window_s":0.5,'
        '"window_iters":10,"it_per_s":20}',
        '{"type":"summary","name":"a","iters":20,"it_per_s":19.5,"lat_ms":{"mean":1}}',
    ])
    start, summary, progress, error = parse_output(out)
    assert start and start["resolve"] == "proc"
    assert summary and summary["iters"] == 20
    assert error is None
    assert len(progress) == 1 and progress[0].it_per_s == 20.0


@pytest.mark.skipif(shutil.which("readelf") is None, reason="no readelf")
def test_linked_binary_has_no_rpath(workload_bin: Path) -> None:
    linked = workload_bin.with_name("tgs-workload-linked")
    if not linked.exists():
        pytest.skip("tgs-workload-linked not built (no simulator sources)")
    dyn = subprocess.run(["readelf", "-d", str(linked)], capture_output=True, text=True,
                         timeout=20).stdout
    assert "libcuda.so.1" in dyn
    assert "RPATH" not in dyn and "RUNPATH" not in dyn


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["--sync-every", "0"], "--sync-every"),
        (["--ahead", "2"], "--ahead needs --sync-every"),
        (["--streams", "17"], "--streams"),
        (["--streams", "2", "--launch", "graph"], "one launch"),
        (["--kernels", "4", "--kernel-mix", "3"], "at most half"),
        (["--kernels", "4", "--kernel-mix", "1", "--launch", "coop"], "--kernel-mix"),
        (["--poisson-rps", "0"], "--poisson-rps"),
        (["--poisson-rps", "10", "--sync-every", "4"], "--poisson-rps"),
        (["--seed", "-3"], "--seed"),
    ],
)
def test_shape_usage_errors(workload_bin: Path, args: list[str], mentions: str) -> None:
    res = _run(workload_bin, *args)
    assert res.returncode == 2, res
    assert mentions in res.stderr


def test_shape_options_reach_the_command_line() -> None:
    argv = WorkloadSpec(sync_every=10, ahead=3, streams=2, kernel_mix=1, poisson_rps=50.0,
                        seed=7).argv()
    for flag, value in (("--sync-every", "10"), ("--ahead", "3"), ("--streams", "2"),
                        ("--kernel-mix", "1"), ("--poisson-rps", "50.0"), ("--seed", "7")):
        assert argv[argv.index(flag) + 1] == value
    assert "--sync-every" not in WorkloadSpec().argv()
