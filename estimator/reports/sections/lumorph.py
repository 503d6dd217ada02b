"""Lumorph (seed 000): collective time vs buffer size, BERT throughput, multi-tenant allocation.

Data: experiment ``lumorph`` (conf/experiment/lumorph.yaml) — tables ``collective_costs``,
``estimates`` and ``allocations``. "Lumorph" in a claim is the faster of Lumorph-2 and Lumorph-4 at
each size under the paper's accounting (alpha + 3.7 us on every round; the refined accounting is shown
beside it); "Tree" is NCCL's double binary tree on the ideal switch, the fastest of its unpipelined and
pipelined (8 / 64 chunks per tree) variants at each size. Claims are judged per GPU count at 1 KiB,
where alpha dominates — the regime the paper's "nearly 80%" refers to.
"""

from __future__ import annotations

from estimator.reports.model import Figure, Section, Table
from estimator.reports.sections.paper_helpers import (
    Query,
    at_least,
    judged,
    line_plot,
    pct,
    rows,
    table_with,
    times,
)

SIZES = (64, 128, 256)
SMALL = 1024  # the alpha-dominated size every "where alpha dominates" claim is judged at (smallest swept)
TOL = 0.10  # "nearly 80%": holds from 70% (10 percentage points below the paper's number)
ALPHA, RECONF = 0.7e-6, 3.7e-6  # seed 000 Sec. 4 (alpha) and Sec. 2 (MZI reconfiguration)

LUMORPH = "fabric_name = 'lumorph' AND algorithm IN ('lumorph_2', 'lumorph_4')"
COSTS = table_with("collective_costs", {"fabric_reconfig_every_round": "BOOLEAN"})

CURVES_SQL = f"""
SELECT fabric_name || ': ' || algorithm || CASE WHEN fabric_reconfig_every_round THEN ' (paper accounting)'
       WHEN fabric_name = 'lumorph' THEN ' (refined)' ELSE '' END AS scheme, nodes, bytes, time_s
FROM {COSTS} AS t
WHERE collective = 'all_reduce' AND nodes = {{n}}
  AND ((fabric_name = 'lumorph' AND algorithm IN ('lumorph_2', 'lumorph_4', 'ring', 'dnc')
        AND (fabric_reconfig_every_round OR algorithm IN ('lumorph_2', 'lumorph_4')))
       OR (fabric_name = 'ideal' AND algorithm IN ('ring', 'double_binary_tree', 'pipelined_dbt')))
ORDER BY scheme, bytes
"""

# per (nodes, bytes): the best Lumorph-k under the paper's accounting and the refined one, and Ring /
# Tree (fastest double-binary-tree variant, pipelined or not) on the ideal switch
COMPARE_SQL = f"""
SELECT nodes, bytes,
       min(time_s) FILTER (WHERE {LUMORPH} AND fabric_reconfig_every_round) AS lumorph_s,
       arg_min(algorithm, time_s) FILTER (WHERE {LUMORPH} AND fabric_reconfig_every_round) AS lumorph_algorithm,
       min(time_s) FILTER (WHERE {LUMORPH} AND NOT fabric_reconfig_every_round) AS lumorph_refined_s,
       min(time_s) FILTER (WHERE fabric_name = 'ideal' AND algorithm = 'ring') AS ring_s,
       min(time_s) FILTER (WHERE fabric_name = 'ideal' AND algorithm IN ('double_binary_tree', 'pipelined_dbt',
                                                                       'pipelined_dbt64')) AS tree_s,
       arg_min(algorithm, time_s) FILTER (WHERE fabric_name = 'ideal' AND algorithm IN ('double_binary_tree',
                                         'pipelined_dbt', 'pipelined_dbt64')) AS tree_algorithm,
       1 - lumorph_s / ring_s AS less_than_ring,
       1 - lumorph_s / tree_s AS less_than_tree,
       1 - lumorph_refined_s / tree_s AS refined_less_than_tree
FROM {COSTS} AS t
WHERE collective = 'all_reduce' AND nodes IN (64, 128, 256) AND fabric_name IN ('lumorph', 'ideal')
GROUP BY nodes, bytes
HAVING lumorph_s IS NOT NULL AND ring_s IS NOT NULL AND tree_s IS NOT NULL
ORDER BY nodes, bytes
"""

