"""ResNet50 data-parallel scaling on the electrical baselines (experiment ``foundation``).

Rows: ResNet50 on A100s with DDP buckets on the ideal switch at 450 GB/s per GPU, the leaf-spine
GPU's NVLink (conf/experiment/foundation.yaml says why: at seed 000's 300 GB/s the switch would not
bound the leaf-spine's NVLink on large all-reduces; rows at other bandwidths, e.g. the cross-fabric
study's bound at 64 and 256 GPUs, are left out, so every GPU count appears once per series) and on
the NVLink leaf-spine. The ideal switch appears twice: with its default algorithm (seed 000's flat
ring, whose 2(N-1) alpha latency grows with N) and with its fastest (``algorithm=auto``), the lower
bound (tests/test_report_bound.py checks it on a real sweep). The time axis starts at 0,
so a 1 ms difference on a 16 ms iteration looks like what it is; the second figure shows the
exposed communication itself on a log axis.
"""

from __future__ import annotations

import polars as pl

from estimator.reports.model import Figure, Section, Table
from estimator.reports.plots import line_plot
from estimator.reports.sections.paper_helpers import table_with
from estimator.reports.style import styles

ESTIMATES = table_with("estimates", {"fabric_bandwidth_Bps": "DOUBLE", "fabric_spine_ports": "BIGINT"})

SCALING_SQL = f"""
SELECT CASE WHEN fabric_name = 'ideal' AND algorithm = 'auto' THEN 'ideal (lower bound)'
            WHEN fabric_name = 'ideal' THEN 'ideal (default: ring)' ELSE fabric_name END AS series,
       fabric_name, algorithm, algorithm_used, nodes, fabric_spine_ports AS spine_ports,
       iter_time_s, compute_time_s, exposed_comm_time_s, 1e3 * exposed_comm_time_s AS exposed_ms, samples_per_s
FROM {ESTIMATES} AS t
WHERE model_name = 'resnet50' AND device_name = 'a100' AND parallelism_bucketing = 'ddp' AND precision = 'amp'
  AND ((fabric_name = 'ideal' AND fabric_bandwidth_Bps = 450e9 AND algorithm IN ('default', 'auto'))
       OR (fabric_name = 'nvlink_leafspine' AND algorithm = 'default'))
ORDER BY series, nodes
"""


def _plot_iter_time(df: pl.DataFrame, ax) -> None:
    names = list(dict.fromkeys(df["series"].to_list()))
    style = styles(names)
    for name in names:
        part = df.filter(pl.col("series") == name).sort("nodes")
        ax.plot(part["nodes"], part["iter_time_s"] * 1e3, label=name, **style[name].line())
    compute = df.sort("nodes").unique("nodes", keep="first", maintain_order=True)
    ax.plot(compute["nodes"], compute["compute_time_s"] * 1e3, ls=":", color="#444", marker="", label="compute only (all)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.1 * float(df["iter_time_s"].max()) * 1e3)
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
        "(450 GB/s per GPU — the leaf-spine GPU's NVLink, so that it bounds the leaf-spine — and 0.7 µs) and "
        "the NVLink leaf-spine (8-GPU NVLink nodes, 4×800G to spines). The ideal "
        "switch is shown with its default algorithm (seed 000's flat ring: 2(N−1) messages of 0.7 µs, "
        "1.4 ms per all-reduce at 1,024 GPUs, hence slower than the leaf-spine's NCCL tree there) and "
        "with its fastest algorithm, the lower bound. Experiment: <code>estimator sweep experiment=foundation</code>."
    ),
    figures=(
        Figure(
            name="resnet50_iter_time_vs_nodes",
            title="ResNet50 iteration time vs cluster size",
            sql=SCALING_SQL,
            plot=_plot_iter_time,
            caption="Iteration time per fabric; dotted: compute alone (the same on every fabric). The gap is exposed "
                    "communication, shown on its own in the next figure.",
        ),
        Figure(
            name="resnet50_exposed_vs_nodes",
            title="ResNet50 exposed communication per iteration",
            sql=SCALING_SQL,
            plot=line_plot("nodes", "exposed_ms", ["series"], xlabel="GPUs (A100, data parallel)",
                           ylabel="exposed communication (ms)", logy=True),
            caption="Communication not hidden behind backward compute, per iteration.",
        ),
    ),
    tables=(Table(name="resnet50_scaling", title="ResNet50 scaling data", sql=SCALING_SQL),),
    order=10,
)
