"""SiPAC (seed 003): 512-CU collective patterns and bandwidth scaling vs SuperPOD / 2D torus / BCube.

Data: experiment ``sipac`` (conf/experiment/sipac.yaml), tables ``collective_costs`` and
``estimates``. Every fabric's per-CU bandwidth (the sum over its links, bytes/s) is computed in SQL
from its own parameters (:data:`PER_CU_BW`), so rows of other studies are told apart by it.
"""

from __future__ import annotations

from estimator.reports.model import Figure, Section, Table
from estimator.reports.sections.paper_helpers import (
    Query,
    bar_plot,
    judged,
    line_plot,
    pct,
    rows,
    table_with,
    times,
)

BASELINES = {"superpod": (3.6, 5.3), "torus2d": (1.4, 5.9), "bcube": (1.4, 3.4)}  # seed 003 Sec. 4 / abstract
COSTS = table_with("collective_costs", {
    "fabric_per_cu_bandwidth_bps": "DOUBLE", "fabric_nvlink_bandwidth_Bps": "DOUBLE",
    "fabric_nic_bandwidth_Bps": "DOUBLE", "fabric_link_bandwidth_Bps": "DOUBLE", "fabric_node_bandwidth_Bps": "DOUBLE",
})
PER_CU_BW = """CASE fabric_name WHEN 'sipac' THEN fabric_per_cu_bandwidth_bps / 8
  WHEN 'superpod' THEN fabric_nvlink_bandwidth_Bps + fabric_nic_bandwidth_Bps
  WHEN 'torus2d' THEN 4 * fabric_link_bandwidth_Bps WHEN 'bcube' THEN fabric_node_bandwidth_Bps END"""

PATTERNS_SQL = f"""
WITH c AS (
  SELECT fabric_name, CASE collective WHEN 'gather' THEN 'incast' ELSE collective END AS pattern,
         algorithm_used, time_s, {PER_CU_BW} AS per_cu_Bps
  FROM {COSTS} AS t
  WHERE nodes = 512 AND collective IN ('gather', 'broadcast', 'all_to_all')
    AND bytes = CASE collective WHEN 'broadcast' THEN 1048576 ELSE 536870912 END  -- 1 MB per message
    AND fabric_name IN ('sipac', 'superpod', 'torus2d', 'bcube')
    AND algorithm = CASE collective WHEN 'all_to_all' THEN 'direct' ELSE 'auto' END
)
SELECT b.pattern, b.fabric_name AS baseline, b.algorithm_used AS baseline_algorithm, s.algorithm_used AS sipac_algorithm,
       b.time_s AS baseline_s, s.time_s AS sipac_s, b.time_s / s.time_s AS sipac_speedup
FROM c b JOIN c s ON b.pattern = s.pattern AND s.fabric_name = 'sipac'
WHERE b.fabric_name <> 'sipac' AND b.per_cu_Bps = 256e9 AND s.per_cu_Bps = 256e9
ORDER BY b.fabric_name, b.pattern
"""

HYBRID_SQL = f"""
SELECT fabric_name, nodes, {PER_CU_BW} * 8 / 1e9 AS per_cu_Gbps,
       sum(time_s) AS hybrid_s, count(*) AS parts
FROM {COSTS} AS t
WHERE nodes IN (64, 512) AND bytes = 104857600 AND fabric_name IN ('sipac', 'superpod', 'torus2d', 'bcube')
  AND ((collective = 'all_reduce' AND algorithm IN ('auto', 'default')) OR (collective = 'all_to_all' AND algorithm = 'direct'))
GROUP BY ALL
HAVING count(*) = 2
ORDER BY nodes, fabric_name, per_cu_Gbps
"""

TESTBED_SQL = """
SELECT s.algorithm, s.iter_time_s AS sipac_iter_s, l.iter_time_s AS leafspine_iter_s,
       1 - s.iter_time_s / l.iter_time_s AS jct_reduction, s.algorithm_used AS sipac_algorithm,
       l.algorithm_used AS leafspine_algorithm, s.exposed_comm_time_s AS sipac_exposed_s,
       l.exposed_comm_time_s AS leafspine_exposed_s
FROM estimates s JOIN estimates l ON s.algorithm = l.algorithm AND s.model_name = l.model_name
 AND s.device_name = l.device_name AND s.nodes = l.nodes AND s.batch_size_per_device = l.batch_size_per_device
WHERE s.fabric_name = 'sipac' AND l.fabric_name = 'nvlink_leafspine' AND s.nodes = 4
  AND s.model_name = 'mobilenet_v2' AND s.device_name = 'm40' AND s.batch_size_per_device = 128
ORDER BY s.algorithm
"""

