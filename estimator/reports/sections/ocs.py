"""Reconfigurable OCS (seed 001): training speed per (model x all-reduce algorithm x topology).

Data: experiment ``ocs`` (conf/experiment/ocs.yaml), table ``estimates``. "Best topology" in a
claim is the fastest of the three the OCS wires (ring, torus2d, btree); one_switch and fattree are
the paper's references and appear in the figure and table only.
"""

from __future__ import annotations

from estimator.fabrics.ocs import PAPER_NAMES
from estimator.reports.model import Figure, Section, Table
from estimator.reports.sections.paper_helpers import Query, bar_plot, judged, rows, table_with

ESTIMATES = table_with("estimates", {"fabric_topology": "VARCHAR", "fabric_inner_node_delay_s": "DOUBLE"})
WIRED = ("ring", "torus2d", "btree")
PAPER_ALGO = "CASE algorithm " + " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in PAPER_NAMES.items()) + " END"

TIE = 0.001  # rows 0.1 % apart are a tie, and a tie is not a win
SIM_SIZES = (16, 32, 64)

SPEED_SQL = f"""
SELECT model_name, algorithm, {PAPER_ALGO} AS paper_algorithm, fabric_topology AS topology, samples_per_s,
       iter_time_s, exposed_comm_time_s
FROM {ESTIMATES} AS t
WHERE fabric_name = 'ocs' AND nodes = 32 AND device_name = 'm40' AND parallelism_bucketing = 'horovod'
  AND fabric_inner_node_delay_s = 87e-6
ORDER BY model_name, algorithm, topology
"""

# the simulation study: RTX 2080 Ti, every size, samples/s per topology
SIM_SQL = f"""
SELECT model_name, nodes, algorithm, {PAPER_ALGO} AS paper_algorithm,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'ring') AS ring,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'torus2d') AS torus2d,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'btree') AS btree,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'fattree') AS fattree,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'one_switch') AS one_switch
FROM {ESTIMATES} AS t
WHERE fabric_name = 'ocs' AND device_name = 'rtx2080ti' AND parallelism_bucketing = 'horovod'
  AND fabric_inner_node_delay_s = 87e-6
GROUP BY ALL
ORDER BY model_name, nodes, paper_algorithm
"""

