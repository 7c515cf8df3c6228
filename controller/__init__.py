"""The node daemon: job registry, token allocation policies, ZeroMQ control plane."""
