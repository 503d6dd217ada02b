"""nccl-tests-style bus-bandwidth curves for any fabric, as rows and as a figure.

``algbw = bytes / time``; ``busbw = algbw x factor`` with nccl-tests' factors (doc/PERFORMANCE.md):
all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all (and gather) (n-1)/n; others 1.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError
from estimator.files import atomic_path


def bus_factor(collective: str, n: int) -> float:
    if n <= 1:
        return 1.0
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("reduce_scatter", "all_gather", "all_to_all", "gather"):
        return (n - 1) / n
    return 1.0


def cost_row(fabric: Any, collective: str, nbytes: float, algorithm: str = "default", group_size: int | None = None,
             explicit: bool = False) -> dict[str, Any]:
    """One size: time, algbw, busbw, the algorithm used and its step count."""
    if explicit:
        if "explicit" not in inspect.signature(fabric.collective_cost).parameters:
            raise EstimatorError(f"fabric {fabric.name!r} cannot price explicit schedules")
        cost = fabric.collective_cost(collective, nbytes, algorithm, group_size, explicit=True)
    else:
        cost = fabric.collective_cost(collective, nbytes, algorithm, group_size)
    algbw = nbytes / cost.time_s if cost.time_s > 0 else 0.0
    proto = {"protocol": cost.protocol} if getattr(cost, "protocol", "") else {}  # fabrics that model NCCL
    return {
        "bytes": nbytes,
        "time_s": cost.time_s,
        "algbw_Bps": algbw,
        "busbw_Bps": algbw * bus_factor(collective, cost.nodes),
        "algorithm": cost.algorithm,
        **proto,
        "steps": cost.steps,
        "reconfig_s": cost.reconfig_s,
    }


def curve(fabric: Any, collective: str, sizes: Sequence[float], algorithm: str = "default",
          group_size: int | None = None, explicit: bool = False) -> list[dict[str, Any]]:
    return [cost_row(fabric, collective, float(s), algorithm, group_size, explicit) for s in sizes]


def plot_curves(curves: dict[str, list[dict[str, Any]]], path: str | Path, title: str = "") -> Path:
    """busbw (GB/s) vs size (log x) for each labelled curve; written atomically (PNG/SVG/PDF by suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise EstimatorError(f"{path}: busbw figure must end in .png, .svg or .pdf")
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, rows in curves.items():
        ax.plot([r["bytes"] for r in rows], [r["busbw_Bps"] / 1e9 for r in rows], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp)
    finally:
        plt.close(fig)
    return path
