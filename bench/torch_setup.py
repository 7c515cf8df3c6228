"""What the PyTorch job programs (bench/torch_train.py, bench/torch_infer.py) set up alike:
the CUDA device, or an `error` line when PyTorch or its device is missing; the MLP they run."""

from __future__ import annotations

from typing import Any

if __package__:
    from .job_report import emit
else:   # run as a script by a framework's own interpreter: bench/ is on sys.path
    from job_report import emit  # type: ignore[no-redef]


def open_device(name: str, index: int) -> tuple[Any, Any] | None:
    """(torch, the CUDA device), or None after printing the error line."""
    try:
        import torch
    except ImportError:
        emit("error", name, error="PyTorch is not installed")
        return None
    if not torch.cuda.is_available():
        emit("error", name, error="PyTorch sees no CUDA device")
        return None
    torch.manual_seed(0)
    return torch, torch.device("cuda", index)


def mlp(torch: Any, width: int, layers: int, dev: Any) -> Any:
    """layers Linear layers of width (ReLU between), the last to 10 classes, on dev."""
    mods: list[Any] = []
    for _ in range(layers - 1):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods, torch.nn.Linear(width, 10)).to(dev)