RANGE_TOL = 0.10  # a pattern's ratio holds within the paper's range widened by 10 % at each end
UNICAST = ("incast", "all_to_all")


def _pattern_judge(base: str, lo: float, hi: float, r: dict):
    def judge(v: float) -> tuple[str, str]:
        algos = f"SiPAC {r['sipac_algorithm']} {r['sipac_s'] * 1e6:.1f} us vs {base} {r['baseline_algorithm']} {r['baseline_s'] * 1e6:.1f} us"
        if lo * (1 - RANGE_TOL) <= v <= hi * (1 + RANGE_TOL):
            return "holds", f"{v:.2f}x within [{lo}, {hi}]x +- {RANGE_TOL:.0%}; {algos}"
        if v < lo and r["pattern"] in UNICAST and base == "bcube":
            return "simplified", (f"{v:.2f}x < {lo}x: same ports and routes as BCube and no switch buffering or queueing "
                                  f"in the fluid model, which is what seed 003 credits for SiPAC's gain; {algos}")
        side = "below" if v < lo else "above"
        why = {("broadcast", "below"): "SiPAC's multicast splits a port's wavelengths over r-1 peers, while the "
               "baseline's pipelined unicast tree gives each flow a whole port",
               ("broadcast", "above"): "the baseline's best broadcast is limited by its own links"}.get(
                   (r["pattern"], side), "the baseline's bottleneck in the fluid model is tighter than the paper's")
        if base == "superpod" and side == "above":
            why = ("a SuperPOD GPU takes all inter-server traffic through its one 200 Gb/s NIC (the rest of its "
                   "2048 Gb/s is NVLink to its 7 server-mates), so the pattern is NIC-bound")
        return "fails", f"{v:.2f}x {side} [{lo}, {hi}]x +- {RANGE_TOL:.0%}: {why}; {algos}"

    return judge


def _claims(q: Query):
    pats = rows(q, PATTERNS_SQL)
    out = []
    for base, (lo, hi) in BASELINES.items():
        for r in (x for x in pats if x["baseline"] == base):
            out.append(judged(
                f"512 CUs, 1 MB {r['pattern']}: SiPAC's JCT is {lo}-{hi}x better than {base}", f"{lo}-{hi}x",
                r["sipac_speedup"], times(r["sipac_speedup"]), _pattern_judge(base, lo, hi, r),
                where="Sec. 4, Fig. 4a", unit="x", sql=PATTERNS_SQL))
    hyb = rows(q, HYBRID_SQL)
    for n in (64, 512):
        pts = {f: sorted((r["per_cu_Gbps"], r["hybrid_s"]) for r in hyb if r["fabric_name"] == f and r["nodes"] == n)
               for f in ("sipac", *BASELINES)}
        sp = pts["sipac"]
        steps = [a[1] / b[1] for a, b in zip(sp, sp[1:], strict=False)] if len(sp) == 5 else None
        out.append(judged(
            f"{n} CUs, 100 MB hybrid: SiPAC's JCT keeps decreasing as per-CU bandwidth rises 128 -> 4096 Gb/s",
            "decreasing", steps, " ".join(f"{x:.2f}x" for x in steps or []),
            lambda x: ("holds" if min(x) >= 1.2 else "fails",
                       f"JCT gain per bandwidth step {', '.join(f'{v:.2f}x' for v in x)}; rule: every step >= 1.2x"),
            where="Sec. 4, Fig. 4b", unit="x per step", sql=HYBRID_SQL))
        for base in BASELINES:
            bp = pts[base]
            v = None if len(bp) != 5 or len(sp) != 5 else (bp[-2][1] / bp[-1][1], sp[-2][1] / sp[-1][1])

            def flat(x, base=base):
                text = f"2048 -> 4096 Gb/s: {base} {x[0]:.2f}x faster, SiPAC {x[1]:.2f}x"
                if x[0] < 1.5 and x[1] > x[0]:
                    return "holds", text + "; rule: baseline < 1.5x and SiPAC gains more"
                if x[0] >= 1.5:
                    return "simplified", (text + f": {base} keeps scaling with its link bandwidth because the fluid model "
                                          "has no switch buffering or queueing (seed 003 used Netbench, packet level)")
                return "fails", text + "; rule: baseline < 1.5x and SiPAC gains more"

            out.append(judged(f"{n} CUs, 100 MB hybrid: {base}'s JCT does not improve much further at high bandwidth "
                              "while SiPAC's does", "flattens", v, "" if v is None else f"{v[0]:.2f}x vs {v[1]:.2f}x",
                              flat, where="Sec. 4, Fig. 4b", unit="x", sql=HYBRID_SQL))
    tb = {r["algorithm"]: r for r in rows(q, TESTBED_SQL)}
    for alg, paper, what in (("ring", 0.08, "ring all-reduce on both"),
                             ("double_binary_tree", 0.22, "NCCL's tree all-reduce (double binary tree) on both")):
        r = tb.get(alg)
        out.append(judged(
            f"4-GPU testbed SiPAC(2,1), MobileNetV2 batch 128, {what}: JCT reduction vs a leaf-spine", pct(paper),
            r and r["jct_reduction"], pct(r and r["jct_reduction"]),
            lambda x, p=paper, r=r: ("holds" if abs(x - p) <= 0.05 else "simplified",
                                     f"|{x:.1%} - {p:.0%}| {'<=' if abs(x - p) <= 0.05 else '>'} 5 pp; "
                                     + ("" if abs(x - p) <= 0.05 else "the model has no packet buffering or RoCE "
                                        "congestion on the leaf-spine (the paper's reason: 'shorter network paths and "
                                        "less packet buffering') and compute dominates a 4 x M40 MobileNetV2 step; ")
                                     + f"iteration {r['sipac_iter_s'] * 1e3:.1f} vs {r['leafspine_iter_s'] * 1e3:.1f} ms, "
                                     f"exposed comm {r['sipac_exposed_s'] * 1e3:.2f} vs {r['leafspine_exposed_s'] * 1e3:.2f} ms"),
            where="Sec. 3, Fig. 3", unit="fraction", sql=TESTBED_SQL))
    return out