ESTIMATES = table_with("estimates", {"fabric_reconfig_every_round": "BOOLEAN"})
BERT_SQL = f"""
WITH l AS (
  SELECT nodes, parallelism_bucketing AS bucketing,
         CASE WHEN fabric_reconfig_every_round THEN 'paper' ELSE 'refined' END AS accounting,
         max(samples_per_s) AS lumorph_samples_per_s, arg_max(algorithm, samples_per_s) AS lumorph_algorithm,
         arg_max(exposed_comm_time_s, samples_per_s) AS lumorph_exposed_s, any_value(num_collectives) AS num_collectives
  FROM {ESTIMATES} AS t
  WHERE model_name = 'bert_base' AND device_name = 'a100' AND fabric_name = 'lumorph'
    AND algorithm IN ('lumorph_2', 'lumorph_4') AND fabric_reconfig_every_round IS NOT NULL AND nodes IN (64, 128, 256)
  GROUP BY ALL
)
SELECT l.nodes, l.bucketing, l.accounting, l.lumorph_samples_per_s, l.lumorph_algorithm,
       r.samples_per_s AS ring_samples_per_s, l.lumorph_samples_per_s / r.samples_per_s AS speedup,
       l.lumorph_exposed_s, r.exposed_comm_time_s AS ring_exposed_s, l.num_collectives
FROM l JOIN estimates r ON l.nodes = r.nodes AND l.bucketing = r.parallelism_bucketing
WHERE r.model_name = 'bert_base' AND r.device_name = 'a100' AND r.fabric_name = 'ideal' AND r.algorithm = 'ring'
ORDER BY l.bucketing DESC, l.accounting, l.nodes
"""

ALLOC_SQL = """
SELECT algorithm AS policy, max_size AS largest_request, capacity AS gpus, count(*) AS streams,
       sum(placed) AS placed, sum(rejected) AS rejected, sum(rejected_fragmented) AS rejected_fragmented,
       sum(overallocated) AS rounded_up, sum(stranded_gpu_s) AS stranded_gpu_s, avg(utilisation) AS utilisation
FROM allocations
GROUP BY algorithm, max_size, capacity
ORDER BY largest_request, policy
"""


def lumorph_alpha_rounds(n: int) -> dict[int, int]:
    """All-reduce rounds of Lumorph-k (k = 2, 4) on ``n`` GPUs: 2 x (number of mixed-radix digits)."""
    from estimator.fabrics.lumorph import radix_digits

    return {k: 2 * len(radix_digits(n, k)) for k in (2, 4)}


def tree_alpha_bound(n: int) -> str:
    """The paper's own alpha arithmetic at an alpha-dominated size: Lumorph-k's rounds each pay
    alpha + reconfiguration, a (pipelined) double binary tree pays 2H rounds of alpha."""
    rounds = lumorph_alpha_rounds(n)
    best_k = min(rounds, key=rounds.get)
    h = (n - 1).bit_length()
    lum = rounds[best_k] * (ALPHA + RECONF)
    tree = 2 * h * ALPHA
    return (f"paper's own numbers at N={n}: Lumorph-{best_k} = {rounds[best_k]} rounds x (0.7 + 3.7 us) = "
            f"{lum * 1e6:.1f} us of latency; NCCL's tree = 2 x {h} levels x 0.7 us = {tree * 1e6:.1f} us, so the best "
            f"Lumorph can do there is 1 - {lum * 1e6:.1f}/{tree * 1e6:.1f} = {1 - lum / tree:.0%} (not ~80%)"), 1 - lum / tree


