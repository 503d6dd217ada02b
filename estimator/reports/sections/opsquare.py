"""OPSquare, analytical level (seed 004): collectives and training vs the NVLink leaf-spine.

Data: experiment ``opsquare`` (conf/experiment/opsquare.yaml), tables ``collective_costs`` and
``estimates``. The paper's own study is packet level (the ``opsquare_packet`` experiment and its
section); here its architecture is priced analytically, both networks paying the same 0.7 µs
per-message software overhead. The leaf-spine's time at a size is its fastest of the NCCL-style
hierarchical ring, hierarchical tree and flat ring.
"""

from __future__ import annotations

from estimator.reports.model import Figure, Section, Table
from estimator.reports.plots import line_plot
from estimator.reports.rules import Beats
from estimator.reports.sections.paper_helpers import Query, judged, rows, table_with

COSTS = table_with("collective_costs", {"fabric_host_overhead_s": "DOUBLE", "fabric_transceiver_bps": "DOUBLE"})
ESTIMATES = table_with("estimates", {"fabric_host_overhead_s": "DOUBLE", "fabric_transceiver_bps": "DOUBLE",
                                     "fabric_nvlink_bandwidth_Bps": "DOUBLE"})
OPS = "fabric_name = 'opsquare' AND fabric_host_overhead_s = 0.7e-6"
LS = "fabric_name = 'nvlink_leafspine' AND algorithm IN ('hierarchical', 'hierarchical_tree', 'ring')"

CURVES_SQL = f"""
SELECT fabric_name || ': ' || algorithm || CASE WHEN fabric_transceiver_bps < 3.6e12
       THEN ' (3.6 Tb/s per node)' ELSE '' END AS scheme, nodes, bytes, time_s
FROM {COSTS} AS t
WHERE collective = 'all_reduce' AND nodes IN (256, 1024) AND (({OPS}) OR ({LS}))
ORDER BY nodes, scheme, bytes
"""

# OPSquare at the paper's 3.6 Tb/s per transceiver, and at 3.6 Tb/s per node (split over P + 1 transceivers)
BASES = {"per_transceiver": "3.6 Tb/s per transceiver (the paper's setting)",
         "per_node": "3.6 Tb/s per node, equal to the leaf-spine GPU's"}
SPEEDUP_SQL = f"""
WITH ls AS (SELECT nodes, bytes, min(time_s) AS leafspine_s FROM {COSTS} AS t
            WHERE collective = 'all_reduce' AND {LS} GROUP BY ALL),
ops AS (SELECT nodes, bytes, CASE WHEN fabric_transceiver_bps = 3.6e12 THEN 'per_transceiver' ELSE 'per_node' END AS basis,
               min(time_s) AS opsquare_s FROM {COSTS} AS t
        WHERE collective = 'all_reduce' AND {OPS} AND algorithm = 'hierarchical' GROUP BY ALL)
SELECT nodes, basis, bytes, leafspine_s, opsquare_s, leafspine_s / opsquare_s AS opsquare_speedup
FROM ls JOIN ops USING (nodes, bytes)
WHERE nodes IN (256, 1024)
ORDER BY nodes, basis, bytes
"""

TRAINING_SQL = f"""
SELECT o.model_name, o.nodes, o.iter_time_s AS opsquare_iter_s, l.iter_time_s AS leafspine_iter_s,
       l.iter_time_s / o.iter_time_s AS opsquare_speedup, o.exposed_comm_time_s AS opsquare_exposed_s,
       l.exposed_comm_time_s AS leafspine_exposed_s
FROM {ESTIMATES} AS o JOIN {ESTIMATES} AS l
  ON o.model_name = l.model_name AND o.nodes = l.nodes AND o.device_name = l.device_name
 AND o.algorithm = l.algorithm AND o.parallelism_bucketing = l.parallelism_bucketing
WHERE o.fabric_name = 'opsquare' AND o.fabric_host_overhead_s = 0.7e-6 AND l.fabric_name = 'nvlink_leafspine'
  AND l.fabric_nvlink_bandwidth_Bps = 450e9 AND o.fabric_transceiver_bps = 3.6e12
  AND o.algorithm = 'default' AND o.device_name = 'a100' AND o.nodes IN (256, 1024)
ORDER BY o.model_name, o.nodes
"""


QUOTE = ("With latencies in the order of single microseconds, and almost ideal throughput for local traffic, OPSquare "
         "has the potential to outperform today's standards.")


def _claims(q: Query):
    out = []
    sp = rows(q, SPEEDUP_SQL)
    us = lambda v: f"{v * 1e6:.4g} µs"  # noqa: E731
    for n in (256, 1024):
        for basis, text in BASES.items():
            mine = [r for r in sp if r["nodes"] == n and r["basis"] == basis]
            worst = min(mine, key=lambda r: r["opsquare_speedup"]) if mine else None
            v = None if worst is None else {"OPSquare": worst["opsquare_s"], "leaf-spine": worst["leafspine_s"]}
            shown = "" if worst is None else (
                f"worst {worst['opsquare_speedup']:.3f}x at {worst['bytes']} B (range "
                f"{min(r['opsquare_speedup'] for r in mine):.3f}-{max(r['opsquare_speedup'] for r in mine):.3f}x over "
                f"{len(mine)} sizes)")
            out.append(judged(
                f"{n} nodes, {text}: OPSquare outperforms the NVLink leaf-spine (all-reduce, at every size 1 KiB .. 1 GiB: "
                "judged at the size where its lead is smallest)", "OPSquare faster", v, shown,
                Beats("OPSquare", ("leaf-spine",), higher=False, fmt=us), where="Sec. 4 (analytical reading)",
                unit="s", sql=SPEEDUP_SQL, quote=QUOTE))
    return out


SECTION = Section(
    key="opsquare",
    title="OPSquare (seed 004): analytical collectives and training vs the NVLink leaf-spine",
    intro=(
        "OPSquare's N pods x M nodes with P intra-pod transceivers per node and one inter-pod transceiver "
        "(3.6 Tb/s each, 120 ns per hop — the paper's setting, so a node has (P + 1) x 3.6 Tb/s; also shown at 3.6 Tb/s "
        "per node, equal to the leaf-spine GPU), priced analytically (scheduled collectives, no contention) against the "
        "DGX-H100-SuperPOD-like leaf-spine at 256 and 1024 nodes. The packet-level study is in its own section. "
        "Experiment: <code>estimator sweep experiment=opsquare</code>."
    ),
    figures=(
        Figure("opsquare_allreduce", "All-reduce time vs buffer size: OPSquare vs leaf-spine", CURVES_SQL,
               line_plot("bytes", "time_s", ["scheme"], xlabel="buffer per node (bytes)", ylabel="time (µs)",
                         yscale=1e6, facet="nodes", facet_title=lambda n: f"{n} nodes"),
               "One panel per size. Both networks pay 0.7 µs per message; OPSquare at 3.6 Tb/s per transceiver "
               "(the paper's setting) and at 3.6 Tb/s per node."),
    ),
    tables=(
        Table("opsquare_speedup", "OPSquare speedup per size", SPEEDUP_SQL),
        Table("opsquare_training", "Training iteration (A100, data parallel)", TRAINING_SQL),
    ),
    claims=_claims,
    order=50,
    needs_tables=("collective_costs", "estimates"),
)
