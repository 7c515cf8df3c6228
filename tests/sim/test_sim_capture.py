"""Stream capture on the simulated driver, against the real driver's documented rules.

The probe (progs/capture.c) runs each scenario and prints the return codes it got; kernels are
1 ms each (grid 1000 x block 1000 at 1 ns per thread).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tgs.intercept import simstate

pytestmark = pytest.mark.timeout(60)

SUCCESS, NOT_SUPPORTED, ILLEGAL_STATE = 0, 801, 401
UNSUPPORTED, INVALIDATED, MERGE, UNMATCHED = 900, 901, 902, 903
UNJOINED, ISOLATION, IMPLICIT, CAPTURED_EVENT, WRONG_THREAD = 904, 905, 906, 907, 908
NONE, ACTIVE, STATUS_INVALIDATED = 0, 1, 2
KERNEL, MEMCPY = 0, 1


def run(sim_progs: dict[str, Path], env: dict[str, str], *scenarios: str) -> dict[str, dict[str,
                                                                                          str]]:
    p = subprocess.run([str(sim_progs["capture"]), *scenarios], env=env, capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "init 0"
    out = {}
    for line in lines[1:]:
        name, *kv = line.split()
        out[name] = dict(item.split("=", 1) for item in kv)
    assert len(out) == len(scenarios), p.stdout
    return out


def ints(d: dict[str, str], *keys: str) -> list[int]:
    return [int(d[k]) for k in keys]


def test_captured_work_does_not_run_and_the_graph_replays_it(sim_progs: dict[str, Path],
                                                             sim_env: dict[str, str]) -> None:
    r = run(sim_progs, sim_env, "basic")["basic"]
    assert ints(r, "begin", "status", "info", "launch", "end", "inst", "replay", "sync") == [
        SUCCESS, ACTIVE, SUCCESS, SUCCESS, SUCCESS, SUCCESS, SUCCESS, SUCCESS]
    assert int(r["id"]) > 0 and r["deps0"] == "0" and r["deps"] == "1"   # a chain of nodes
    assert ints(r, "after", "nodes", "type", "same_graph") == [NONE, 3, KERNEL, 1]
    assert int(r["destroy"]) == ILLEGAL_STATE         # the graph a capture is building
    # three 1 ms kernels: not executed while captured (the device ran only the replay's
    # three), executed at replay
    assert simstate.read_state(sim_env["TGS_SIM_STATE"]).devices[0].kernels_done == 3
    assert 2.9 <= float(r["replay_ms"]) < 60_000, r


@pytest.mark.parametrize("what,error", [
    ("streamsync", UNSUPPORTED), ("streamquery", UNSUPPORTED), ("ctxsync", UNSUPPORTED),
    ("legacy", IMPLICIT), ("eventquery", CAPTURED_EVENT), ("eventsync", CAPTURED_EVENT),
    ("malloc", UNSUPPORTED),
])
def test_illegal_calls_invalidate_a_global_capture(sim_progs: dict[str, Path],
                                                   sim_env: dict[str, str], what: str,
                                                   error: int) -> None:
    r = run(sim_progs, sim_env, what)[what]
    assert ints(r, "begin", "launch", "bad", "status", "launch2") == [
        SUCCESS, SUCCESS, error, STATUS_INVALIDATED, INVALIDATED]
    assert ints(r, "end", "graph_null", "after", "again", "sync") == [
        INVALIDATED, 1, NONE, SUCCESS, SUCCESS]


def test_non_blocking_streams_leave_the_legacy_stream_usable(sim_progs: dict[str, Path],
                                                             sim_env: dict[str, str]) -> None:
    r = run(sim_progs, sim_env, "nonblocking")["nonblocking"]
    assert ints(r, "begin", "launch", "legacy", "legacy_sync", "end", "nodes") == [0] * 5 + [1]


def test_capture_modes(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> None:
    r = run(sim_progs, sim_env, "relaxed", "modes", "wrongthread")
    assert ints(r["relaxed"], "exchange", "old", "alloc", "free", "restored", "end", "nodes") == [
        SUCCESS, 0, SUCCESS, SUCCESS, 1, SUCCESS, 1]
    # another thread's cuMemAlloc during this thread's GLOBAL capture: refused in its GLOBAL
    # mode (and the capture invalidated), allowed in THREAD_LOCAL and RELAXED
    m = {k: [int(x) for x in v.split(",")] for k, v in r["modes"].items()}
    assert m == {"global": [UNSUPPORTED, INVALIDATED], "thread_local": [SUCCESS, SUCCESS],
                 "relaxed": [SUCCESS, SUCCESS]}
    assert ints(r["wrongthread"], "other", "own", "nodes") == [WRONG_THREAD, SUCCESS, 1]


def test_event_queries_are_unsafe_during_a_global_capture(sim_progs: dict[str, Path],
                                                          sim_env: dict[str, str]) -> None:
    """An ordinary (uncaptured) event: refused in GLOBAL mode, allowed in RELAXED mode."""
    r = run(sim_progs, sim_env, "plainevent")["plainevent"]
    assert r["global"] == f"{UNSUPPORTED},{INVALIDATED}"
    assert r["relaxed"] == f"{SUCCESS},{SUCCESS}"


def test_event_joins_fork_and_join_streams(sim_progs: dict[str, Path],
                                           sim_env: dict[str, str]) -> None:
    r = run(sim_progs, sim_env, "forkjoin", "unjoined")
    j = r["forkjoin"]
    assert ints(j, "begin", "ops", "wait", "joined", "same_id") == [0, 0, 0, ACTIVE, 1]
    # the origin's next node depends on its own last kernel and on the joined stream's
    assert ints(j, "deps", "end", "nodes", "after2", "evquery") == [
        2, SUCCESS, 3, NONE, CAPTURED_EVENT]
    u = r["forkjoin_unjoined"]
    assert ints(u, "joined", "end", "nodes", "after2") == [ACTIVE, UNJOINED, 0, NONE]


def test_waits_across_captures_are_refused(sim_progs: dict[str, Path],
                                           sim_env: dict[str, str]) -> None:
    r = run(sim_progs, sim_env, "crossing")["crossing"]
    split = {k: [int(x) for x in v.split(",")] for k, v in r.items()}
    assert split["isolation"] == [ISOLATION, INVALIDATED]
    assert split["merge"] == [MERGE, INVALIDATED, INVALIDATED]
    assert split["twice"] == [SUCCESS, ILLEGAL_STATE]
    assert split["unmatched"] == [ILLEGAL_STATE]        # s2 is not capturing
    assert split["forked_end"] == [UNMATCHED, INVALIDATED]  # ended from a joined stream
    assert split["idle_join"] == [1]    # an idle stream joining an invalidated capture
    assert split["legacy"] == [UNSUPPORTED]             # the legacy stream cannot capture
    assert split["end"] == [SUCCESS] and split["not_capturing"] == [ILLEGAL_STATE]


def test_async_copies_become_memcpy_nodes(sim_progs: dict[str, Path],
                                          sim_env: dict[str, str]) -> None:
    r = run(sim_progs, sim_env, "memcpy")["memcpy"]
    assert ints(r, "begin", "copy1", "launch", "copy2", "end", "nodes") == [0, 0, 0, 0, 0, 3]
    assert r["types"] == f"{MEMCPY},{MEMCPY}"
    assert ints(r, "before", "replay", "after") == [0, SUCCESS, 7]   # copied at replay only


def test_update_capture_dependencies(sim_progs: dict[str, Path], sim_env: dict[str, str]) -> None:
    r = run(sim_progs, sim_env, "updatedeps")["updatedeps"]
    assert r["set"] == "0,1,1"          # SET: the dependency set is now the first kernel only
    assert r["add"] == "0,2"            # ADD: the second kernel joins it again
    assert ints(r, "bad", "not_capturing", "end", "nodes") == [1, ILLEGAL_STATE, SUCCESS, 3]


def test_other_streams_may_be_synchronized_during_a_capture(sim_progs: dict[str, Path],
                                                             sim_env: dict[str, str]) -> None:
    """The model's choice (tests/gpu compares it with a real driver)."""
    r = run(sim_progs, sim_env, "otherstream")["otherstream"]
    assert ints(r, "query", "sync", "end", "nodes") == [SUCCESS, SUCCESS, SUCCESS, 1]


def test_the_per_thread_default_stream_captures(sim_progs: dict[str, Path],
                                                sim_env: dict[str, str]) -> None:
    r = run(sim_progs, sim_env, "perthread")["perthread"]
    assert ints(r, "begin", "joins", "end", "nodes", "after") == [SUCCESS, 0, SUCCESS, 3, NONE]
    assert r["launch"] == "0,0" and r["status"] == f"0,{ACTIVE}"
    assert int(r["legacy"]) == IMPLICIT     # the legacy stream while a blocking stream captures
