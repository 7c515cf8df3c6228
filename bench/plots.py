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
                           "(pip install -e '.[demo]')") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def timeline(key: str, title: str, runs: dict[str, RunRecord], path: Path,
             dpi: int = 80) -> Path:
    """Throughput over time per job, one panel per policy (runs: label -> record)."""
    plt = _pyplot()
    labels = list(runs)
    ncol = len(labels) if len(labels) <= 3 else 2      # three runs: one row, no empty panel
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
            ax.text(0.99, 0.97, "target 0.97", transform=ax.get_yaxis_transform(),
                    ha="right", va="bottom", fontsize=7)
        if field == "harvest":
            ax.axhline(0.8, color="k", lw=0.8, ls=":")
            ax.text(0.99, 0.8, "target 0.8", transform=ax.get_yaxis_transform(), ha="right",
                    va="bottom", fontsize=7)
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


def oversub_timeline(key: str, title: str, runs: dict[str, RunRecord], path: Path,
                     dpi: int = 80) -> Path:
    """OV scenarios: a row per memory policy, memory by job (left: on the GPU solid, on the
    host dashed) and throughput by job (right) over time; production's allocations (ticks),
    its OOM (x) and its free (dotted line) marked."""
    from tgs.bench.oversub_metrics import memory_by_job

    plt = _pyplot()
    labels = list(runs)
    fig, axes = plt.subplots(max(1, len(labels)), 2, figsize=(10.4, 2.5 * max(1, len(labels))),
                             squeeze=False, sharex=True)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, label in enumerate(labels):
        rec = runs[label]
        color = {n: palette[i % len(palette)] for i, n in enumerate(sorted(rec.jobs))}
        mem = memory_by_job(rec.memory, {n: j.pid for n, j in rec.jobs.items()}, rec.t0)
        ax_m, ax_r = axes[row]
        for name, pts in mem.items():
            ts = [p[0] for p in pts]
            ax_m.plot(ts, [(d + r) / 2**20 for _, d, r, _ in pts], "-", lw=1.2,
                      color=color[name], label=f"{name} on GPU")
            if any(h for *_, h in pts):
                ax_m.plot(ts, [h / 2**20 for *_, h in pts], "--", lw=1.0, color=color[name],
                          label=f"{name} on host")
        for name, job in rec.jobs.items():
            pts = M.rate_series(job.cumulative(), 0.2)
            ax_r.plot([t - rec.t0 for t, _ in pts], [r for _, r in pts], lw=1.1,
                      color=color[name], label=f"{name} ({job.role})")
            for e in job.events:
                t = float(e["mono_s"]) - rec.t0
                if e.get("type") == "alloc":
                    ax_m.axvline(t, color=color[name], lw=0.5, alpha=0.35)
                    if not e.get("ok"):
                        ax_m.plot([t], [int(e.get("held", 0)) / 2**20], "x", ms=8, color="k",
                                  label=f"{name} OOM")
                elif e.get("type") == "free":
                    for ax in (ax_m, ax_r):
                        ax.axvline(t, color=color[name], lw=1.0, ls=":")
        ax_m.set_title(f"{label}: memory (MiB)", fontsize=9)
        ax_r.set_title(f"{label}: iterations/s", fontsize=9)
        for ax in (ax_m, ax_r):
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=8)
        ax_m.legend(fontsize=6, loc="upper left")
        ax_r.legend(fontsize=6, loc="upper left")
    for ax in axes[-1]:
        ax.set_xlabel("time (s)", fontsize=8)
    fig.suptitle(f"{key}: {title}", fontsize=10, x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