SIM_LONG_SQL = f"""
SELECT model_name, {PAPER_ALGO} AS paper_algorithm, fabric_topology AS topology, samples_per_s
FROM {ESTIMATES} AS t
WHERE fabric_name = 'ocs' AND device_name = 'rtx2080ti' AND nodes = 32 AND parallelism_bucketing = 'horovod'
  AND fabric_inner_node_delay_s = 87e-6
ORDER BY model_name, paper_algorithm, topology
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

NAME = {"ring": "Ring", "torus2d": "Torus", "btree": "Binary Tree", "fattree": "Fattree"}
NON_IDEAL = ("ring", "torus2d", "btree", "fattree")  # "except the ideal network"
ALGO = {v: k for k, v in PAPER_NAMES.items()}

# (model, paper algorithm, winner topology, topologies it must beat, sizes, the paper's words)
STATEMENTS = (
    ("lenet5", "Ring", "btree", NON_IDEAL, SIM_SIZES, "Fig. 3: Ring all-reduce is fastest on the Binary Tree topology"),
    ("lenet5", "Torus", "torus2d", NON_IDEAL, SIM_SIZES, "Fig. 3: under Torus all-reduce the Torus topology has an obvious advantage"),
    ("lenet5", "Ring", "ring", NON_IDEAL, SIM_SIZES[:1], "Fig. 3: Ring all-reduce: the Ring topology is best with a small system"),
    ("lenet5", "PSLike", "ring", NON_IDEAL, SIM_SIZES[:1], "Fig. 3: PSLike all-reduce: the Ring topology is best with a small system"),
    ("lenet5", "DBTree", "torus2d", ("ring", "btree"), SIM_SIZES, "Fig. 3: under DBTree all-reduce Torus beats Ring and Binary Tree"),
    ("lenet5", "RD", "torus2d", ("ring", "btree"), SIM_SIZES, "Fig. 3: under RD all-reduce Torus beats Ring and Binary Tree"),
    ("resnet50", "PSLike", "torus2d", NON_IDEAL, SIM_SIZES, "Fig. 4: under PSLike all-reduce the Torus topology has the advantage"),
    ("resnet50", "Ring", "btree", NON_IDEAL, SIM_SIZES, "Fig. 4 ('similar trends to Lenet'): Ring all-reduce is fastest on Binary Tree"),
    ("resnet50", "Torus", "torus2d", NON_IDEAL, SIM_SIZES, "Fig. 4 ('similar trends to Lenet'): Torus all-reduce is fastest on Torus"),
    ("resnet50", "DBTree", "torus2d", ("ring", "btree"), SIM_SIZES, "Fig. 4 ('similar trends to Lenet'): under DBTree Torus beats Ring and Binary Tree"),
    ("resnet50", "RD", "torus2d", ("ring", "btree"), SIM_SIZES, "Fig. 4 ('similar trends to Lenet'): under RD Torus beats Ring and Binary Tree"),
    *(("vgg13", a, "torus2d", ("ring", "btree"), SIM_SIZES, f"Fig. 5: under {a} all-reduce Torus beats Ring and Binary Tree")
      for a in ("Ring", "PSLike", "RD", "DBTree", "Torus")),
    ("vgg13", "BTree", "btree", NON_IDEAL, SIM_SIZES, "Fig. 5: under BTree all-reduce Binary Tree is the optimal topology"),
)


def _wins(row: dict, winner: str, rivals: tuple[str, ...]):
    def judge(_: object) -> tuple[str, str]:
        speeds = ", ".join(f"{NAME[t]} {row[t]:.1f}" for t in (winner, *rivals) if t != winner)
        best_rival = max((t for t in rivals if t != winner), key=lambda t: row[t])
        margin = row[winner] / row[best_rival] - 1
        if margin > TIE:
            return "holds", f"{NAME[winner]} {row[winner]:.1f} samples/s is {margin:.2%} above the best rival ({speeds})"
        word = "ties with" if margin >= -TIE else "loses to"
        note = (" (our fattree bonds a server's 4 ports into one 400 Gb/s host link, conf/fabric/ocs.yaml — the paper's "
                "Table I gives 100 Gbps links and does not say how its fat tree attaches a server)"
                if best_rival == "fattree" else "")
        return "fails", (f"{NAME[winner]} {row[winner]:.1f} samples/s {word} {NAME[best_rival]} "
                         f"({margin:+.2%}; a tie is within {TIE:.1%}); others: {speeds}{note}")

    return judge


def _claims(q: Query):
    sim = {(r["model_name"], r["nodes"], r["paper_algorithm"]): r for r in rows(q, SIM_SQL)}
    out = []
    for model, alg, winner, rivals, sizes, text in STATEMENTS:
        for n in sizes:
            r = sim.get((model, n, alg))
            ok = r is not None and all(r[t] is not None for t in (winner, *rivals))
            out.append(judged(f"{model}, {n} x RTX 2080 Ti — {text.split(': ', 1)[1]}", NAME[winner],
                              r[winner] if ok else None, f"{r[winner]:.1f} samples/s" if ok else "",
                              _wins(r, winner, rivals) if ok else None, where=f"Sec. IV, {text.split(':')[0]}",
                              unit="samples/s", sql=SIM_SQL))
    # "the optimal topology is related to allreduce algorithm and training model": per size, do the winners
    # (among the non-ideal topologies) differ across algorithms, and does some algorithm's winner change with the model?
    for n in SIM_SIZES:
        rs = [r for (m, size, a), r in sim.items() if size == n and all(r[t] is not None for t in NON_IDEAL)]
        if not rs:
            out.append(judged(f"{n} x RTX 2080 Ti: the best topology depends on both the algorithm and the model", "yes",
                              None, "", None, where="Sec. IV", sql=SIM_SQL))
            continue
        win = {(r["model_name"], r["paper_algorithm"]): max(NON_IDEAL, key=lambda t, r=r: r[t]) for r in rs}
        by_alg: dict[str, set[str]] = {}
        by_model: dict[str, set[str]] = {}
        for (m, a), t in win.items():
            by_alg.setdefault(a, set()).add(t)
            by_model.setdefault(m, set()).add(t)
        model_dep = sorted(a for a, ts in by_alg.items() if len(ts) > 1)
        alg_dep = sorted(m for m, ts in by_model.items() if len(ts) > 1)
        out.append(judged(
            f"{n} x RTX 2080 Ti: the best topology depends on both the algorithm and the model", "yes",
            (len(alg_dep), len(model_dep)), f"{len(alg_dep)} models with algorithm-dependent winners; "
            f"{len(model_dep)} algorithms with model-dependent winners",
            lambda x, a=alg_dep, m=model_dep: ("holds" if x[0] and x[1] else "fails",
                                               f"winner depends on the algorithm for {a or 'no model'}; on the model for "
                                               f"{m or 'no algorithm'} (winners among Ring/Torus/Binary Tree/Fattree)"),
            where="Sec. IV", unit="count", sql=SIM_SQL))
    r50 = {r["algorithm"]: r for r in rows(q, BEST_SQL) if r["model_name"] == "resnet50"}
    for alg, topo, other, text in (("ring", "ring", "torus2d", "Ring all-reduce -> Ring topology"),
                                   ("recursive_doubling", "torus2d", "ring", "RD -> reconfigure to Torus")):
        r = r50.get(alg)
        out.append(judged(
            f"32-node ResNet50 prototype (M40): {text} is fastest", NAME[topo], r and r[topo],
            f"{r[topo]:.1f} samples/s" if r else "", _wins(r, topo, (other,)) if r else None,
            where="Sec. V, Fig. 6 (the OCS wires Ring or Torus)", unit="samples/s", sql=BEST_SQL))
    return out


MODELS = ("lenet5", "resnet50", "vgg13", "bert_base")


def _speed_figure(name: str, title: str, sql: str, model: str, note: str) -> Figure:
    """Bars of samples/s per paper algorithm, one colour per topology, for one model."""
    return Figure(name, title, sql.replace("WHERE fabric_name", f"WHERE model_name = '{model}' AND fabric_name"),
                  bar_plot("paper_algorithm", "samples_per_s", "topology", xlabel="all-reduce algorithm",
                           ylabel="samples / s"), note)


SECTION = Section(
    key="ocs",
    title="Reconfigurable optical circuit switch (seed 001)",
    intro=(
        "32 servers with one Tesla M40 and four 100 Gb/s ports each; a MEMS OCS wires them as a ring, a 2D torus or a "
        "binary tree (one-switch and 3-level fat tree as references); seven all-reduce algorithms; Horovod tensor "
        "fusion (1 MB, 10 µs) and the paper's Table I delays; the simulation study on RTX 2080 Ti compute at 16, 32 and 64 "
        "servers, every per-model statement of Sec. IV judged per size (a topology wins only by more than 0.1 %). "
        "Experiment: <code>estimator sweep experiment=ocs</code>."
    ),
    figures=tuple(
        _speed_figure(f"ocs_{m}", f"{m}: training speed per all-reduce algorithm and topology (32 x M40)",
                      SPEED_SQL, m, "Seed 001 Sec. IV. HD = halving-doubling, our seventh algorithm.")
        for m in MODELS
    ) + tuple(
        _speed_figure(f"ocs_sim_{m}", f"{m}: samples/s per algorithm and topology (simulation, 32 x RTX 2080 Ti)",
                      SIM_LONG_SQL, m,
                      "Seed 001 Figs. 3-5 (simulation; 16 and 64 servers are in the table). HD = halving-doubling.")
        for m in MODELS
    ),
    tables=(Table("ocs_simulation", "Simulation (RTX 2080 Ti): samples/s per topology, model, size and algorithm",
                  SIM_SQL),
            Table("ocs_best", "Prototype (32 x M40): best OCS-wired topology per model and algorithm", BEST_SQL)),
    claims=_claims,
    order=60,
    needs_tables=("estimates",),
)