def _claims(q: Query):
    comp = rows(q, COMPARE_SQL)
    small = {r["nodes"]: r for r in comp if r["bytes"] == SMALL}
    out = []
    fig = "Sec. 4, Fig. 4(b)"
    for n in SIZES:
        r = small.get(n)
        out.append(judged(
            f"{n} GPUs, {SMALL} B (alpha-dominated): Lumorph-2/-4 all-reduce takes nearly 80% less time than Ring on an "
            "ideal switch", "≈80% (abstract: 74%)", r and r["less_than_ring"], pct(r and r["less_than_ring"]),
            at_least(0.80 - TOL, lambda v: f"{v:.1%}", f"(80% - {TOL:.0%} tolerance); {r and r['lumorph_algorithm']} with "
                     "the paper's accounting (0.7 + 3.7 us every round); refined accounting: "
                     f"{pct(r and 1 - r['lumorph_refined_s'] / r['ring_s'])}"),
            where=fig, unit="fraction", sql=COMPARE_SQL))
    for n in SIZES:
        r = small.get(n)
        text, bound = tree_alpha_bound(n)

        def judge(v, r=r, text=text, bound=bound):
            if v >= 0.80 - TOL:
                return "holds", f"{v:.1%} >= 70% vs {r['tree_algorithm']}"
            tail = (f"; project: Lumorph {r['lumorph_s'] * 1e6:.1f} us ({r['lumorph_algorithm']}, paper accounting; "
                    f"refined {r['lumorph_refined_s'] * 1e6:.1f} us) vs Tree {r['tree_s'] * 1e6:.1f} us ({r['tree_algorithm']})")
            if bound < 0.80 - TOL:
                return "paper-inconsistent", text + tail
            return "fails", f"{v:.1%} < 70%" + tail

        out.append(judged(
            f"{n} GPUs, {SMALL} B (alpha-dominated): Lumorph-2/-4 takes nearly 80% less time than Tree (NCCL's pipelined "
            "double binary tree) on an ideal switch", "≈80%", r and r["less_than_tree"], pct(r and r["less_than_tree"]),
            judge, where=fig, unit="fraction", sql=COMPARE_SQL))
    for a, b in zip(SIZES, SIZES[1:], strict=False):
        ra, rb = small.get(a), small.get(b)
        v = None if ra is None or rb is None else (ra["less_than_ring"], rb["less_than_ring"])

        def grows(x, a=a, b=b):
            ok = x[1] > x[0]
            return ("holds" if ok else "fails", f"reduction vs Ring at {SMALL} B: {a} GPUs {x[0]:.1%} "
                    f"{'<' if ok else '>='} {b} GPUs {x[1]:.1%}")

        out.append(judged(f"Lumorph's advantage over Ring grows from {a} to {b} GPUs", f"{a} < {b}", v,
                          "" if v is None else f"{v[0]:.1%} -> {v[1]:.1%}", grows, where="Sec. 4", unit="fraction",
                          sql=COMPARE_SQL))
    all_bert = rows(q, BERT_SQL)
    bert = [r for r in all_bert if r["bucketing"] == "none" and r["accounting"] == "paper"]
    refined = {r["nodes"]: r["speedup"] for r in all_bert if r["bucketing"] == "none" and r["accounting"] == "refined"}
    v = max((r["speedup"] for r in bert), default=None)

    def bert_judge(x):
        per = ", ".join(f"{r['nodes']}: {times(r['speedup'])} (refined {times(refined.get(r['nodes']))})" for r in bert)
        if abs(x - 1.7) <= 0.35:
            return "holds", f"max over GPU counts (the paper's 'up to') {x:.2f}x within 1.7 +- 0.35x; {per}"
        return "simplified", (f"{x:.2f}x is outside 1.7 +- 0.35x: the paper's FlexFlow-optimised BERT graph (its "
                              "all-reduce sizes) is not available, so the model issues one all-reduce per gradient "
                              f"tensor of data-parallel BERT-base on A100s; {per}")

    out.append(judged("BERT training throughput on Lumorph up to 1.7x Ring on the ideal switch (many small all-reduces)",
                      "1.7x", v, times(v), bert_judge, where="Sec. 4, Fig. 4(a)", unit="x", sql=BERT_SQL))
    alloc = rows(q, ALLOC_SQL)
    lum = {r["largest_request"]: r for r in alloc if r["policy"] == "lumorph"}
    if lum:
        bad = sum(r["rejected_fragmented"] + r["rounded_up"] for r in lum.values())
        out.append(judged(
            "Lumorph slices a rack for any tenant size without fragmentation", "0", bad, f"{bad} fragmented requests",
            lambda x: ("simplified", f"{x} by construction, not a measurement: the Lumorph policy places any request "
                       "while enough GPUs are free because the model, like the paper ('given enough fibers between "
                       "servers'), never runs out of inter-server fibres; the measured claims are the ones below"),
            where="Sec. 3, Fig. 2(a)", unit="requests", sql=ALLOC_SQL))
    for r in alloc:
        if r["policy"] == "lumorph" or r["largest_request"] not in lum:
            continue
        size, mine = r["largest_request"], lum[r["largest_request"]]
        frag = r["rejected_fragmented"] + r["rounded_up"]
        out.append(judged(
            f"Fixed-shape slices ({r['policy']}) fragment a 256-GPU rack (requests up to {size} GPUs)", "> 0",
            frag, f"{frag} fragmented / rounded-up requests",
            lambda x, r=r: ("holds" if x > 0 else "fails",
                            f"{r['rejected_fragmented']} rejected with enough GPUs free + {r['rounded_up']} given a "
                            f"larger slice, over {r['streams']} seeded streams"),
            where="Sec. 3", unit="requests", sql=ALLOC_SQL))
        gain = mine["utilisation"] - r["utilisation"]
        out.append(judged(
            f"Lumorph uses the rack better than {r['policy']} (requests up to {size} GPUs)", "higher utilisation",
            gain, f"{mine['utilisation']:.1%} vs {r['utilisation']:.1%}",
            lambda x: ("holds" if x > 0.005 else "fails",
                       f"utilisation gain {x:+.1%} {'>' if x > 0.005 else '<='} 0.5 pp tolerance (same request streams)"),
            where="Sec. 3", unit="fraction", sql=ALLOC_SQL))
    return out