SECTION = Section(
    key="sipac",
    title="SiPAC (seed 003): silicon-photonic WSS cluster",
    intro=(
        "SiPAC(8, 2) = 512 compute units against a DGX-SuperPOD-like rail fabric, a 2D torus and an electrical "
        "BCube, all at 2048 Gb/s per CU (the sum over a CU's links), 1 MB collectives; then per-CU bandwidth "
        "128-4096 Gb/s under hybrid traffic (all-reduce + all-to-all of 100 MB) at 64 and 512 CUs, and the 4-GPU "
        "testbed. A SiPAC multicast divides a port's wavelengths among its peers; a relay costs an O/E/O hop like a "
        "BCube switch hop; the baselines run their best broadcast (pipelined chain/tree, spanning trees). "
        "Experiment: <code>estimator sweep experiment=sipac</code>."
    ),
    figures=(
        Figure("sipac_patterns_512", "SiPAC speedup over each baseline, 512 CUs, 1 MB", PATTERNS_SQL,
               bar_plot("pattern", "sipac_speedup", "baseline", xlabel="traffic pattern",
                        ylabel="baseline JCT / SiPAC JCT", logy=True),
               "Seed 003 Fig. 4a. Above 1: SiPAC is faster."),
        Figure("sipac_bandwidth_scaling", "Hybrid JCT vs per-CU bandwidth, 64 and 512 CUs, 100 MB", HYBRID_SQL,
               line_plot("per_cu_Gbps", "hybrid_s", ["nodes", "fabric_name"], xlabel="per-CU bandwidth (Gb/s)",
                         ylabel="all-reduce + all-to-all, 100 MB (ms)", yscale=1e3),
               "Seed 003 Fig. 4b: 64 and 512 CUs, 100 MB. SuperPOD's NIC stays a 200 Gb/s port; the rest is NVLink."),
    ),
    tables=(
        Table("sipac_patterns", "512-CU patterns", PATTERNS_SQL),
        Table("sipac_hybrid", "Bandwidth scaling (hybrid traffic)", HYBRID_SQL),
        Table("sipac_testbed", "4-GPU testbed (MobileNetV2, M40)", TESTBED_SQL),
    ),
    claims=_claims,
    order=30,
    needs_tables=("collective_costs", "estimates"),
)
