"""Reconfigurable OCS (seed 001): training speed per (model x all-reduce algorithm x topology).

Data: experiment ``ocs`` (conf/experiment/ocs.yaml), table ``estimates``. "Best topology" in a
claim is the fastest of the three the OCS wires (ring, torus2d, btree); one_switch and fattree are
the paper's references and appear in the figure and table only.
"""

from __future__ import annotations

from estimator.fabrics.ocs import PAPER_NAMES
from estimator.reports.model import Figure, Section, Table
from estimator.reports.sections.paper_helpers import Query, bar_plot, claim, rows, table_with

ESTIMATES = table_with("estimates", {"fabric_topology": "VARCHAR", "fabric_inner_node_delay_s": "DOUBLE"})
WIRED = ("ring", "torus2d", "btree")
PAPER_ALGO = "CASE algorithm " + " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in PAPER_NAMES.items()) + " END"

SPEED_SQL = f"""
SELECT model_name, algorithm, {PAPER_ALGO} AS paper_algorithm, fabric_topology AS topology, samples_per_s,
       iter_time_s, exposed_comm_time_s
FROM {ESTIMATES} AS t
WHERE fabric_name = 'ocs' AND nodes = 32 AND device_name = 'm40' AND parallelism_bucketing = 'horovod'
  AND fabric_inner_node_delay_s = 87e-6
ORDER BY model_name, algorithm, topology
"""

BEST_SQL = f"""
WITH s AS ({SPEED_SQL.replace("ORDER BY model_name, algorithm, topology", "")})
SELECT model_name, paper_algorithm, algorithm, arg_max(topology, samples_per_s) AS best_topology,
       max(samples_per_s) AS best_samples_per_s,
       max(samples_per_s) FILTER (WHERE topology = 'ring') AS ring,
       max(samples_per_s) FILTER (WHERE topology = 'torus2d') AS torus2d,
       max(samples_per_s) FILTER (WHERE topology = 'btree') AS btree
FROM s WHERE topology IN {WIRED}
GROUP BY ALL
ORDER BY model_name, paper_algorithm
"""


def _claims(q: Query):
    best = rows(q, BEST_SQL)
    out = []

    def winners(algorithm: str) -> list[dict]:
        return [r for r in best if r["algorithm"] == algorithm]

    def count(rs: list[dict], ok) -> tuple[int, int] | None:
        return (sum(1 for r in rs if ok(r)), len(rs)) if rs else None

    def shown(c: tuple[int, int] | None, rs: list[dict]) -> str:
        return f"{c[0]} of {c[1]} models" if c else ""

    def per_model(rs: list[dict]) -> str:
        return ", ".join(f"{r['model_name']}: {r['best_topology']}" for r in rs)

    rs = winners("torus2d")
    c = count(rs, lambda r: r["best_topology"] == "torus2d")
    out.append(claim("Under Torus all-reduce the Torus topology wins", "all models", c, shown(c, rs),
                     lambda x: x[0] == x[1], per_model(rs)))
    for alg in ("double_binary_tree", "recursive_doubling"):
        rs = winners(alg)
        c = count(rs, lambda r: r["torus2d"] > max(r["ring"], r["btree"]))
        out.append(claim(f"Under {PAPER_NAMES[alg]} all-reduce, Torus beats Ring and Binary Tree", "all models", c,
                         shown(c, rs), lambda x: x[0] == x[1], per_model(rs)))
    rs = winners("binary_tree")
    c = count(rs, lambda r: r["best_topology"] == "btree")
    out.append(claim("Binary Tree is the best topology for BTree all-reduce", "all models", c, shown(c, rs),
                     lambda x: x[0] == x[1], per_model(rs)))
    distinct = {r["best_topology"] for r in best}
    by_model = {}
    for r in best:
        by_model.setdefault(r["algorithm"], set()).add(r["best_topology"])
    varies = sum(1 for s in by_model.values() if len(s) > 1)
    out.append(claim(
        "The best topology depends on both the algorithm and the model", "yes",
        (len(distinct), varies) if best else None,
        f"{len(distinct)} different winning topologies; {varies} algorithms whose winner changes with the model",
        lambda x: x[0] > 1 and x[1] > 0, "winners: " + ", ".join(sorted(distinct)),
    ))
    r50 = {r["algorithm"]: r for r in best if r["model_name"] == "resnet50"}
    for alg, topo, text in (("ring", "ring", "Ring all-reduce -> Ring topology"),
                            ("recursive_doubling", "torus2d", "RD -> reconfigure to Torus")):
        r = r50.get(alg)
        out.append(claim(f"32-node ResNet50 prototype: {text} is fastest", topo, r["best_topology"] if r else None,
                         f"{r['best_topology']} ({r['best_samples_per_s']:.0f} samples/s)" if r else "",
                         lambda x, t=topo: x == t,
                         f"samples/s ring {r['ring']:.0f}, torus {r['torus2d']:.0f}, btree {r['btree']:.0f}" if r else ""))
    return out


SECTION = Section(
    key="ocs",
    title="Reconfigurable optical circuit switch (seed 001)",
    intro=(
        "32 servers with one Tesla M40 and four 100 Gb/s ports each; a MEMS OCS wires them as a ring, a 2D torus or a "
        "binary tree (one-switch and 3-level fat tree as references); seven all-reduce algorithms; Horovod tensor "
        "fusion (1 MB, 10 µs) and the paper's Table I delays. Experiment: <code>estimator sweep experiment=ocs</code>."
    ),
    figures=tuple(
        Figure(f"ocs_{m}", f"{m}: training speed per all-reduce algorithm and topology (32 x M40)",
               SPEED_SQL.replace("WHERE fabric_name", f"WHERE model_name = '{m}' AND fabric_name"),
               bar_plot("paper_algorithm", "samples_per_s", "topology", xlabel="all-reduce algorithm",
                        ylabel="samples / s"),
               "Seed 001 Sec. IV. HD = halving-doubling, our seventh algorithm.")
        for m in ("lenet5", "resnet50", "vgg13", "bert_base")
    ),
    tables=(Table("ocs_best", "Best OCS-wired topology per model and algorithm (samples/s)", BEST_SQL),),
    claims=_claims,
    order=60,
    needs_tables=("estimates",),
)
