"""What the tests and the benchmarks run jobs with, none of it a benchmark: the driver of the
tgs-workload program (workload.py), the unified-memory agent steered line by line
(um_agent.py), the GPU the jobs run on, simulated or real, and its busy-time samplers (gpu.py),
and the frameworks venv with real PyTorch and CuPy (frameworks_venv.py)."""
