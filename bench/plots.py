"""PNG plots of a suite (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tgs.bench import metrics as M
from tgs.bench.harness import RunRecord

PLOT_WINDOW_S = 0.5
POLICY_COLORS = {"none": "#d62728", "static": "#ff7f0e", "tgs": "#7f7f7f",
                 "adaptive": "#2ca02c"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:     # a clear message instead of a traceback
        raise RuntimeError("plots need matplotlib: `make venv` installs it "
                           "(pip install -e '.[test]')") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def timeline(key: str, title: str, runs: dict[str, RunRecord], path: Path,
             dpi: int = 80) -> Path:
    """Throughput over time per job, one panel per policy (runs: label -> record)."""
    plt = _pyplot()
    labels = list(runs)
    ncol = min(2, len(labels))
    nrow = (len(labels) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 2.6 * nrow), squeeze=False,
                             sharey=True)
    names: list[str] = []
    for rec in runs.values():
        names += [n for n in rec.jobs if n not in names]
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {n: palette[i % len(palette)] for i, n in enumerate(names)}
    for ax, label in zip(axes.flat, labels):
        rec = runs[label]
        for name, job in rec.jobs.items():
            pts = M.rate_series(job.cumulative(), PLOT_WINDOW_S)
            if not pts:
                continue
            style = "-" if job.role == "production" else "--"
            ax.plot([t - rec.t0 for t, _ in pts], [r for _, r in pts], style, lw=1.2,
                    color=color[name], label=f"{name} ({job.role})")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    for ax in axes.flat[len(labels):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("time (s)", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("iterations/s", fontsize=8)
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), fontsize=7, loc="upper right",
               ncol=min(4, len(handles)))
    fig.suptitle(f"{key}: {title}", fontsize=10, x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def headline_bars(summary: dict[str, Any], path: Path, dpi: int = 80) -> Path:
    """Grouped bars: production vs solo, harvest, GPU utilisation; per scenario and policy."""
    plt = _pyplot()
    keys = list(summary)
    policies: list[str] = []
    for s in summary.values():
        policies += [p for p in s["policies"] if p not in policies]
    panels = (("prod_vs_solo", "production / solo"), ("harvest", "harvest"),
              ("gpu_util", "GPU utilisation"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.0))
    width = 0.8 / max(1, len(policies))
    for ax, (field, label) in zip(axes, panels):
        for i, pol in enumerate(policies):
            vals = [summary[k]["policies"].get(pol, {}).get(field) for k in keys]
            xs = [x + (i - (len(policies) - 1) / 2) * width for x in range(len(keys))]
            ax.bar(xs, [v if v is not None else 0.0 for v in vals], width,
                   label=pol, color=POLICY_COLORS.get(pol))
        if field == "prod_vs_solo":
            ax.axhline(0.97, color="k", lw=0.8, ls=":")
        if field == "harvest":
            ax.axhline(0.8, color="k", lw=0.8, ls=":")
            ax.axhline(1.0, color="k", lw=0.5, ls="-", alpha=0.4)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(keys, fontsize=8)
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="upper center", ncol=len(policies))
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