FIGURES = tuple(
    Figure(
        name=f"lumorph_allreduce_{n}",
        title=f"All-reduce time vs buffer size, {n} GPUs (Lumorph vs ideal switch)",
        sql=CURVES_SQL.format(n=n),
        plot=line_plot("bytes", "time_s", ["scheme"], xlabel="buffer per GPU (bytes)", ylabel="time (µs)",
                       yscale=1e6),
        caption="Seed 000 Fig. 4(b). Paper accounting: every Lumorph round pays alpha 0.7 µs + MZI reconfiguration 3.7 µs; refined: only rounds that change circuits pay 3.7 µs.",
    )
    for n in SIZES
) + (
    Figure(
        name="lumorph_bert_speedup",
        title="BERT-base throughput: Lumorph (faster of Lumorph-2/-4) over Ring on the ideal switch",
        sql=BERT_SQL,
        plot=line_plot("nodes", "speedup", ["bucketing", "accounting"], xlabel="GPUs", ylabel="speedup (x)", logy=False),
        caption="bucketing=none: one all-reduce per gradient tensor (the paper's many small all-reduces); ddp: 25 MiB buckets.",
    ),
    Figure(
        name="lumorph_allocation_utilisation",
        title="Multi-tenant rack (256 GPUs): utilisation by allocation policy",
        sql=ALLOC_SQL,
        plot=line_plot("largest_request", "utilisation", ["policy"], xlabel="largest request (GPUs)",
                       ylabel="utilisation", logy=False),
        caption="Requested GPU-seconds / (rack GPUs x span), averaged over the seeded request streams.",
    ),
)

SECTION = Section(
    key="lumorph",
    title="Lumorph (seed 000): photonic multi-accelerator rack",
    intro=(
        "Lumorph-k all-reduce (radix-k halving/doubling over per-round MZI circuits) on 64-256 GPUs against NCCL "
        "Ring and Tree on an ideal non-blocking switch (300 GB/s, alpha 0.7 µs), BERT-base data parallel, and a "
        "multi-tenant allocation study. Experiment: <code>estimator sweep experiment=lumorph</code>."
    ),
    figures=FIGURES,
    tables=(
        Table("lumorph_vs_baselines", "Lumorph vs Ring and Tree per size", COMPARE_SQL),
        Table("lumorph_bert", "BERT-base throughput", BERT_SQL),
        Table("lumorph_allocation", "Allocation policies on a 256-GPU rack", ALLOC_SQL),
    ),
    claims=_claims,
    order=20,
    needs_tables=("collective_costs", "estimates", "allocations"),
)
