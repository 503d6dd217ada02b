"""ResNet50 data-parallel scaling on the electrical baselines (sweep ``resnet50_scaling``)."""

from __future__ import annotations

import polars as pl

from estimator.reports.model import Figure, Section, Table

SCALING_SQL = """
SELECT fabric_name, nodes, iter_time_s, compute_time_s, exposed_comm_time_s, samples_per_s
FROM estimates
WHERE model_name = 'resnet50' AND device_name = 'a100' AND parallelism_bucketing = 'ddp'
  AND fabric_name IN ('ideal', 'nvlink_leafspine') AND algorithm = 'default'
ORDER BY fabric_name, nodes
"""


def _plot_iter_time(df: pl.DataFrame, ax) -> None:
    for (name,), part in df.group_by(["fabric_name"], maintain_order=True):
        ax.plot(part["nodes"], part["iter_time_s"] * 1e3, marker="o", label=f"{name}: iteration")
        ax.plot(part["nodes"], part["compute_time_s"] * 1e3, ls=":", color=ax.lines[-1].get_color(),
                label=f"{name}: compute only")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs (A100, data parallel)")
    ax.set_ylabel("time per iteration (ms)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


SECTION = Section(
    key="scaling",
    title="ResNet50 data-parallel scaling (electrical baselines)",
    intro=(
        "ResNet50 captured with torch.profiler on the CPU, scaled to 32 samples per A100 (roofline "
        "compute model), gradients bucketed as PyTorch DDP does (25 MiB) and all-reduced on a "
        "communication stream that overlaps backward. Fabrics: one ideal non-blocking switch "
        "(300 GB/s, 0.7 µs) and the NVLink leaf-spine (8-GPU NVLink nodes, 4×800G to spines)."
    ),
    figures=(
        Figure(
            name="resnet50_iter_time_vs_nodes",
            title="ResNet50 iteration time vs cluster size",
            sql=SCALING_SQL,
            plot=_plot_iter_time,
            caption="Solid: iteration time; dotted: compute alone. The gap is exposed communication.",
        ),
    ),
    tables=(Table(name="resnet50_scaling", title="ResNet50 scaling data", sql=SCALING_SQL),),
    order=10,
)
